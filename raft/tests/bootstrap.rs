//! Bootstrap records (`brook format`): a voter whose metadata was empty at start proposes the
//! records of its bootstrap file once it leads (the controller loop does), they are applied
//! once, and a node whose metadata log ran before ignores its file, as Kafka ignores
//! bootstrap metadata for a non-empty metadata log.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use brook_raft::{
    Command, MetadataImage, MetadataQuorum, QuorumConfig, ScramCredentialImage, ScramUpsertion,
};

fn scram(user: &str) -> Command {
    Command::AlterUserScramCredentials {
        upsertions: vec![ScramUpsertion {
            user: user.into(),
            mechanism: 2,
            credential: ScramCredentialImage {
                salt: vec![1],
                stored_key: vec![2],
                server_key: vec![3],
                iterations: 4096,
            },
        }],
        deletions: Vec::new(),
    }
}

/// Starts a single voter in `dir` with its controller loop, waits until the image is
/// bootstrapped, and stops it; returns that image.
async fn run_until_bootstrapped(dir: &Path) -> anyhow::Result<Arc<MetadataImage>> {
    let quorum = Arc::new(MetadataQuorum::start(QuorumConfig::single(1, dir)).await?);
    tokio::time::timeout(Duration::from_secs(20), quorum.wait_ready()).await??;
    let controller = {
        let quorum = quorum.clone();
        tokio::spawn(async move { brook_raft::controller::run(&quorum).await })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !quorum.image().bootstrapped {
        anyhow::ensure!(Instant::now() < deadline, "not bootstrapped within 20 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    controller.abort();
    let _ = controller.await;
    let image = quorum.image();
    Arc::into_inner(quorum)
        .ok_or_else(|| anyhow::anyhow!("quorum still shared"))?
        .shutdown()
        .await?;
    Ok(image)
}

fn users(image: &MetadataImage) -> Vec<&str> {
    image.scram_credentials.keys().map(String::as_str).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_voter_applies_its_bootstrap_records_once_and_a_later_file_is_ignored(
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    brook_raft::bootstrap::write(dir.path(), &[scram("admin"), scram("broker")])?;
    let first = run_until_bootstrapped(dir.path()).await?;
    assert_eq!(users(&first), ["admin", "broker"]);
    // Formatted again behind the node's back: the metadata log ran before, the file is ignored.
    brook_raft::bootstrap::write(dir.path(), &[scram("mallory")])?;
    let second = run_until_bootstrapped(dir.path()).await?;
    assert_eq!(users(&second), ["admin", "broker"]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voter_that_ran_before_never_proposes_a_file_written_later() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let start = || async {
        let quorum = MetadataQuorum::start(QuorumConfig::single(1, dir.path())).await?;
        tokio::time::timeout(Duration::from_secs(20), quorum.wait_ready()).await??;
        anyhow::Ok(quorum)
    };
    let quorum = start().await?;
    assert!(
        quorum.is_leader() && quorum.bootstrap_due().is_none(),
        "not formatted"
    );
    quorum
        .propose(Command::SetClusterId {
            cluster_id: "c".into(),
        })
        .await?;
    quorum.shutdown().await?;
    brook_raft::bootstrap::write(dir.path(), &[scram("admin")])?;
    let quorum = start().await?;
    assert!(quorum.is_leader() && !quorum.image().bootstrapped);
    assert!(quorum.bootstrap_due().is_none(), "the file is ignored");
    quorum.shutdown().await?;
    Ok(())
}
