//! Multi-voter quorums over loopback TCP: elections and failover, forwarding from
//! followers, and what happens without a majority.

mod common;

use std::time::{Duration, Instant};

use brook_raft::{ApplyError, MetadataQuorum, ProposeError, QuorumConfig};
use common::{create_topic, heartbeat, Cluster};
use uuid::Uuid;

/// Kills (cleanly stops) the leader and returns how long the others took to agree on a
/// new one.
async fn failover(voters: u64) -> anyhow::Result<()> {
    let mut cluster = Cluster::start(voters).await?;
    let leader = cluster.agreed_leader(None).await?;
    for id in cluster.nodes.keys() {
        assert_eq!(
            cluster.node(*id)?.voters(),
            (1..=voters).collect::<Vec<_>>()
        );
    }

    cluster.stop(leader).await?;
    let stopped = Instant::now();
    let new_leader = cluster.agreed_leader(Some(leader)).await?;
    let took = stopped.elapsed();
    assert!(took < Duration::from_secs(5), "failover took {took:?}");
    eprintln!("{voters} voters: leader {leader} -> {new_leader} in {took:?}");

    // The new leader commits, and the old one catches up when it returns.
    let id = Uuid::new_v4();
    cluster
        .node(new_leader)?
        .propose(create_topic("after-failover", id, 1))
        .await?;
    cluster.start_node(leader).await?;
    cluster.wait_ready(leader).await?;
    let expected = cluster.node(new_leader)?.image();
    cluster.converged(leader, &expected).await?;
    cluster.shutdown().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_voters_agree_on_a_leader_and_replace_a_dead_one_within_seconds() -> anyhow::Result<()>
{
    failover(3).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_voters_agree_on_a_leader_and_replace_a_dead_one_within_seconds() -> anyhow::Result<()>
{
    failover(5).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_forwards_proposals_and_reads_its_own_write() -> anyhow::Result<()> {
    let cluster = Cluster::start(3).await?;
    let leader = cluster.agreed_leader(None).await?;
    let follower_id = cluster.followers(leader)[0];
    let follower = cluster.node(follower_id)?;
    assert!(!follower.is_leader());

    let id = Uuid::new_v4();
    follower.propose(create_topic("forwarded", id, 2)).await?;
    // No waiting: `propose` returned only once the follower's own image has the write.
    assert_eq!(
        follower.image().topic("forwarded").map(|t| t.topic_id),
        Some(id)
    );

    let dup = follower
        .propose(create_topic("forwarded", Uuid::new_v4(), 1))
        .await;
    assert!(
        matches!(&dup, Err(ProposeError::Apply(ApplyError::TopicAlreadyExists { name })) if name == "forwarded"),
        "{dup:?}"
    );

    // Heartbeats reach the leader's liveness from a follower too.
    let hb = heartbeat(7, follower.image().applied_index())?;
    follower.heartbeat(hb.clone()).await?;
    cluster.node(leader)?.heartbeat(hb).await?;

    let metrics = cluster.node(leader)?.raft_metrics();
    let replication = metrics
        .replication
        .expect("the leader reports replication progress");
    assert_eq!(replication.len(), 3, "{replication:?}");
    cluster.shutdown().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_majority_propose_fails_at_its_deadline_and_recovers_with_it(
) -> anyhow::Result<()> {
    let mut cluster = Cluster::start(3).await?;
    let leader = cluster.agreed_leader(None).await?;
    let followers = cluster.followers(leader);
    for &f in &followers {
        cluster.stop(f).await?;
    }

    // The leader cannot commit: the proposal ends at its deadline, not in a hang.
    let started = Instant::now();
    let lonely = cluster
        .node(leader)?
        .propose_within(
            create_topic("lost", Uuid::new_v4(), 1),
            Duration::from_secs(2),
        )
        .await;
    let took = started.elapsed();
    assert!(
        matches!(lonely, Err(ProposeError::Timeout { .. })),
        "{lonely:?}"
    );
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(4),
        "{took:?}"
    );

    // A returning follower restores the majority.
    cluster.start_node(followers[0]).await?;
    cluster.wait_ready(followers[0]).await?;
    let leader = cluster.agreed_leader(None).await?;
    let id = Uuid::new_v4();
    cluster
        .node(followers[0])?
        .propose(create_topic("back", id, 1))
        .await?;
    assert_eq!(
        cluster
            .node(leader)?
            .image()
            .topic("back")
            .map(|t| t.topic_id),
        Some(id)
    );
    cluster.shutdown().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voter_starts_while_its_peers_are_down_and_is_ready_once_they_come() -> anyhow::Result<()>
{
    let mut cluster = Cluster::new(3, (500, 500))?;
    cluster.start_node(1).await?;
    let alone = cluster.node(1)?;
    assert_eq!(alone.leader(), None);
    let started = Instant::now();
    let early = alone
        .propose_within(
            create_topic("early", Uuid::new_v4(), 1),
            Duration::from_millis(500),
        )
        .await;
    assert!(
        matches!(early, Err(ProposeError::Timeout { .. })),
        "{early:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    let hb = heartbeat(1, 0)?;
    assert!(alone.heartbeat(hb).await.is_err());

    cluster.start_node(2).await?;
    cluster.start_node(3).await?;
    cluster.wait_ready_all().await?;
    cluster.agreed_leader(None).await?;
    cluster
        .node(1)?
        .propose(create_topic("late", Uuid::new_v4(), 1))
        .await?;
    cluster.shutdown().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contradictory_roles_are_refused_at_start() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let voters = [
        (1, "127.0.0.1:1".to_string()),
        (2, "127.0.0.1:2".to_string()),
    ];
    let not_a_voter = QuorumConfig {
        voters: voters.iter().cloned().collect(),
        listen: Some("127.0.0.1:0".parse()?),
        ..QuorumConfig::single(3, dir.path())
    };
    assert!(matches!(
        MetadataQuorum::start(not_a_voter).await,
        Err(brook_raft::RaftError::InvalidConfig { .. })
    ));
    let learner_in_voters = QuorumConfig {
        role: brook_raft::NodeRole::Learner,
        voters: voters.iter().cloned().collect(),
        listen: Some("127.0.0.1:0".parse()?),
        ..QuorumConfig::single(1, dir.path())
    };
    assert!(matches!(
        MetadataQuorum::start(learner_in_voters).await,
        Err(brook_raft::RaftError::InvalidConfig { .. })
    ));
    Ok(())
}
