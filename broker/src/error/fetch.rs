//! Why a Fetch request's session (KIP-227) is refused: the whole response carries the
//! code, no partition is read. `crate::error::fetch_session_code` maps each to its code.

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FetchSessionError {
    /// The session id is not (or no longer) in this broker's cache.
    #[error("fetch session not found")]
    NotFound,
    /// The request's session epoch is not the next one of the session.
    #[error("invalid fetch session epoch")]
    InvalidEpoch,
    /// A partition's topic id differs from the one the session recorded.
    #[error("fetch session topic id mismatch")]
    TopicIdMismatch,
}
