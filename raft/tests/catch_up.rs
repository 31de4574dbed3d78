//! Nodes that fall behind or start empty catch up: by InstallSnapshot once the log they
//! need is purged, from scratch after a wiped data dir, and as learners (broker-only nodes).

mod common;

use std::sync::Arc;

use brook_raft::{ApplyError, ProposeError};
use common::{create_topic, propose_many, Cluster};
use uuid::Uuid;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voter_down_during_10000_commits_catches_up_through_a_snapshot() -> anyhow::Result<()> {
    let mut cluster = Cluster::start(3).await?;
    let leader = cluster.agreed_leader(None).await?;
    let lagging = cluster.followers(leader)[0];
    cluster.stop(lagging).await?;

    let node = Arc::new(cluster.nodes.remove(&leader).expect("leader runs"));
    let started = std::time::Instant::now();
    propose_many(node.clone(), 10_000, 200).await?;
    eprintln!("10,000 commits in {:?}", started.elapsed());
    let node = Arc::into_inner(node).expect("no other owner left");
    let id = Uuid::new_v4();
    node.propose(create_topic("last", id, 1)).await?;
    cluster.nodes.insert(leader, node);
    let metrics = cluster.node(leader)?.raft_metrics();
    let purged = metrics.purged.map_or(0, |p| p.index);
    assert!(purged > 5_000, "the leader purged its log: {metrics:?}");

    cluster.start_node(lagging).await?;
    cluster.wait_ready(lagging).await?;
    let expected = cluster.node(leader)?.image();
    cluster.converged(lagging, &expected).await?;
    let caught_up = cluster.node(lagging)?.raft_metrics();
    assert!(
        caught_up.snapshot.map_or(0, |s| s.index) > purged,
        "caught up through a snapshot: {caught_up:?}"
    );
    cluster.shutdown().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voter_whose_data_dir_was_wiped_rejoins_and_catches_up() -> anyhow::Result<()> {
    let mut cluster = Cluster::start(3).await?;
    let leader = cluster.agreed_leader(None).await?;
    let wiped = cluster.followers(leader)[0];
    for i in 0..20 {
        cluster
            .node(leader)?
            .propose(create_topic(&format!("t{i}"), Uuid::new_v4(), 1))
            .await?;
    }
    cluster.stop(wiped).await?;
    cluster.wipe(wiped)?;
    cluster.start_node(wiped).await?;
    cluster.wait_ready(wiped).await?;
    let expected = cluster.node(leader)?.image();
    cluster.converged(wiped, &expected).await?;
    assert_eq!(cluster.node(wiped)?.image().topics.len(), 20);
    cluster.shutdown().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_joins_follows_forwards_and_rejoins_after_a_restart() -> anyhow::Result<()> {
    let mut cluster = Cluster::start(3).await?;
    let leader = cluster.agreed_leader(None).await?;
    let before = Uuid::new_v4();
    cluster
        .node(leader)?
        .propose(create_topic("before", before, 1))
        .await?;

    cluster.add_learner(4).await?;
    let learner = cluster.node(4)?;
    // Ready means caught up with what was committed when it joined.
    assert_eq!(
        learner.image().topic("before").map(|t| t.topic_id),
        Some(before)
    );
    assert_eq!(learner.voters(), vec![1, 2, 3]);
    assert_eq!(learner.learners(), vec![4]);
    assert_eq!(cluster.node(leader)?.learners(), vec![4]);
    assert_eq!(learner.leader(), Some(leader));

    // It follows new writes and forwards its own, reading them back at once.
    let mine = Uuid::new_v4();
    learner
        .propose(create_topic("from-learner", mine, 1))
        .await?;
    assert_eq!(
        learner.image().topic("from-learner").map(|t| t.topic_id),
        Some(mine)
    );
    let dup = learner
        .propose(create_topic("before", Uuid::new_v4(), 1))
        .await;
    assert!(
        matches!(
            &dup,
            Err(ProposeError::Apply(ApplyError::TopicAlreadyExists { .. }))
        ),
        "{dup:?}"
    );
    let old_addr = learner.local_addr();

    // Restarted on a new ephemeral port, it asks again and the leader follows the move.
    cluster.stop(4).await?;
    cluster
        .node(leader)?
        .propose(create_topic("while-away", Uuid::new_v4(), 1))
        .await?;
    cluster.start_node(4).await?;
    cluster.wait_ready(4).await?;
    assert_ne!(cluster.node(4)?.local_addr(), old_addr);
    let after = Uuid::new_v4();
    cluster
        .node(leader)?
        .propose(create_topic("after", after, 1))
        .await?;
    let expected = cluster.node(leader)?.image();
    cluster.converged(4, &expected).await?;
    assert_eq!(cluster.node(4)?.learners(), vec![4]);
    cluster.shutdown().await
}
