//! One partition's change of ISR, eligible leader replicas (KIP-966) and leader, as Kafka
//! 4.4's `PartitionChangeBuilder` computes it. Pure: the caller gives the target ISR, which
//! brokers may lead, and the topic's policy; every voter computes the same result.
//!
//! With `eligible.leader.replicas.version` ≥ 1 ([`Policy::elr`]):
//! - an ISR at or above the topic's min ISR clears the ELR; below it, the members that leave
//!   the ISR join the ELR (a broker that shut down uncleanly never does): they hold every
//!   record up to the high watermark, which does not move while the ISR is below min ISR;
//! - the ISR may become empty (the partition then has no leader), and the leader it had is
//!   kept as the last known leader (Kafka 4.x stores it in `last_known_elr`);
//! - a leader is elected from the ISR first, then, only when the ISR is empty, from the ELR
//!   (that member becomes the ISR, alone, and leaves the ELR: a clean election), then the
//!   last known leader when ISR and ELR are both empty (ISR = it), then, if the topic
//!   enables it, an unclean election among all replicas (ISR = it; ELR cleared);
//! - a member that rejoins the ISR leaves the ELR; once a leader is elected the last known
//!   leader is cleared.
//!
//! With it at 0 the ISR never empties (its last member stays while fenced), there is no ELR,
//! and the election is ISR, then unclean: Brook's behaviour before ELR.
//!
//! An unclean election (the last known leader, or a replica outside ISR and ELR) also marks
//! the partition's leader as recovering (KIP-704, [`LeaderRecoveryState`]); only the leader's
//! AlterPartition ([`Change::leader_recovery_state`]) marks it recovered again.
//!
//! The leader epoch moves only when the leader changes, the partition epoch on every change.

use std::collections::BTreeSet;

use crate::image::{LeaderRecoveryState, MetadataImage, PartitionImage, TopicImage, NO_LEADER};

/// The feature whose level ≥ 1 turns eligible leader replicas on (KIP-966).
pub const ELIGIBLE_LEADER_REPLICAS_VERSION: &str = "eligible.leader.replicas.version";
/// The topic config (and cluster-wide default) whose value, capped at the replication
/// factor, is the min ISR that ELR is measured against.
pub const MIN_IN_SYNC_REPLICAS: &str = "min.insync.replicas";

/// Whether ELR is on: the quorum's `eligible.leader.replicas.version`, 1 when never set
/// (Kafka 4.1+ formats new clusters with it at 1, and so does `brook format`).
pub fn elr_enabled(image: &MetadataImage) -> bool {
    image
        .features
        .get(ELIGIBLE_LEADER_REPLICAS_VERSION)
        .is_none_or(|level| *level >= 1)
}

/// Kafka's `getTopicEffectiveMinIsr`: the topic's `min.insync.replicas`, else the
/// cluster-wide dynamic default, else 1, capped at the replication factor. A broker's
/// static properties are not in the image (as for unclean election); Kafka 4.4 refuses
/// per-broker values while ELR is on, so the cluster-wide one is what a cluster sets.
pub fn effective_min_isr(image: &MetadataImage, topic: &TopicImage) -> usize {
    let configured = topic
        .configs
        .get(MIN_IN_SYNC_REPLICAS)
        .or_else(|| {
            image
                .broker_configs(None)
                .and_then(|c| c.get(MIN_IN_SYNC_REPLICAS))
        })
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    let replication_factor = topic
        .partitions
        .values()
        .next()
        .map_or(1, |p| p.replicas.len().max(1));
    configured.min(replication_factor)
}

/// What a topic's partitions are changed under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// `eligible.leader.replicas.version` ≥ 1.
    pub elr: bool,
    /// The effective min ISR ([`effective_min_isr`]).
    pub min_isr: usize,
    /// `unclean.leader.election.enable` for the topic.
    pub unclean: bool,
}

impl Policy {
    pub fn of(image: &MetadataImage, topic: &TopicImage) -> Policy {
        Policy {
            elr: elr_enabled(image),
            min_isr: effective_min_isr(image, topic),
            unclean: crate::election::unclean_leader_election_enabled(image, topic),
        }
    }
}

/// Which leader the change looks for (Kafka's `PartitionChangeBuilder.Election`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Election {
    /// Keep the leader if it may still lead, else the first eligible replica.
    Online,
    /// The first replica if it is eligible, else as `Online`.
    Preferred,
    /// As `Online`, then any replica that may lead (acknowledged records may be lost).
    Unclean,
}

impl Election {
    /// The election a fence, unfence or re-registration runs: `Unclean` where the topic
    /// enables unclean leader election, else `Online` (Kafka's `generateLeaderAndIsrUpdates`).
    pub fn keeping_online(policy: Policy) -> Election {
        if policy.unclean {
            Election::Unclean
        } else {
            Election::Online
        }
    }
}

/// A change to apply to one partition.
pub struct Change<'a> {
    /// The ISR the caller wants (the election may replace it).
    pub target_isr: Vec<i32>,
    /// A broker that restarted after an unclean shutdown: it may not join the ELR.
    pub unclean_shutdown: Option<i32>,
    /// Whether a broker may lead (registered, unfenced, not shutting down, not excluded).
    pub acceptable: &'a dyn Fn(i32) -> bool,
    pub election: Election,
    /// The state an AlterPartition reports (Kafka's `setTargetLeaderRecoveryState`); `None`
    /// keeps the partition's. It wins over the election's, as in Kafka's builder.
    pub leader_recovery_state: Option<LeaderRecoveryState>,
}

/// Applies `change` to `p` under `policy`; returns whether `p` changed.
pub fn apply(p: &mut PartitionImage, policy: Policy, change: &Change<'_>) -> bool {
    let old = p.clone();
    let mut isr = change.target_isr.clone();
    let mut elr = if policy.elr {
        populate_elr(&old, &isr, policy.min_isr, change.unclean_shutdown)
    } else {
        Vec::new()
    };

    let (leader, unclean) = elect(&old, &isr, &elr, policy, change);
    let mut isr_forced = false;
    if leader != old.leader && leader != NO_LEADER {
        if elr.contains(&leader) {
            // A clean election from the ELR: the member holds every committed record.
            isr = vec![leader];
            elr.retain(|&r| r != leader);
        } else if unclean {
            isr = vec![leader];
            isr_forced = true;
        }
    }
    if isr_forced {
        elr.clear();
    }
    // Kafka's builder marks an unclean leader recovering, then applies the reported state.
    let mut recovery = old.leader_recovery_state;
    if isr_forced {
        recovery = LeaderRecoveryState::Recovering;
    }
    if let Some(reported) = change.leader_recovery_state {
        if reported != old.leader_recovery_state {
            recovery = reported;
        }
    }
    // Without ELR the ISR never empties: its last member stays, the partition waits for it.
    if isr.is_empty() && !policy.elr && !isr_forced {
        isr = old.isr.clone();
    }

    let mut last_known = old.last_known_elr.clone();
    if policy.elr {
        if isr.is_empty() && old.isr != isr {
            if old.leader != NO_LEADER && old.last_known_elr != [old.leader] {
                last_known = vec![old.leader];
            }
        } else if leader != NO_LEADER {
            last_known.clear();
        }
    }

    let changed = leader != old.leader
        || isr != old.isr
        || elr != old.elr
        || last_known != old.last_known_elr
        || recovery != old.leader_recovery_state;
    if leader != old.leader {
        p.leader = leader;
        p.leader_epoch = p.leader_epoch.saturating_add(1);
    }
    p.isr = isr;
    p.elr = elr;
    p.last_known_elr = last_known;
    p.leader_recovery_state = recovery;
    if changed {
        p.partition_epoch = p.partition_epoch.saturating_add(1);
    }
    changed
}

/// Kafka's `ClearElrRecord`, which its controller writes when a `min.insync.replicas` config
/// changes while ELR is on (for one topic, or, for a cluster-wide or broker value, every
/// topic): the ELRs were measured against the old min ISR, so every ELR and last known ELR of
/// `topic` (all topics when `None`) empties, each such partition's epoch bumped.
pub fn clear_elrs(image: &mut MetadataImage, topic: Option<&uuid::Uuid>) {
    if !elr_enabled(image) {
        return;
    }
    for t in image.topics.values_mut() {
        if topic.is_some_and(|id| *id != t.topic_id) {
            continue;
        }
        for p in t.partitions.values_mut() {
            if !p.elr.is_empty() || !p.last_known_elr.is_empty() {
                p.elr.clear();
                p.last_known_elr.clear();
                p.partition_epoch = p.partition_epoch.saturating_add(1);
            }
        }
    }
}

/// Kafka's `maybePopulateTargetElr`: at or above min ISR no ELR; below it, the ELR and the
/// old ISR without the target ISR and an uncleanly shut down broker, in id order.
fn populate_elr(
    old: &PartitionImage,
    target_isr: &[i32],
    min_isr: usize,
    unclean_shutdown: Option<i32>,
) -> Vec<i32> {
    if target_isr.len() >= min_isr {
        return Vec::new();
    }
    let candidates: BTreeSet<i32> = old.elr.iter().chain(old.isr.iter()).copied().collect();
    candidates
        .into_iter()
        .filter(|r| !target_isr.contains(r) && Some(*r) != unclean_shutdown)
        .collect()
}

/// The leader, and whether electing it was unclean (its ISR is then forced to it alone).
fn elect(
    old: &PartitionImage,
    isr: &[i32],
    elr: &[i32],
    policy: Policy,
    change: &Change<'_>,
) -> (i32, bool) {
    let acceptable = change.acceptable;
    // In the ISR, or in the ELR when the ISR is empty (Kafka's `isValidNewLeader`).
    let valid =
        |r: i32| (isr.contains(&r) || (isr.is_empty() && elr.contains(&r))) && acceptable(r);
    if change.election == Election::Preferred {
        if let Some(&first) = old.replicas.first() {
            if valid(first) {
                return (first, false);
            }
        }
    }
    if old.leader != NO_LEADER && valid(old.leader) {
        return (old.leader, false);
    }
    if let Some(&r) = old.replicas.iter().find(|&&r| valid(r)) {
        return (r, false);
    }
    // Balanced recovery: nothing in ISR or ELR, the last known leader is back.
    if policy.elr && isr.is_empty() && elr.is_empty() {
        if let [last] = old.last_known_elr[..] {
            if acceptable(last) {
                return (last, true);
            }
        }
    }
    if change.election == Election::Unclean {
        if let Some(&r) = old.replicas.iter().find(|&&r| acceptable(r)) {
            return (r, true);
        }
    }
    (NO_LEADER, false)
}

#[cfg(test)]
#[path = "partition_change_tests.rs"]
mod tests;
