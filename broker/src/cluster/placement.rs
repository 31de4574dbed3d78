//! Replica placement for new topics and partitions, as Kafka's `AdminUtils.assignReplicasToBrokers`
//! does it: leaders round-robin over the brokers from a random start, followers shifted
//! by a random amount that grows each time the leaders wrap around, so replicas of
//! consecutive partitions land on different broker pairs. With `broker.rack` set on the
//! brokers, the broker list alternates racks first and each partition's replicas take
//! distinct racks while there are racks left (rack-aware placement).
//!
//! Pure: the caller passes the active brokers and the randomness.

use std::collections::{BTreeMap, BTreeSet};

/// One broker a replica may go to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub broker_id: i32,
    pub rack: Option<String>,
}

/// Why no placement exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotEnoughBrokers {
    pub requested: i16,
    pub available: usize,
}

/// Replica lists for partitions `first..first + count`, leader (preferred replica) first.
pub fn place(
    brokers: &[Candidate],
    first: i32,
    count: i32,
    replication_factor: i16,
    random: u64,
) -> Result<Vec<Vec<i32>>, NotEnoughBrokers> {
    let n = brokers.len();
    let rf = usize::try_from(replication_factor).unwrap_or(0);
    if rf == 0 || rf > n {
        return Err(NotEnoughBrokers {
            requested: replication_factor,
            available: n,
        });
    }
    let ordered = rack_alternated(brokers);
    let start = (random % n as u64) as usize;
    let mut shift = ((random >> 32) % n as u64) as usize;
    let mut out = Vec::new();
    for i in 0..usize::try_from(count).unwrap_or(0) {
        // The partition's position in the round-robin; new partitions of an existing topic
        // continue where the topic's first ones left off.
        let index = usize::try_from(first).unwrap_or(0) + i;
        if index > 0 && index % n == 0 {
            shift += 1;
        }
        let leader_pos = (start + index) % n;
        let mut replicas = vec![ordered[leader_pos].clone()];
        let mut j = 0usize;
        while replicas.len() < rf && j < 4 * n {
            let pos = follower_position(leader_pos, shift, j, n);
            let candidate = &ordered[pos];
            j += 1;
            if replicas.iter().any(|r| r.broker_id == candidate.broker_id) {
                continue;
            }
            // Rack-aware: skip a rack already used while an unused rack remains.
            let used: BTreeSet<_> = replicas.iter().filter_map(|r| r.rack.as_ref()).collect();
            let racks: BTreeSet<_> = ordered.iter().filter_map(|r| r.rack.as_ref()).collect();
            if let Some(rack) = &candidate.rack {
                if used.contains(rack) && used.len() < racks.len() && j < 2 * n {
                    continue;
                }
            }
            replicas.push(candidate.clone());
        }
        // Fallback (cannot happen with distinct brokers, but never return too few).
        for b in &ordered {
            if replicas.len() >= rf {
                break;
            }
            if !replicas.iter().any(|r| r.broker_id == b.broker_id) {
                replicas.push(b.clone());
            }
        }
        out.push(replicas.into_iter().map(|r| r.broker_id).collect());
    }
    Ok(out)
}

/// Kafka's `replicaIndex`: the j-th follower of the replica at `first`, never `first` itself.
fn follower_position(first: usize, shift: usize, j: usize, n: usize) -> usize {
    if n == 1 {
        return first;
    }
    let step = 1 + (shift + j) % (n - 1);
    (first + step) % n
}

/// Brokers ordered by id, interleaved by rack (rack A's first, rack B's first, …) so that
/// consecutive positions sit on different racks. Without racks: by id.
fn rack_alternated(brokers: &[Candidate]) -> Vec<Candidate> {
    let mut sorted = brokers.to_vec();
    sorted.sort_by_key(|b| b.broker_id);
    if sorted.iter().all(|b| b.rack.is_none()) {
        return sorted;
    }
    let mut by_rack: BTreeMap<String, Vec<Candidate>> = BTreeMap::new();
    for b in sorted {
        by_rack
            .entry(b.rack.clone().unwrap_or_default())
            .or_default()
            .push(b);
    }
    let mut out = Vec::new();
    let longest = by_rack.values().map(Vec::len).max().unwrap_or(0);
    for i in 0..longest {
        for list in by_rack.values() {
            if let Some(b) = list.get(i) {
                out.push(b.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brokers(ids: &[(i32, Option<&str>)]) -> Vec<Candidate> {
        ids.iter()
            .map(|(id, rack)| Candidate {
                broker_id: *id,
                rack: rack.map(str::to_string),
            })
            .collect()
    }

    #[test]
    fn leaders_spread_round_robin_and_replicas_are_distinct() {
        let b = brokers(&[(1, None), (2, None), (3, None)]);
        for random in [0u64, 1, 7, 1 << 33, u64::MAX] {
            let placed = place(&b, 0, 6, 3, random).expect("placed");
            assert_eq!(placed.len(), 6);
            for replicas in &placed {
                let distinct: BTreeSet<_> = replicas.iter().collect();
                assert_eq!(distinct.len(), 3, "{replicas:?}");
            }
            let mut leaders: Vec<i32> = placed.iter().map(|r| r[0]).collect();
            leaders.sort_unstable();
            assert_eq!(leaders, vec![1, 1, 2, 2, 3, 3]);
        }
    }

    #[test]
    fn one_replica_per_partition_still_uses_every_broker() {
        let b = brokers(&[(1, None), (2, None), (3, None)]);
        let placed = place(&b, 0, 3, 1, 5).expect("placed");
        let leaders: BTreeSet<i32> = placed.iter().map(|r| r[0]).collect();
        assert_eq!(leaders, BTreeSet::from([1, 2, 3]));
    }

    #[test]
    fn more_replicas_than_brokers_is_refused() {
        let b = brokers(&[(1, None), (2, None)]);
        assert_eq!(
            place(&b, 0, 1, 3, 0),
            Err(NotEnoughBrokers {
                requested: 3,
                available: 2
            })
        );
        assert!(place(&b, 0, 1, 0, 0).is_err());
    }

    #[test]
    fn replicas_take_distinct_racks_while_racks_remain() {
        let b = brokers(&[
            (1, Some("a")),
            (2, Some("a")),
            (3, Some("b")),
            (4, Some("b")),
            (5, Some("c")),
            (6, Some("c")),
        ]);
        let rack = |id: i32| {
            b.iter()
                .find(|c| c.broker_id == id)
                .and_then(|c| c.rack.clone())
        };
        for random in [0u64, 3, 11, 1 << 40] {
            for replicas in place(&b, 0, 12, 3, random).expect("placed") {
                let racks: BTreeSet<_> = replicas.iter().map(|&id| rack(id)).collect();
                assert_eq!(racks.len(), 3, "{replicas:?}");
            }
        }
    }

    #[test]
    fn new_partitions_continue_the_round_robin() {
        let b = brokers(&[(1, None), (2, None), (3, None)]);
        let first = place(&b, 0, 2, 1, 0).expect("placed");
        let more = place(&b, 2, 1, 1, 0).expect("placed");
        let leaders: BTreeSet<i32> = first.iter().chain(&more).map(|r| r[0]).collect();
        assert_eq!(leaders.len(), 3);
    }
}
