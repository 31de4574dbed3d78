//! What the leader of a partition knows about its followers (Kafka's `Partition` leader
//! half): each follower's log end offset as its fetches report it, and when it was last
//! caught up; from those, the high watermark and which followers are in or out of sync.
//!
//! Rules, as Kafka's (`Partition.scala`):
//! - a follower's LEO is the `fetch_offset` of its latest fetch; it is unknown (-1) from
//!   the start of an epoch until the follower fetches from this leader;
//! - a follower is caught up at a fetch when it asked for the leader's LEO; when it asked
//!   for at least the LEO the leader had at its previous fetch, it was caught up then
//!   (so a steady stream of appends does not make a healthy follower look behind);
//! - a follower outside the ISR joins only when caught up, past the start of this epoch,
//!   and eligible (KIP-841): registered, unfenced, not shutting down, and its fetches come
//!   from the incarnation registered now (the broker epoch of its `ReplicaState`). Without
//!   that, a dead follower's last fetch kept it "caught up" for `replica.lag.time.max.ms`
//!   and every ISR change the leader proposed re-added it and was refused, so the live
//!   followers could not rejoin either;
//! - the high watermark is the smallest LEO of the *maximal* ISR (`isr_state`: the
//!   committed ISR plus the followers an AlterPartition in flight adds, KIP-497), never
//!   moves back, and stands still while the committed ISR is smaller than
//!   `min.insync.replicas` (Kafka 3.7+, KAFKA-15583): an acks=1 write made then is stored
//!   but not visible until enough replicas hold it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use brook_raft::PartitionImage;
use brook_storage::LogHandle;

use super::isr_state::IsrState;

/// One follower as its leader sees it.
#[derive(Debug, Clone, Copy)]
pub struct FollowerState {
    /// -1 until the follower fetched in this epoch.
    pub log_end_offset: i64,
    /// The broker epoch its latest fetch carried (-1: none yet, or a pre-v15 fetch).
    pub broker_epoch: i64,
    pub last_caught_up_ms: i64,
    last_fetch_ms: i64,
    /// The leader's LEO at the follower's previous fetch.
    last_fetch_leader_leo: i64,
}

impl FollowerState {
    /// A follower that has not fetched yet, counted as caught up at `now_ms`, so none leaves
    /// the ISR before it had `replica.lag.time.max.ms` to fetch.
    fn unknown(now_ms: i64) -> Self {
        FollowerState {
            log_end_offset: -1,
            broker_epoch: -1,
            last_caught_up_ms: now_ms,
            last_fetch_ms: now_ms,
            last_fetch_leader_leo: -1,
        }
    }
}

/// The leader-side replication state of one partition for one leader epoch.
#[derive(Debug)]
pub struct LeaderPartition {
    pub topic: String,
    pub partition: i32,
    pub leader_epoch: i32,
    /// The LEO when this epoch began: a follower joins the ISR only once past it (it then
    /// holds everything of earlier epochs that this leader kept).
    pub epoch_start_offset: i64,
    pub log: LogHandle,
    /// This broker's id (the leader's own replica).
    node_id: i32,
    followers: parking_lot::Mutex<BTreeMap<i32, FollowerState>>,
    /// The replicas and ISR of the committed image, set when the replica manager applies
    /// an image that changes them, and the ISR changes this leader has in flight: the
    /// high watermark and the min-ISR checks read them here, without a lookup in the image.
    isr: parking_lot::Mutex<IsrState>,
    /// The topic's `min.insync.replicas` (refreshed when configs change).
    min_isr: AtomicI32,
    /// Set when the partition's role moves away from this state: from then on the log is
    /// the follower's (or the next leader's), and this state must not move its high
    /// watermark.
    resigned: AtomicBool,
}

/// A partition's replicas and ISR as the committed image has them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignment {
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// The image's partition epoch: it tells which in-flight ISR changes it resolves.
    pub partition_epoch: i32,
}

impl LeaderPartition {
    /// A leader at the start of `leader_epoch`: every follower unknown but counted as
    /// caught up now, so none leaves the ISR before it had `replica.lag.time.max.ms` to
    /// fetch (Kafka resets `lastCaughtUpTime` on becoming leader too).
    pub fn new(
        log: LogHandle,
        leader_epoch: i32,
        assignment: Assignment,
        node_id: i32,
        min_isr: i32,
        now_ms: i64,
    ) -> Self {
        let followers = assignment
            .replicas
            .iter()
            .filter(|&&r| r != node_id)
            .map(|&r| (r, FollowerState::unknown(now_ms)))
            .collect();
        LeaderPartition {
            topic: log.topic().to_string(),
            partition: log.partition(),
            leader_epoch,
            epoch_start_offset: log.log_end_offset(),
            log,
            node_id,
            followers: parking_lot::Mutex::new(followers),
            isr: parking_lot::Mutex::new(IsrState::new(assignment)),
            min_isr: AtomicI32::new(min_isr.max(1)),
            resigned: AtomicBool::new(false),
        }
    }

    /// The partition no longer has this state as its leader (`Partition::set_role`).
    pub fn resign(&self) {
        self.resigned.store(true, Ordering::SeqCst);
    }

    /// This broker: the leader.
    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    pub fn min_isr(&self) -> i32 {
        self.min_isr.load(Ordering::Relaxed)
    }

    pub fn set_min_isr(&self, min_isr: i32) {
        self.min_isr.store(min_isr.max(1), Ordering::Relaxed);
    }

    /// The committed replicas and ISR (a new image changed them, or its partition epoch).
    /// A reassignment changes the replicas under the same leader epoch: a replica added is
    /// tracked from now on (unknown until it fetches, so it joins the ISR only once caught
    /// up), a replica removed is forgotten.
    pub fn set_assignment(&self, assignment: Assignment) {
        {
            let mut followers = self.followers.lock();
            followers.retain(|r, _| assignment.replicas.contains(r));
            let now_ms = brook_storage::log_manager::now_ms();
            for &r in assignment.replicas.iter().filter(|&&r| r != self.node_id) {
                followers
                    .entry(r)
                    .or_insert_with(|| FollowerState::unknown(now_ms));
            }
        }
        self.isr.lock().apply_committed(assignment);
    }

    /// Whether `replica` is in the committed ISR.
    pub fn isr_contains(&self, replica: i32) -> bool {
        self.isr.lock().committed().isr.contains(&replica)
    }

    pub fn assignment(&self) -> Assignment {
        self.isr.lock().committed().clone()
    }

    /// Whether the committed ISR is smaller than `min.insync.replicas` as it applies to
    /// this partition: never more than its replicas (Kafka's effective min ISR).
    pub fn isr_below_min(&self) -> bool {
        let state = self.isr.lock();
        let a = state.committed();
        a.isr.len() < (self.min_isr() as usize).min(a.replicas.len().max(1))
    }

    /// The ISR task is about to propose `isr` against `partition_epoch`: until the change
    /// resolves, the high watermark also waits for the followers it adds (the controller
    /// may commit it, and elect one of them, before this leader applies the image).
    pub fn begin_isr_change(&self, partition_epoch: i32, isr: &[i32]) {
        self.isr.lock().propose(partition_epoch, isr);
    }

    /// The quorum refused the change proposed against `partition_epoch`.
    pub fn isr_change_refused(&self, partition_epoch: i32) {
        self.isr.lock().refused(partition_epoch);
        self.maybe_advance_high_watermark();
    }

    /// A change proposed against `partition_epoch` whose outcome is unknown (its answer
    /// was lost): it is proposed again before any other.
    pub fn unresolved_isr_change(&self, partition_epoch: i32) -> Option<Vec<i32>> {
        self.isr.lock().unresolved(partition_epoch)
    }

    /// Records a follower's fetch at `fetch_offset`, sent by its incarnation `broker_epoch`
    /// (-1 when the request carries none), while this leader's LEO is `leader_leo`.
    /// Returns false for a broker that is not a follower of this partition.
    pub fn record_fetch(
        &self,
        replica: i32,
        broker_epoch: i64,
        fetch_offset: i64,
        leader_leo: i64,
        now_ms: i64,
    ) -> bool {
        let mut followers = self.followers.lock();
        let Some(f) = followers.get_mut(&replica) else {
            return false;
        };
        if f.broker_epoch != broker_epoch {
            // A restarted follower: what its previous incarnation fetched says nothing
            // about this one's log.
            f.broker_epoch = broker_epoch;
            f.last_fetch_leader_leo = -1;
        }
        if fetch_offset >= leader_leo {
            f.last_caught_up_ms = now_ms;
        } else if f.last_fetch_leader_leo >= 0 && fetch_offset >= f.last_fetch_leader_leo {
            f.last_caught_up_ms = f.last_caught_up_ms.max(f.last_fetch_ms);
        }
        f.log_end_offset = fetch_offset;
        f.last_fetch_leader_leo = leader_leo;
        f.last_fetch_ms = now_ms;
        true
    }

    pub fn follower(&self, replica: i32) -> Option<FollowerState> {
        self.followers.lock().get(&replica).copied()
    }

    /// Advances the high watermark to the smallest LEO of the maximal ISR if that is
    /// higher and the committed ISR is large enough. Returns the high watermark.
    pub fn maybe_advance_high_watermark(&self) -> i64 {
        let current = self.log.high_watermark();
        if self.isr_below_min() || self.resigned.load(Ordering::SeqCst) {
            return current;
        }
        let isr = self.isr.lock().maximal_isr();
        let leader_leo = self.log.log_end_offset();
        let followers = self.followers.lock();
        let mut candidate = leader_leo;
        for r in isr.iter().filter(|&&r| r != self.node_id) {
            match followers.get(r) {
                Some(f) if f.log_end_offset >= 0 => candidate = candidate.min(f.log_end_offset),
                // An ISR member that has not fetched in this epoch holds an unknown prefix.
                _ => return current,
            }
        }
        drop(followers);
        // Checked again just before the write: a role change since the first check hands the
        // log to a follower, whose high watermark is the leader's to set.
        if candidate > current && !self.resigned.load(Ordering::SeqCst) {
            self.log.set_high_watermark(candidate)
        } else {
            current
        }
    }

    /// The ISR this leader wants now: members not caught up within `lag_max_ms` leave
    /// (never the leader), followers caught up to the high watermark and past the start
    /// of this epoch join. Equal to `part.isr` when nothing should change.
    /// `eligible(broker, epoch)`: whether the broker may join an ISR with fetches from
    /// incarnation `epoch` (registered with that epoch, unfenced, not shutting down).
    pub fn wanted_isr(
        &self,
        part: &PartitionImage,
        node_id: i32,
        now_ms: i64,
        lag_max_ms: i64,
        eligible: impl Fn(i32, i64) -> bool,
    ) -> Vec<i32> {
        let hw = self.log.high_watermark();
        let followers = self.followers.lock();
        let in_sync = |r: i32| -> bool {
            if r == node_id {
                return true;
            }
            let Some(f) = followers.get(&r) else {
                return false;
            };
            if part.isr.contains(&r) {
                now_ms - f.last_caught_up_ms <= lag_max_ms
            } else {
                f.log_end_offset >= 0
                    && eligible(r, f.broker_epoch)
                    && f.log_end_offset >= hw
                    && f.log_end_offset >= self.epoch_start_offset
                    && now_ms - f.last_caught_up_ms <= lag_max_ms
            }
        };
        part.replicas
            .iter()
            .copied()
            .filter(|&r| in_sync(r))
            .collect()
    }

    /// Followers' (id, LEO, ms since caught up), for lag metrics.
    pub fn follower_lags(&self, now_ms: i64) -> Vec<(i32, i64, i64)> {
        self.followers
            .lock()
            .iter()
            .map(|(&r, f)| (r, f.log_end_offset, now_ms - f.last_caught_up_ms))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use brook_storage::testing::{encode_batch, TestBatch};
    use brook_storage::{LogConfig, LogManager};

    fn assignment(replicas: &[i32], isr: &[i32]) -> Assignment {
        Assignment {
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            partition_epoch: 0,
        }
    }

    fn part(replicas: &[i32], isr: &[i32]) -> PartitionImage {
        PartitionImage {
            partition: 0,
            leader: 1,
            leader_epoch: 0,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            partition_epoch: 0,
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
            elr: Vec::new(),
            last_known_elr: Vec::new(),
            leader_recovery_state: brook_raft::LeaderRecoveryState::Recovered,
        }
    }

    fn log_with(records: usize, dir: &std::path::Path) -> LogHandle {
        let logs = LogManager::open(&[dir.to_path_buf()], LogConfig::default()).expect("open");
        let log = logs
            .get_or_create("t", 0, LogConfig::default())
            .expect("log");
        append(&log, records);
        log
    }

    fn append(log: &LogHandle, records: usize) {
        for _ in 0..records {
            let mut batch = encode_batch(&TestBatch::sized(0, 1, 10));
            log.with_log_blocking(|l| l.append(&mut batch, 0, 0))
                .expect("append");
        }
    }

    #[test]
    fn an_isr_expansion_in_flight_holds_the_high_watermark_at_the_joining_follower() {
        // The seed-11 chaos run: leader 1 proposes adding the restarted follower 2 to
        // [1, 3]; the controller commits it and, when 1 dies, elects 2. Until 1 applies
        // that image, a high watermark over [1, 3] alone would pass records 2 never got.
        let dir = tempfile::tempdir().expect("tempdir");
        let log = log_with(10, dir.path());
        log.set_high_watermark(0);
        let leader = LeaderPartition::new(log.clone(), 0, assignment(&[1, 2, 3], &[1, 3]), 1, 2, 0);
        leader.record_fetch(3, 7, 10, 10, 1);
        leader.record_fetch(2, 9, 10, 10, 1);
        assert_eq!(leader.maybe_advance_high_watermark(), 10);
        leader.begin_isr_change(0, &[1, 3, 2]);
        append(&log, 5);
        leader.record_fetch(3, 7, 15, 15, 2);
        assert_eq!(
            leader.maybe_advance_high_watermark(),
            10,
            "follower 2 may already be in the ISR the controller elects from"
        );
        leader.record_fetch(2, 9, 13, 15, 3);
        assert_eq!(leader.maybe_advance_high_watermark(), 13);
        // The image with the new ISR applies; the change is no longer in flight.
        leader.set_assignment(Assignment {
            partition_epoch: 1,
            ..assignment(&[1, 2, 3], &[1, 3, 2])
        });
        assert_eq!(leader.unresolved_isr_change(1), None);
        leader.record_fetch(2, 9, 15, 15, 4);
        assert_eq!(leader.maybe_advance_high_watermark(), 15);
    }

    #[test]
    fn a_refused_or_fenced_isr_expansion_stops_holding_the_high_watermark() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = log_with(10, dir.path());
        log.set_high_watermark(0);
        let leader = LeaderPartition::new(log.clone(), 0, assignment(&[1, 2, 3], &[1, 3]), 1, 1, 0);
        leader.record_fetch(3, 7, 10, 10, 1);
        leader.record_fetch(2, 9, 4, 10, 1);
        leader.begin_isr_change(0, &[1, 3, 2]);
        assert_eq!(leader.maybe_advance_high_watermark(), 4);
        assert_eq!(leader.unresolved_isr_change(0), Some(vec![1, 3, 2]));
        leader.isr_change_refused(0);
        assert_eq!(log.high_watermark(), 10);
        // Fenced by a newer image (the controller changed the partition meanwhile).
        append(&log, 5);
        leader.begin_isr_change(0, &[1, 3, 2]);
        leader.record_fetch(3, 7, 15, 15, 2);
        assert_eq!(leader.maybe_advance_high_watermark(), 10);
        leader.set_assignment(Assignment {
            partition_epoch: 1,
            ..assignment(&[1, 2, 3], &[1, 3])
        });
        assert_eq!(leader.maybe_advance_high_watermark(), 15);
    }

    #[test]
    fn the_high_watermark_is_the_smallest_isr_leo_and_waits_for_unknown_followers() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = log_with(10, dir.path());
        log.set_high_watermark(0);
        let leader =
            LeaderPartition::new(log.clone(), 0, assignment(&[1, 2, 3], &[1, 2, 3]), 1, 1, 0);
        assert_eq!(
            leader.maybe_advance_high_watermark(),
            0,
            "followers unknown"
        );
        leader.record_fetch(2, 7, 7, 10, 1);
        assert_eq!(
            leader.maybe_advance_high_watermark(),
            0,
            "follower 3 unknown"
        );
        leader.record_fetch(3, 7, 4, 10, 1);
        assert_eq!(leader.maybe_advance_high_watermark(), 4);
        leader.record_fetch(3, 7, 10, 10, 2);
        assert_eq!(leader.maybe_advance_high_watermark(), 7);
        // Out of the ISR, a slow follower no longer holds the high watermark back.
        leader.record_fetch(2, 7, 8, 10, 3);
        leader.set_assignment(assignment(&[1, 2, 3], &[1, 3]));
        assert_eq!(leader.maybe_advance_high_watermark(), 10);
    }

    #[test]
    fn a_resigned_leader_state_leaves_the_high_watermark_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = log_with(10, dir.path());
        log.set_high_watermark(0);
        let leader = LeaderPartition::new(log.clone(), 0, assignment(&[1], &[1]), 1, 1, 0);
        leader.resign();
        assert_eq!(leader.maybe_advance_high_watermark(), 0);
        assert_eq!(log.high_watermark(), 0);
    }

    #[test]
    fn below_min_isr_the_high_watermark_stands_still() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = log_with(5, dir.path());
        log.set_high_watermark(2);
        let leader = LeaderPartition::new(log, 0, assignment(&[1, 2, 3], &[1]), 1, 2, 0);
        assert_eq!(leader.maybe_advance_high_watermark(), 2);
        leader.record_fetch(2, 7, 5, 5, 1);
        leader.set_assignment(assignment(&[1, 2, 3], &[1, 2]));
        assert_eq!(leader.maybe_advance_high_watermark(), 5);
    }

    #[test]
    fn a_replica_a_reassignment_adds_is_tracked_and_joins_once_caught_up_and_a_removed_one_is_forgotten(
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = log_with(10, dir.path());
        log.set_high_watermark(10);
        let now = brook_storage::log_manager::now_ms();
        let leader = LeaderPartition::new(log, 0, assignment(&[1, 2], &[1, 2]), 1, 1, now);
        assert!(!leader.record_fetch(3, 7, 10, 10, now), "not a replica yet");
        leader.set_assignment(assignment(&[1, 2, 3], &[1, 2]));
        let p = part(&[1, 2, 3], &[1, 2]);
        assert_eq!(
            leader.wanted_isr(&p, 1, now, 30_000, |_, _| true),
            vec![1, 2],
            "unknown until it fetches"
        );
        assert!(leader.record_fetch(3, 7, 10, 10, now));
        assert_eq!(
            leader.wanted_isr(&p, 1, now, 30_000, |_, _| true),
            vec![1, 2, 3]
        );
        leader.set_assignment(assignment(&[1, 3], &[1, 3]));
        assert!(leader.follower(2).is_none());
        assert!(leader.follower(3).is_some());
    }

    #[test]
    fn lagging_members_leave_and_caught_up_followers_join() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = log_with(10, dir.path());
        log.set_high_watermark(10);
        let leader = LeaderPartition::new(log, 0, assignment(&[1, 2, 3], &[1, 2, 3]), 1, 1, 0);
        let p = part(&[1, 2, 3], &[1, 2]);
        // Follower 2 never fetches: it leaves after the lag time; 3 catches up and joins.
        leader.record_fetch(3, 7, 10, 10, 500);
        assert_eq!(
            leader.wanted_isr(&p, 1, 1_000, 30_000, |_, _| true),
            vec![1, 2, 3]
        );
        assert_eq!(
            leader.wanted_isr(&p, 1, 31_000, 30_000, |_, _| true),
            vec![1]
        );
        leader.record_fetch(3, 7, 10, 10, 30_900);
        assert_eq!(
            leader.wanted_isr(&p, 1, 31_000, 30_000, |_, _| true),
            vec![1, 3]
        );
    }

    #[test]
    fn only_eligible_followers_of_the_registered_incarnation_join() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = log_with(10, dir.path());
        log.set_high_watermark(10);
        let leader = LeaderPartition::new(log, 0, assignment(&[1, 2, 3], &[1, 2, 3]), 1, 1, 0);
        // The controller removed dead broker 2 at fencing; 3 is out and caught up.
        let p = part(&[1, 2, 3], &[1]);
        leader.record_fetch(2, 7, 10, 10, 100);
        leader.record_fetch(3, 9, 10, 10, 100);
        let live = |r: i32, epoch: i64| r == 3 && epoch == 9;
        // Broker 2's last fetch looks caught up, but it is fenced: asking for it would
        // get the whole change refused and keep 3 out too.
        assert_eq!(leader.wanted_isr(&p, 1, 200, 30_000, live), vec![1, 3]);
        // Restarted with epoch 12 and registered: its earlier fetches do not count.
        let restarted = |r: i32, epoch: i64| (r == 2 && epoch == 12) || (r == 3 && epoch == 9);
        assert_eq!(leader.wanted_isr(&p, 1, 300, 30_000, restarted), vec![1, 3]);
        leader.record_fetch(2, 12, 10, 10, 400);
        assert_eq!(
            leader.wanted_isr(&p, 1, 500, 30_000, restarted),
            vec![1, 2, 3]
        );
    }

    #[test]
    fn a_follower_that_reached_the_previous_leo_counts_as_caught_up_at_the_previous_fetch() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = log_with(1, dir.path());
        let leader = LeaderPartition::new(log, 0, assignment(&[1, 2], &[1, 2]), 1, 1, 0);
        leader.record_fetch(2, 7, 100, 100, 1_000);
        leader.record_fetch(2, 7, 100, 200, 2_000);
        leader.record_fetch(2, 7, 200, 300, 3_000);
        assert_eq!(leader.follower(2).map(|f| f.last_caught_up_ms), Some(2_000));
    }
}
