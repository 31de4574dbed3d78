//! Fetch planning against a real partition in a temporary directory, without sockets.

use brook_storage::{MinOneBatch, StorageError};

use super::{FollowerFetch, ReadBound};
use crate::error::BrokerError;
use crate::partition::append::{NoVerify, RequiredAcks};
use crate::partition::testing::{batch, Fixture};

const MAX: usize = 1 << 20;

async fn append(f: &Fixture, count: usize) {
    f.partition
        .append_as_leader(batch(count), RequiredAcks::Leader, None::<NoVerify>, 0)
        .await
        .expect("append");
}

#[tokio::test]
async fn consumers_read_to_the_high_watermark_and_followers_to_the_log_end() {
    let f = Fixture::leader(&[1, 2], &[1, 2], 1);
    append(&f, 3).await;
    let consumer = f
        .partition
        .plan_read(0, MAX, ReadBound::HighWatermark)
        .await;
    assert_eq!(consumer.high_watermark, 0, "follower 2 holds nothing yet");
    assert!(
        matches!(consumer.read, Ok(None)),
        "nothing readable below the high watermark"
    );
    let follower = f.partition.plan_read(0, MAX, ReadBound::LogEnd).await;
    let planned = follower.read.expect("plans").expect("a read");
    let read = planned.execute(MAX, MinOneBatch::Yes).expect("reads");
    assert!(!read.records.is_empty());
    assert_eq!(
        f.partition
            .record_follower_fetch(2, 7, 3, 0, None, 1)
            .await
            .expect("recorded"),
        FollowerFetch::Recorded { wake_isr: true },
        "the high watermark moved"
    );
    let consumer = f
        .partition
        .plan_read(0, MAX, ReadBound::HighWatermark)
        .await;
    assert_eq!(consumer.high_watermark, 3);
    assert!(matches!(consumer.read, Ok(Some(_))));
}

#[tokio::test]
async fn a_fetch_offset_past_the_log_end_is_out_of_range() {
    let f = Fixture::leader(&[1], &[1], 1);
    append(&f, 2).await;
    let plan = f
        .partition
        .plan_read(5, MAX, ReadBound::HighWatermark)
        .await;
    assert!(matches!(
        plan.read,
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    assert_eq!((plan.log_start_offset, plan.high_watermark), (0, 2));
}

#[tokio::test]
async fn read_committed_readers_get_the_aborted_transactions_of_their_range() {
    let f = Fixture::leader(&[1], &[1], 1);
    append(&f, 2).await;
    let committed = f.partition.plan_read(0, MAX, ReadBound::LastStable).await;
    assert_eq!(committed.last_stable_offset, 2);
    assert_eq!(committed.aborted.map(|a| a.len()), Some(0));
    let uncommitted = f
        .partition
        .plan_read(0, MAX, ReadBound::HighWatermark)
        .await;
    assert!(uncommitted.aborted.is_none());
}

#[tokio::test]
async fn a_follower_ahead_of_the_leaders_epoch_end_diverges_and_is_not_recorded() {
    let f = Fixture::leader(&[1, 2], &[1, 2], 1);
    append(&f, 3).await;
    let answer = f
        .partition
        .record_follower_fetch(2, 7, 5, 0, None, 1)
        .await
        .expect("answered");
    assert_eq!(
        answer,
        FollowerFetch::Diverging {
            epoch: 0,
            end_offset: 3
        }
    );
    assert_eq!(
        f.leader_state().follower(2).map(|s| s.log_end_offset),
        Some(-1)
    );
}

#[tokio::test]
async fn only_followers_and_only_at_the_leaders_epoch_are_recorded() {
    let f = Fixture::leader(&[1, 2], &[1, 2], 1);
    let stranger = f
        .partition
        .record_follower_fetch(9, 7, 0, -1, None, 1)
        .await;
    assert!(matches!(
        stranger,
        Err(BrokerError::NotLeaderOrFollower { leader: 1, .. })
    ));
    let fenced = f
        .partition
        .record_follower_fetch(2, 7, 0, -1, Some(-2), 1)
        .await;
    assert!(fenced.is_ok(), "-1 and below skip the epoch check");
    let newer = f
        .partition
        .record_follower_fetch(2, 7, 0, -1, Some(1), 1)
        .await;
    assert!(matches!(newer, Err(BrokerError::UnknownLeaderEpoch { .. })));
}

#[tokio::test]
async fn offsets_only_plans_no_read_but_still_refuses_an_offset_out_of_range() {
    let f = Fixture::leader(&[1], &[1], 1);
    append(&f, 4).await;
    let planned = f
        .partition
        .plan_read(0, MAX, ReadBound::HighWatermark)
        .await
        .read
        .expect("plans")
        .expect("a read");
    let read = planned.execute(MAX, MinOneBatch::Yes).expect("reads");
    assert_eq!(
        planned.bytes_at_most(),
        read.records.len() as u64,
        "everything from offset 0 to the end"
    );
    let small = f
        .partition
        .plan_read(0, 10, ReadBound::HighWatermark)
        .await
        .read
        .expect("plans")
        .expect("a read");
    assert_eq!(small.bytes_at_most(), 10, "within the partition's limit");
    let offsets = f
        .partition
        .plan_offsets_only(1, ReadBound::HighWatermark)
        .await;
    assert_eq!(offsets.high_watermark, 4);
    assert_eq!(offsets.log_start_offset, 0);
    assert!(matches!(offsets.read, Ok(None)), "offsets, no read");
    let beyond = f
        .partition
        .plan_offsets_only(9, ReadBound::HighWatermark)
        .await;
    assert!(matches!(
        beyond.read,
        Err(StorageError::OffsetOutOfRange {
            requested: 9,
            log_start: 0,
            log_end: 4
        })
    ));
}
