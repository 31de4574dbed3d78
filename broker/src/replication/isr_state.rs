//! The ISR a partition's leader counts for its high watermark (Kafka's `PartitionState`:
//! `CommittedPartitionState`, `PendingExpandIsr`, `PendingShrinkIsr`; KIP-497).
//!
//! The committed ISR is the one of the last metadata image the replica manager applied.
//! It is not enough: once the leader has proposed an AlterPartition that adds a follower,
//! the controller may commit it — and, should the leader die, elect that follower — before
//! the leader applies the image that says so. Were the high watermark still the smallest
//! LEO of the committed ISR in that window, it could pass records the new member does not
//! have; consumers would read them and an acks=all producer would be acknowledged, and the
//! newly elected follower would then truncate them from the other replicas (seed-11 chaos
//! run: offset 1843 of partition 4 read, then replaced).
//!
//! So the leader counts the *maximal* ISR: the committed one plus every replica an
//! AlterPartition in flight would add. A shrink in flight changes nothing (the committed
//! ISR still holds the leaving replica), as in Kafka. An in-flight change resolves when
//! the replica manager applies an image whose partition epoch is past the one it was
//! proposed against (it applied, or the compare-and-set on that epoch now refuses it), or
//! when the quorum refuses it. A proposal whose answer was lost stays in flight and is
//! proposed again (Kafka retries an unanswered AlterPartition): it may still commit.
//!
//! Not thread-safe by itself: `LeaderPartition` holds it under a mutex.

use std::collections::BTreeSet;

use super::leader::Assignment;

/// An AlterPartition proposed to the quorum and not resolved yet.
#[derive(Debug, Clone, PartialEq, Eq)]
struct InFlight {
    /// The partition epoch the compare-and-set names.
    partition_epoch: i32,
    isr: Vec<i32>,
}

/// The committed ISR and the ISR changes in flight of one partition's leader.
#[derive(Debug, Clone, Default)]
pub struct IsrState {
    committed: Assignment,
    /// Usually none or one; more only while images lag behind a run of committed changes
    /// (each stays until the image that resolves it is applied).
    in_flight: Vec<InFlight>,
}

impl IsrState {
    pub fn new(committed: Assignment) -> Self {
        IsrState {
            committed,
            in_flight: Vec::new(),
        }
    }

    /// The replicas and ISR of the last applied image.
    pub fn committed(&self) -> &Assignment {
        &self.committed
    }

    /// The replicas the high watermark waits for: the committed ISR and every replica an
    /// in-flight change would add, committed order first.
    pub fn maximal_isr(&self) -> Vec<i32> {
        let mut seen: BTreeSet<i32> = self.committed.isr.iter().copied().collect();
        let mut out = self.committed.isr.clone();
        for change in &self.in_flight {
            for &r in &change.isr {
                if seen.insert(r) {
                    out.push(r);
                }
            }
        }
        out
    }

    /// An AlterPartition to `isr` is about to be proposed against `partition_epoch`: from
    /// now on the high watermark waits for the replicas it adds.
    pub fn propose(&mut self, partition_epoch: i32, isr: &[i32]) {
        if partition_epoch < self.committed.partition_epoch {
            // Already fenced by an applied image: the compare-and-set will refuse it.
            return;
        }
        match self
            .in_flight
            .iter_mut()
            .find(|c| c.partition_epoch == partition_epoch)
        {
            // A second proposal against the same epoch (the first one's answer was lost):
            // either may be the one that commits, so both count.
            Some(change) => {
                for &r in isr {
                    if !change.isr.contains(&r) {
                        change.isr.push(r);
                    }
                }
            }
            None => self.in_flight.push(InFlight {
                partition_epoch,
                isr: isr.to_vec(),
            }),
        }
    }

    /// The ISR of an unresolved change proposed against `partition_epoch` (the epoch of
    /// the newest image): it must be proposed again before any other change, since it may
    /// still commit.
    pub fn unresolved(&self, partition_epoch: i32) -> Option<Vec<i32>> {
        self.in_flight
            .iter()
            .find(|c| c.partition_epoch == partition_epoch)
            .map(|c| c.isr.clone())
    }

    /// The quorum refused the change proposed against `partition_epoch`: it never applies.
    pub fn refused(&mut self, partition_epoch: i32) {
        self.in_flight
            .retain(|c| c.partition_epoch != partition_epoch);
    }

    /// The replica manager applied an image with this assignment: changes proposed
    /// against an older partition epoch are resolved either way.
    pub fn apply_committed(&mut self, committed: Assignment) {
        self.in_flight
            .retain(|c| c.partition_epoch >= committed.partition_epoch);
        self.committed = committed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed(isr: &[i32], partition_epoch: i32) -> Assignment {
        Assignment {
            replicas: vec![1, 2, 3],
            isr: isr.to_vec(),
            partition_epoch,
        }
    }

    #[test]
    fn an_expansion_counts_from_its_proposal_until_the_image_that_resolves_it() {
        let mut state = IsrState::new(committed(&[1, 3], 4));
        assert_eq!(state.maximal_isr(), vec![1, 3]);
        state.propose(4, &[2, 1, 3]);
        assert_eq!(state.maximal_isr(), vec![1, 3, 2]);
        // An image of the same partition epoch (another partition changed) resolves nothing.
        state.apply_committed(committed(&[1, 3], 4));
        assert_eq!(state.maximal_isr(), vec![1, 3, 2]);
        assert_eq!(state.unresolved(4), Some(vec![2, 1, 3]));
        state.apply_committed(committed(&[2, 1, 3], 5));
        assert_eq!(state.maximal_isr(), vec![2, 1, 3]);
        assert_eq!(state.unresolved(5), None);
    }

    #[test]
    fn a_shrink_in_flight_keeps_the_committed_isr() {
        let mut state = IsrState::new(committed(&[1, 2, 3], 7));
        state.propose(7, &[1, 3]);
        assert_eq!(state.maximal_isr(), vec![1, 2, 3]);
        state.apply_committed(committed(&[1, 3], 8));
        assert_eq!(state.maximal_isr(), vec![1, 3]);
    }

    #[test]
    fn a_refused_change_stops_counting_but_a_fenced_one_waits_for_its_image() {
        let mut state = IsrState::new(committed(&[1], 2));
        state.propose(2, &[1, 2]);
        state.refused(2);
        assert_eq!(state.maximal_isr(), vec![1]);
        // The controller moved the partition epoch (it fenced broker 3, say) before the
        // leader applied it: the proposal is fenced, yet counted until that image applies.
        state.propose(2, &[1, 2]);
        state.apply_committed(committed(&[1], 3));
        assert_eq!(state.maximal_isr(), vec![1]);
        // Proposed against an epoch older than the applied one: never counted.
        state.propose(2, &[1, 3]);
        assert_eq!(state.maximal_isr(), vec![1]);
    }

    #[test]
    fn changes_committed_ahead_of_the_applied_image_all_count() {
        let mut state = IsrState::new(committed(&[1], 2));
        // Adding 2 committed at epoch 3; before that image is applied, adding 3 is proposed
        // against epoch 3 (the quorum's image is ahead of the replica manager's).
        state.propose(2, &[1, 2]);
        state.propose(3, &[1, 2, 3]);
        assert_eq!(state.maximal_isr(), vec![1, 2, 3]);
        state.apply_committed(committed(&[1, 2], 3));
        assert_eq!(state.maximal_isr(), vec![1, 2, 3]);
        state.apply_committed(committed(&[1, 2, 3], 4));
        assert_eq!(state.maximal_isr(), vec![1, 2, 3]);
    }

    #[test]
    fn a_second_proposal_against_the_same_epoch_counts_with_the_first() {
        let mut state = IsrState::new(committed(&[1], 5));
        state.propose(5, &[1, 2]);
        state.propose(5, &[1, 3]);
        assert_eq!(state.maximal_isr(), vec![1, 2, 3]);
        assert_eq!(state.unresolved(5), Some(vec![1, 2, 3]));
    }
}
