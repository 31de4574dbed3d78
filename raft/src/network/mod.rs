//! Peer RPC between quorum members over TCP: the three raft RPCs (AppendEntries, Vote,
//! InstallSnapshot) and Brook's own, answered by the metadata leader: `Propose` (a
//! forwarded [`Command`]), `AddLearner` (a broker-only node asking to follow the log,
//! KRaft's observer), `Heartbeat` (broker liveness, never logged), `UpdateVoter` (a voter
//! of a static quorum publishing its directory id) and `UpgradeVoters` (the `kraft.version`
//! upgrade that records every voter's directory id).
//!
//! Wire format (see `raft/FORMAT.md`): each message is a frame of a 4-byte big-endian length
//! followed by that many bytes of serde_json. A connection carries one request, then its
//! response, then the next request; clients reconnect after any error. Frames above
//! [`MAX_FRAME_BYTES`] are refused on both sides, so a corrupt length cannot make a peer
//! allocate without bound.
//!
//! Clients: [`PeerClient`] (one per target, created by openraft for the raft RPCs) and
//! `PeerPool` (pooled connections for forwarded requests). Server: [`RaftServer`]. Every
//! connection runs over TLS when the node is given a [`PeerTls`] (`tls.rs`), and is logged in
//! with SASL before its first raft frame when it is given a [`PeerSasl`] (`sasl.rs`).

mod client;
mod conn;
pub(crate) mod pool;
pub mod sasl;
mod server;
pub mod sniff;
mod tls;

use crate::QuorumNode;
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::RaftMetrics;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub use client::{NetworkFactory, PeerClient};
pub(crate) use server::serve;
pub(crate) mod attach;
pub use sasl::{AuthenticatedPeer, PeerAuthenticator, PeerLogin, PeerSasl};
pub use server::RaftServer;
pub use tls::{PeerIo, PeerStream, PeerTls};

use crate::command::{ApplyResult, Command};
use crate::liveness::{Heartbeat, HeartbeatReply};
use crate::TypeConfig;

/// Largest frame accepted: snapshot chunks default to 3 MiB and append batches are bounded
/// by openraft's `max_payload_entries`, so 64 MiB leaves ample headroom.
pub const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

/// A request from one quorum member to another.
#[derive(Debug, Serialize, Deserialize)]
pub enum RpcRequest {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<u64>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    /// Replicate this command; sent by a non-leader to the leader.
    Propose(Command),
    /// Add the sender as a learner (non-voting member) reachable at `addr`; a controller of
    /// a dynamic quorum, joining as an observer, also sends its directory id (KIP-853).
    AddLearner {
        node_id: u64,
        addr: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        directory_id: Option<String>,
    },
    /// A broker's liveness heartbeat, forwarded to the leader (the controller).
    Heartbeat(Heartbeat),
    /// The leader's raft metrics (its view of every voter's and observer's log): what
    /// DescribeQuorum answers on any node, as Kafka's brokers forward it to the controller.
    LeaderMetrics,
    /// A broker process holds this connection open for as long as it lives (`attach.rs`):
    /// every voter sees the moment it closes, so a killed broker is fenced at once.
    Attach {
        broker_id: i32,
        broker_epoch: u64,
    },
    /// A raft RPC (AppendEntries, Vote, InstallSnapshot) for the member the sender's
    /// membership knows by this directory id: KIP-853's replica key. A node whose own
    /// directory id differs (the same node id on a disk wiped and formatted again) answers
    /// [`RpcResponse::NotThisReplica`] instead of serving it, so a voter's empty successor
    /// neither votes nor counts towards a commit until it is added under its new id.
    ToReplica {
        directory_id: String,
        rpc: Box<RpcRequest>,
    },
    /// A voter whose membership entry has no directory id (a `controller.quorum.voters`
    /// quorum) tells the leader its own, as a Kafka voter does with UpdateRaftVoter at
    /// `kraft.version` 0: the leader keeps it for its term, to record it when the quorum is
    /// upgraded ([`RpcRequest::UpgradeVoters`]).
    UpdateVoter {
        node_id: u64,
        directory_id: String,
    },
    /// The `kraft.version` 1 upgrade of the voter set (KIP-853): every voter's directory id
    /// recorded in the membership, once the leader knows them all. `validate_only` checks
    /// and changes nothing (`kafka-features --dry-run`).
    UpgradeVoters {
        validate_only: bool,
    },
}

/// The answer to an [`RpcRequest`] of the same variant.
#[derive(Debug, Serialize, Deserialize)]
pub enum RpcResponse {
    AppendEntries(Result<AppendEntriesResponse<u64>, RaftError<u64>>),
    Vote(Result<VoteResponse<u64>, RaftError<u64>>),
    InstallSnapshot(Result<InstallSnapshotResponse<u64>, RaftError<u64, InstallSnapshotError>>),
    Propose(LeaderReply<Committed>),
    /// `Ok(index)`: the learner is a member; it is caught up once it has applied `index`.
    AddLearner(LeaderReply<u64>),
    Heartbeat(LeaderReply<HeartbeatReply>),
    LeaderMetrics(LeaderReply<Box<RaftMetrics<u64, QuorumNode>>>),
    Attach,
    /// A [`RpcRequest::ToReplica`] refused: this node's directory id (if it has one).
    NotThisReplica {
        directory_id: Option<String>,
    },
    UpdateVoter(LeaderReply<()>),
    UpgradeVoters(LeaderReply<VoterDirectoryIds>),
}

/// What the leader knows of the voters' directory ids, for the `kraft.version` 1 upgrade.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum VoterDirectoryIds {
    /// Every voter's is known (and, unless the upgrade was only validated, now recorded).
    Known,
    /// This voter (the lowest such id) never published its directory id to this leader:
    /// Kafka refuses an upgrade while a controller has not registered.
    Unregistered(u64),
    /// Some voter published its directory id to this leader only in an earlier term: a
    /// Kafka leader starts each epoch from the voter set in the log, and refuses the
    /// upgrade until every voter has sent it UpdateRaftVoter again.
    NotThisTerm,
}

/// The answer to a request only the leader serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LeaderReply<T> {
    Ok(T),
    /// This node is not the leader; retry at the one named, if known.
    NotLeader {
        leader_id: Option<u64>,
        leader_addr: Option<String>,
    },
    /// The leader could not serve the request now (lost leadership mid-way, timed out,
    /// refused the request); the reason is for logs.
    Unavailable {
        reason: String,
    },
}

/// A forwarded proposal, committed and applied on the leader.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Committed {
    /// The raft log index of the entry: the proposer waits until its own image has
    /// applied it, so that it reads its own write.
    pub index: u64,
    pub result: ApplyResult,
}

/// Why a frame could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("peer i/o failed")]
    Io(#[from] std::io::Error),
    #[error("frame of {len} bytes exceeds the {MAX_FRAME_BYTES} byte limit")]
    TooLarge { len: usize },
    #[error("malformed frame body")]
    Json(#[from] serde_json::Error),
}

/// Writes one length-prefixed JSON frame and flushes it.
pub async fn write_frame<W, T>(writer: &mut W, message: &T) -> Result<(), FrameError>
where
    W: tokio::io::AsyncWrite + Unpin,
    T: Serialize,
{
    let body = serde_json::to_vec(message)?;
    let len = u32::try_from(body.len())
        .ok()
        .filter(|&l| l as usize <= MAX_FRAME_BYTES)
        .ok_or(FrameError::TooLarge { len: body.len() })?;
    writer.write_all(&len.to_be_bytes()).await?;
    writer.write_all(&body).await?;
    writer.flush().await?;
    Ok(())
}

/// Reads one frame; `Ok(None)` on a clean end of stream before the length prefix.
pub async fn read_frame<R, T>(reader: &mut R) -> Result<Option<T>, FrameError>
where
    R: tokio::io::AsyncRead + Unpin,
    T: DeserializeOwned,
{
    let mut len = [0u8; 4];
    match reader.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME_BYTES {
        return Err(FrameError::TooLarge { len });
    }
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).await?;
    Ok(Some(serde_json::from_slice(&body)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip_and_oversized_lengths_are_refused() {
        let mut buf = Vec::new();
        write_frame(&mut buf, &vec![1u32, 2, 3])
            .await
            .expect("write");
        assert_eq!(&buf[..4], &7u32.to_be_bytes());
        let back: Option<Vec<u32>> = read_frame(&mut buf.as_slice()).await.expect("read");
        assert_eq!(back, Some(vec![1, 2, 3]));

        let empty: Option<Vec<u32>> = read_frame(&mut &b""[..]).await.expect("eof");
        assert_eq!(empty, None);

        let huge = (MAX_FRAME_BYTES as u32 + 1).to_be_bytes();
        let err = read_frame::<_, Vec<u32>>(&mut &huge[..]).await;
        assert!(matches!(err, Err(FrameError::TooLarge { len }) if len == MAX_FRAME_BYTES + 1));
    }

    #[test]
    fn brook_rpcs_have_the_documented_json_shape() {
        let add = RpcRequest::AddLearner {
            node_id: 4,
            addr: "127.0.0.1:9093".into(),
            directory_id: None,
        };
        assert_eq!(
            serde_json::to_string(&add).expect("serializable"),
            r#"{"AddLearner":{"node_id":4,"addr":"127.0.0.1:9093"}}"#
        );
        let committed = RpcResponse::Propose(LeaderReply::Ok(Committed {
            index: 12,
            result: Ok(()),
        }));
        assert_eq!(
            serde_json::to_string(&committed).expect("serializable"),
            r#"{"Propose":{"Ok":{"index":12,"result":{"Ok":null}}}}"#
        );
        let addressed = RpcRequest::ToReplica {
            directory_id: "JEXY6aqzQY-32P5TStzaFg".into(),
            rpc: Box::new(RpcRequest::LeaderMetrics),
        };
        assert_eq!(
            serde_json::to_string(&addressed).expect("serializable"),
            r#"{"ToReplica":{"directory_id":"JEXY6aqzQY-32P5TStzaFg","rpc":"LeaderMetrics"}}"#
        );
        let redirect: LeaderReply<u64> = LeaderReply::NotLeader {
            leader_id: Some(2),
            leader_addr: Some("h:1".into()),
        };
        assert_eq!(
            serde_json::to_string(&redirect).expect("serializable"),
            r#"{"NotLeader":{"leader_id":2,"leader_addr":"h:1"}}"#
        );
    }
}
