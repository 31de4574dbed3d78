//! Incremental fetch sessions (KIP-227), and how a Fetch request resolves its session into
//! the partitions it fetches (`resolve`).
//!
//! A consumer opens a session with (session 0, epoch 0), then sends only what changed
//! (epoch 1, 2, …); the broker remembers the session's partitions and their fetch
//! positions and answers only partitions with news. Epoch -1 closes a session. Sessions
//! are bounded in number; the least recently used goes first.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use brook_protocol::kafka_protocol::messages::FetchRequest;
use brook_protocol::kafka_protocol::ResponseError;
use parking_lot::Mutex;

use super::Wanted;

/// At most this many sessions live at once (Kafka's `max.incremental.fetch.session.cache.slots`).
const MAX_SESSIONS: usize = 1000;

/// A partition as a session knows it: by topic id (Fetch v13+) or name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SessionPartition {
    pub topic: String,
    pub topic_id: uuid::Uuid,
    pub partition: i32,
}

/// What the client asked for, and what the broker last told it.
#[derive(Debug, Clone, Default)]
pub struct PartitionState {
    pub fetch_offset: i64,
    pub partition_max_bytes: i32,
    pub last_high_watermark: Option<i64>,
    pub last_log_start_offset: Option<i64>,
}

#[derive(Debug)]
struct Session {
    next_epoch: i32,
    /// Opened by a Fetch v13+ (partitions by topic id) or an older one (by name): its
    /// partitions are keyed one way, so every later request must name them the same way.
    uses_topic_ids: bool,
    partitions: BTreeMap<SessionPartition, PartitionState>,
    last_used: Instant,
}

/// The outcome of looking up a session for a request.
pub enum SessionLookup {
    /// No session: a full, sessionless fetch.
    Sessionless,
    /// A new session was opened (full fetch).
    New { session_id: i32 },
    /// An existing session moved to its next epoch (incremental fetch).
    Incremental { session_id: i32 },
    /// The session id is unknown (`FETCH_SESSION_ID_NOT_FOUND`).
    NotFound,
    /// The epoch is not the expected one (`INVALID_FETCH_SESSION_EPOCH`).
    InvalidEpoch,
    /// A session opened with topic ids continued by names or the other way round
    /// (`FETCH_SESSION_TOPIC_ID_ERROR`, as Kafka's FetchManager answers).
    TopicIdMismatch,
}

pub struct FetchSessions {
    sessions: Mutex<HashMap<i32, Session>>,
    next_id: Mutex<i32>,
}

impl Default for FetchSessions {
    fn default() -> Self {
        Self::new()
    }
}

impl FetchSessions {
    pub fn new() -> Self {
        FetchSessions {
            sessions: Mutex::new(HashMap::new()),
            next_id: Mutex::new(1),
        }
    }

    /// Resolves (session_id, epoch) from a request, opening or closing sessions;
    /// `uses_topic_ids`: the request names partitions by topic id (Fetch v13+).
    ///
    /// A Java consumer whose metadata briefly lacks topic ids (after a rebootstrap, when
    /// the broker restarted) sends Fetch v12 and, once the ids are back, continues the
    /// same session with v13+. Its partitions added by name cannot be answered under a
    /// topic id, so such a request is refused, as Kafka does, and the client opens a new
    /// session; accepted, the by-name partitions were answered under the nil topic id,
    /// which the client drops, and never again (their high watermark was "sent").
    pub fn lookup(&self, session_id: i32, epoch: i32, uses_topic_ids: bool) -> SessionLookup {
        let mut sessions = self.sessions.lock();
        match (session_id, epoch) {
            (id, 0) => {
                // KIP-227: epoch 0 is a full fetch that opens a new session; with a
                // non-zero id it first closes that session (franz-go resets its session
                // this way after INVALID_FETCH_SESSION_EPOCH; Kafka's FetchManager too).
                if id != 0 {
                    sessions.remove(&id);
                }
                if sessions.len() >= MAX_SESSIONS {
                    if let Some(oldest) = sessions
                        .iter()
                        .min_by_key(|(_, s)| s.last_used)
                        .map(|(id, _)| *id)
                    {
                        sessions.remove(&oldest);
                    }
                }
                let id = {
                    let mut next = self.next_id.lock();
                    let id = *next;
                    *next = if *next == i32::MAX { 1 } else { *next + 1 };
                    id
                };
                sessions.insert(
                    id,
                    Session {
                        next_epoch: 1,
                        uses_topic_ids,
                        partitions: BTreeMap::new(),
                        last_used: Instant::now(),
                    },
                );
                SessionLookup::New { session_id: id }
            }
            (0, _) => SessionLookup::Sessionless,
            (id, -1) => {
                sessions.remove(&id);
                SessionLookup::Sessionless
            }
            (id, epoch) => match sessions.get_mut(&id) {
                None => SessionLookup::NotFound,
                Some(s) if s.next_epoch != epoch => SessionLookup::InvalidEpoch,
                Some(s) if s.uses_topic_ids != uses_topic_ids => SessionLookup::TopicIdMismatch,
                Some(s) => {
                    s.next_epoch = if epoch == i32::MAX { 1 } else { epoch + 1 };
                    s.last_used = Instant::now();
                    SessionLookup::Incremental { session_id: id }
                }
            },
        }
    }

    /// Applies a request's partitions (added or updated) and forgotten partitions to a
    /// session, and returns the session's whole partition set to fetch.
    pub fn update(
        &self,
        session_id: i32,
        upserts: Vec<(SessionPartition, i64, i32)>,
        forgotten: &[SessionPartition],
    ) -> Vec<(SessionPartition, PartitionState)> {
        let mut sessions = self.sessions.lock();
        let Some(session) = sessions.get_mut(&session_id) else {
            return Vec::new();
        };
        for p in forgotten {
            session.partitions.remove(p);
        }
        for (p, fetch_offset, max_bytes) in upserts {
            let state = session.partitions.entry(p).or_default();
            state.fetch_offset = fetch_offset;
            state.partition_max_bytes = max_bytes;
        }
        session
            .partitions
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Records what was last sent for a partition; returns whether it changed (and so
    /// belongs in an incremental response).
    pub fn record_sent(
        &self,
        session_id: i32,
        partition: &SessionPartition,
        high_watermark: i64,
        log_start_offset: i64,
    ) -> bool {
        let mut sessions = self.sessions.lock();
        let Some(state) = sessions
            .get_mut(&session_id)
            .and_then(|s| s.partitions.get_mut(partition))
        else {
            return true;
        };
        let changed = state.last_high_watermark != Some(high_watermark)
            || state.last_log_start_offset != Some(log_start_offset);
        state.last_high_watermark = Some(high_watermark);
        state.last_log_start_offset = Some(log_start_offset);
        changed
    }
}

/// Resolves the request's session: the session id (0: none), whether the fetch is
/// incremental, and the partitions to fetch; or the session error to answer with. A new
/// session starts from exactly what was asked; an incremental request changes the
/// session's set, and the whole set is fetched. The session keeps offsets and sizes;
/// leader epochs are checked only for the partitions this request names.
pub(in crate::handlers) fn resolve(
    sessions: &FetchSessions,
    req: &FetchRequest,
    by_id: bool,
    asked: Vec<Wanted>,
    forgotten: Vec<SessionPartition>,
) -> Result<(i32, bool, Vec<Wanted>), ResponseError> {
    let (session_id, incremental) = match sessions.lookup(req.session_id, req.session_epoch, by_id)
    {
        SessionLookup::Sessionless => (0, false),
        SessionLookup::New { session_id } => (session_id, false),
        SessionLookup::Incremental { session_id } => (session_id, true),
        SessionLookup::NotFound => return Err(ResponseError::FetchSessionIdNotFound),
        SessionLookup::InvalidEpoch => return Err(ResponseError::InvalidFetchSessionEpoch),
        SessionLookup::TopicIdMismatch => return Err(ResponseError::FetchSessionTopicIdError),
    };
    if session_id == 0 {
        return Ok((0, false, asked));
    }
    let epochs: HashMap<SessionPartition, i32> = asked
        .iter()
        .map(|w| (w.key.clone(), w.current_leader_epoch))
        .collect();
    let requested = asked
        .into_iter()
        .map(|w| (w.key, w.fetch_offset, w.partition_max_bytes))
        .collect();
    let forgotten: &[SessionPartition] = if incremental { &forgotten } else { &[] };
    let wanted = sessions
        .update(session_id, requested, forgotten)
        .into_iter()
        .map(|(key, s)| Wanted {
            current_leader_epoch: epochs.get(&key).copied().unwrap_or(-1),
            last_fetched_epoch: -1,
            denied: false,
            key,
            fetch_offset: s.fetch_offset,
            partition_max_bytes: s.partition_max_bytes,
        })
        .collect();
    Ok((session_id, incremental, wanted))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> SessionPartition {
        SessionPartition {
            topic: "t".into(),
            topic_id: uuid::Uuid::nil(),
            partition: p,
        }
    }

    #[test]
    fn a_session_opens_advances_its_epoch_and_closes() {
        let sessions = FetchSessions::new();
        let SessionLookup::New { session_id } = sessions.lookup(0, 0, true) else {
            panic!("expected a new session");
        };
        let all = sessions.update(session_id, vec![(tp(0), 5, 100), (tp(1), 7, 100)], &[]);
        assert_eq!(all.len(), 2);
        assert!(matches!(
            sessions.lookup(session_id, 1, true),
            SessionLookup::Incremental { .. }
        ));
        assert!(matches!(
            sessions.lookup(session_id, 1, true),
            SessionLookup::InvalidEpoch
        ));
        let all = sessions.update(session_id, vec![], &[tp(0)]);
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].1.fetch_offset, 7);
        assert!(matches!(
            sessions.lookup(session_id, -1, true),
            SessionLookup::Sessionless
        ));
        assert!(matches!(
            sessions.lookup(session_id, 3, true),
            SessionLookup::NotFound
        ));
    }

    #[test]
    fn epoch_zero_with_a_session_id_closes_it_and_opens_a_new_one() {
        let sessions = FetchSessions::new();
        let SessionLookup::New { session_id: old } = sessions.lookup(0, 0, true) else {
            panic!("expected a new session");
        };
        let SessionLookup::New { session_id: new } = sessions.lookup(old, 0, true) else {
            panic!("epoch 0 with an id must open a new session");
        };
        assert_ne!(new, old);
        assert!(matches!(
            sessions.lookup(old, 1, true),
            SessionLookup::NotFound
        ));
        assert!(matches!(
            sessions.lookup(new, 1, true),
            SessionLookup::Incremental { .. }
        ));
    }

    #[test]
    fn a_session_continued_with_the_other_partition_naming_is_refused() {
        let sessions = FetchSessions::new();
        // Opened by names (Fetch v12), continued by topic ids (v13+): refused, epoch kept.
        let SessionLookup::New { session_id } = sessions.lookup(0, 0, false) else {
            panic!("no session");
        };
        assert!(matches!(
            sessions.lookup(session_id, 1, true),
            SessionLookup::TopicIdMismatch
        ));
        assert!(matches!(
            sessions.lookup(session_id, 1, false),
            SessionLookup::Incremental { .. }
        ));
        // The client's answer: close it and open a new one, which may use topic ids.
        let SessionLookup::New { session_id: new } = sessions.lookup(session_id, 0, true) else {
            panic!("no new session");
        };
        assert!(matches!(
            sessions.lookup(new, 1, true),
            SessionLookup::Incremental { .. }
        ));
        assert!(matches!(
            sessions.lookup(new, 2, false),
            SessionLookup::TopicIdMismatch
        ));
    }

    #[test]
    fn unchanged_partitions_are_left_out_of_incremental_responses() {
        let sessions = FetchSessions::new();
        let SessionLookup::New { session_id } = sessions.lookup(0, 0, true) else {
            panic!("expected a new session");
        };
        sessions.update(session_id, vec![(tp(0), 0, 100)], &[]);
        assert!(sessions.record_sent(session_id, &tp(0), 10, 0));
        assert!(!sessions.record_sent(session_id, &tp(0), 10, 0));
        assert!(sessions.record_sent(session_id, &tp(0), 11, 0));
    }
}
