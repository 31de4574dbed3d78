//! The waiting mechanism on a real partition, with tokio's paused clock: time moves only
//! when every task waits, so deadlines are exact and the tests take no real time.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Delayed, Wake, Watch};
use crate::partition::append::{NoVerify, RequiredAcks};
use crate::partition::replica::Role;
use crate::partition::testing::{batch, Fixture};
use crate::replication::acks::{wait_for_high_watermark, NotReplicated};

const LONG: Duration = Duration::from_secs(3_600);

/// Appends 3 records as leader with acks=all and returns the offset an acknowledgement
/// waits for.
async fn append_three(f: &Fixture) -> i64 {
    let appended = f
        .partition
        .append_as_leader(batch(3), RequiredAcks::All, None::<NoVerify>, 0)
        .await
        .expect("append");
    appended.info.last_offset + 1
}

fn spawn_acks_wait(
    f: &Fixture,
    required: i64,
    timeout: Duration,
    stopping: &CancellationToken,
) -> tokio::task::JoinHandle<Result<(), NotReplicated>> {
    let partition = Arc::clone(&f.partition);
    let state = f.leader_state();
    let stopping = stopping.clone();
    tokio::spawn(async move {
        wait_for_high_watermark(&partition, &state, required, timeout, &stopping).await
    })
}

#[tokio::test(start_paused = true)]
async fn an_acks_all_write_completes_when_the_high_watermark_passes_it() {
    let f = Fixture::leader(&[1, 2], &[1, 2], 1);
    let required = append_three(&f).await;
    let wait = spawn_acks_wait(&f, required, LONG, &CancellationToken::new());
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!wait.is_finished(), "follower 2 holds nothing yet");
    // The follower fetches part of it, then all of it.
    f.partition
        .record_follower_fetch(2, 7, 1, -1, None, 1_000)
        .await
        .expect("fetch");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!wait.is_finished(), "the high watermark is at 1");
    let started = Instant::now();
    f.partition
        .record_follower_fetch(2, 7, required, -1, None, 2_000)
        .await
        .expect("fetch");
    assert_eq!(wait.await.expect("task"), Ok(()));
    assert_eq!(started.elapsed(), Duration::ZERO, "woken at once");
}

#[tokio::test(start_paused = true)]
async fn an_acks_all_write_waits_for_a_follower_whose_isr_expansion_is_in_flight() {
    // The controller may commit the expansion (and elect follower 2 after this leader
    // dies) before this broker applies it: acknowledging on follower 3 alone could lose the
    // write.
    let f = Fixture::leader(&[1, 2, 3], &[1, 3], 2);
    let state = f.leader_state();
    state.begin_isr_change(0, &[1, 3, 2]);
    let required = append_three(&f).await;
    let wait = spawn_acks_wait(&f, required, LONG, &CancellationToken::new());
    f.partition
        .record_follower_fetch(2, 7, 0, -1, None, 1_000)
        .await
        .expect("fetch");
    f.partition
        .record_follower_fetch(3, 9, required, -1, None, 1_000)
        .await
        .expect("fetch");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!wait.is_finished(), "follower 2 holds nothing yet");
    f.partition
        .record_follower_fetch(2, 7, required, -1, None, 2_000)
        .await
        .expect("fetch");
    assert_eq!(wait.await.expect("task"), Ok(()));
}

#[tokio::test(start_paused = true)]
async fn an_acks_all_write_times_out_at_the_request_timeout() {
    let f = Fixture::leader(&[1, 2], &[1, 2], 1);
    let required = append_three(&f).await;
    let started = Instant::now();
    let wait = spawn_acks_wait(
        &f,
        required,
        Duration::from_secs(30),
        &CancellationToken::new(),
    );
    assert_eq!(wait.await.expect("task"), Err(NotReplicated::TimedOut));
    assert_eq!(started.elapsed(), Duration::from_secs(30));
}

#[tokio::test(start_paused = true)]
async fn an_acks_all_wait_ends_when_the_leadership_moves() {
    let f = Fixture::leader(&[1, 2], &[1, 2], 1);
    let required = append_three(&f).await;
    let wait = spawn_acks_wait(&f, required, LONG, &CancellationToken::new());
    tokio::time::sleep(Duration::from_secs(1)).await;
    f.partition.set_role_now(Role::Follower {
        leader: 2,
        leader_epoch: 1,
    });
    assert_eq!(
        wait.await.expect("task"),
        Err(NotReplicated::Moved {
            leader: 2,
            leader_epoch: 1
        })
    );
}

/// The controller's ISR change for replicas [1, 2, 3], as the metadata delta applies it.
fn set_isr(f: &Fixture, isr: &[i32], partition_epoch: i32) {
    f.partition
        .set_assignment(crate::replication::leader::Assignment {
            replicas: vec![1, 2, 3],
            isr: isr.to_vec(),
            partition_epoch,
        });
}

#[tokio::test(start_paused = true)]
async fn an_acks_all_wait_whose_isr_falls_below_min_isr_times_out() {
    // Kafka 4: the high watermark stands still below min.insync.replicas, so the wait ends
    // at the request's timeout, not when the ISR shrinks.
    let f = Fixture::leader(&[1, 2, 3], &[1, 2, 3], 2);
    let required = append_three(&f).await;
    let started = Instant::now();
    let wait = spawn_acks_wait(
        &f,
        required,
        Duration::from_secs(30),
        &CancellationToken::new(),
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    set_isr(&f, &[1], 1);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!wait.is_finished(), "a short ISR does not end the wait");
    assert_eq!(wait.await.expect("task"), Err(NotReplicated::TimedOut));
    assert_eq!(started.elapsed(), Duration::from_secs(30));
}

#[tokio::test(start_paused = true)]
async fn an_acks_all_wait_completes_once_a_short_isr_grows_back_and_catches_up() {
    let f = Fixture::leader(&[1, 2, 3], &[1, 2, 3], 2);
    let required = append_three(&f).await;
    let wait = spawn_acks_wait(&f, required, LONG, &CancellationToken::new());
    tokio::time::sleep(Duration::from_secs(1)).await;
    set_isr(&f, &[1], 1);
    tokio::time::sleep(Duration::from_secs(1)).await;
    set_isr(&f, &[1, 2], 2);
    f.partition
        .record_follower_fetch(2, 7, required, -1, None, 2_000)
        .await
        .expect("fetch");
    assert_eq!(wait.await.expect("task"), Ok(()));
}

#[tokio::test(start_paused = true)]
async fn a_fetch_waiting_for_min_bytes_wakes_on_an_append() {
    let f = Fixture::leader(&[1], &[1], 1);
    let mut delayed = Delayed::new(2, Instant::now() + LONG, CancellationToken::new());
    delayed.set(1, Some(Watch::partition(&f.partition)));
    let partition = Arc::clone(&f.partition);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(2)).await;
        partition
            .append_as_leader(batch(1), RequiredAcks::Leader, None::<NoVerify>, 0)
            .await
            .expect("append");
    });
    let started = Instant::now();
    assert_eq!(delayed.wait().await, Wake::Changed(vec![1]));
    assert_eq!(started.elapsed(), Duration::from_secs(2));
}

#[tokio::test(start_paused = true)]
async fn a_fetch_with_nothing_new_answers_at_its_deadline() {
    let f = Fixture::leader(&[1], &[1], 1);
    let mut delayed = Delayed::new(
        1,
        Instant::now() + Duration::from_millis(500),
        CancellationToken::new(),
    );
    delayed.set(0, Some(Watch::log(f.partition.log())));
    assert_eq!(delayed.wait().await, Wake::TimedOut);
}

#[tokio::test(start_paused = true)]
async fn shutdown_ends_every_wait() {
    let f = Fixture::leader(&[1, 2], &[1, 2], 1);
    let required = append_three(&f).await;
    let stopping = CancellationToken::new();
    let acks = spawn_acks_wait(&f, required, LONG, &stopping);
    let mut delayed = Delayed::new(1, Instant::now() + LONG, stopping.clone());
    delayed.set(0, Some(Watch::partition(&f.partition)));
    let stop = stopping.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        stop.cancel();
    });
    assert_eq!(delayed.wait().await, Wake::ShuttingDown);
    assert_eq!(acks.await.expect("task"), Err(NotReplicated::TimedOut));
    assert_eq!(
        delayed.wait().await,
        Wake::ShuttingDown,
        "and every later one"
    );
}

/// The seed-13 chaos run: the ex-leader's fetcher, working from a newer image than the
/// applied roles, truncated the log under a waiting acks=all produce and refilled it from
/// the new leader past the produce's offsets; the wait then saw a high watermark over them.
/// A follower write now needs the applied role, and the wait ends on the role change.
#[tokio::test(start_paused = true)]
async fn the_log_is_written_as_follower_only_after_the_role_change_ends_acks_all_waits() {
    let f = Fixture::leader(&[1, 2], &[1, 2], 1);
    let required = append_three(&f).await;
    let wait = spawn_acks_wait(&f, required, LONG, &CancellationToken::new());
    assert!(
        f.partition.follower_write(2, 1).await.is_none(),
        "this broker still leads: the fetcher may not write"
    );
    f.partition.set_role_now(Role::Follower {
        leader: 2,
        leader_epoch: 1,
    });
    assert!(
        f.partition.follower_write(2, 0).await.is_none(),
        "another epoch"
    );
    assert!(
        f.partition.follower_write(3, 1).await.is_none(),
        "another leader"
    );
    {
        let _write = f
            .partition
            .follower_write(2, 1)
            .await
            .expect("follows 2 at epoch 1");
        let log = f.partition.log();
        assert_eq!(log.truncate_to(0).await.expect("truncate"), 0);
        log.append_as_follower(batch(5), 0).await.expect("append");
        assert_eq!(log.set_high_watermark(5), 5);
    }
    assert_eq!(
        wait.await.expect("task"),
        Err(NotReplicated::Moved {
            leader: 2,
            leader_epoch: 1
        })
    );
}

#[tokio::test(start_paused = true)]
async fn a_role_change_waits_for_a_follower_write_in_progress() {
    let f = Fixture::leader(&[1, 2], &[1, 2], 1);
    f.partition.set_role_now(Role::Follower {
        leader: 2,
        leader_epoch: 1,
    });
    let write = f
        .partition
        .follower_write(2, 1)
        .await
        .expect("follows 2 at epoch 1");
    let partition = Arc::clone(&f.partition);
    let change = tokio::spawn(async move {
        let change = partition.begin_role_change().await;
        partition.set_role(
            &change,
            Role::Follower {
                leader: 3,
                leader_epoch: 2,
            },
        );
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !change.is_finished(),
        "the write in progress holds the change"
    );
    assert!(matches!(
        f.partition.role(),
        Role::Follower { leader: 2, .. }
    ));
    drop(write);
    change.await.expect("task");
    assert!(matches!(
        f.partition.role(),
        Role::Follower {
            leader: 3,
            leader_epoch: 2
        }
    ));
    assert!(f.partition.follower_write(2, 1).await.is_none());
}

#[tokio::test(start_paused = true)]
async fn a_leader_state_stops_moving_the_high_watermark_once_the_role_moves_away() {
    let f = Fixture::leader(&[1], &[1], 1);
    let state = f.leader_state();
    f.partition.set_role_now(Role::Follower {
        leader: 2,
        leader_epoch: 1,
    });
    let log = f.partition.log();
    {
        let _write = f.partition.follower_write(2, 1).await.expect("follows 2");
        log.append_as_follower(batch(5), 0).await.expect("append");
    }
    assert_eq!(log.high_watermark(), 0, "the leader has not said 5 yet");
    assert_eq!(
        state.maybe_advance_high_watermark(),
        0,
        "a sole-replica leader state would have taken the follower's log end"
    );
}
