//! The `uniform` assignor: every partition of the subscribed topics to one member, the
//! members' partition counts differing by at most one among members that could take the
//! same partitions (Kafka's `UniformAssignor`). Sticky: previous owners keep their
//! partitions up to their share; only the surplus and new partitions move.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::{MemberSpec, TopicMeta};
use crate::coordinator::consumer_group::member::Assignment;

pub fn assign(
    members: &BTreeMap<String, MemberSpec>,
    topics: &BTreeMap<String, TopicMeta>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Vec<(Uuid, i32)>> =
        members.keys().map(|m| (m.clone(), Vec::new())).collect();
    // Every partition some member subscribes to, in (topic name, partition) order.
    let mut partitions: Vec<(String, Uuid, i32)> = Vec::new();
    for (name, meta) in topics {
        if members.values().any(|m| m.subscribed.contains(name)) {
            partitions.extend((0..meta.partitions).map(|p| (name.clone(), meta.topic_id, p)));
        }
    }
    let eligible = |member: &str, topic: &str| members[member].subscribed.contains(topic);
    let name_of: BTreeMap<Uuid, String> = topics
        .iter()
        .map(|(n, m)| (m.topic_id, n.clone()))
        .collect();
    // 1. Stickiness: each partition stays with its previous owner, if still eligible.
    let mut taken = std::collections::BTreeSet::new();
    for (member, spec) in members {
        for (topic_id, ps) in &spec.previous {
            let Some(name) = name_of.get(topic_id) else {
                continue;
            };
            let count = topics[name].partitions;
            for &p in ps {
                if p < count && eligible(member, name) && taken.insert((*topic_id, p)) {
                    if let Some(list) = out.get_mut(member) {
                        list.push((*topic_id, p));
                    }
                }
            }
        }
    }
    // 2. New or orphaned partitions to the least loaded eligible member.
    for (name, topic_id, p) in &partitions {
        if taken.contains(&(*topic_id, *p)) {
            continue;
        }
        if let Some(member) = least_loaded(&out, |m| eligible(m, name)) {
            if let Some(list) = out.get_mut(&member) {
                list.push((*topic_id, *p));
            }
        }
    }
    // 3. Balance: move a partition from the most loaded member to an eligible member
    // with at least two fewer, until no such move exists (bounded by the partitions).
    for _ in 0..=partitions.len() * members.len().max(1) {
        let Some(moved) = one_move(&mut out, &name_of, &eligible) else {
            break;
        };
        if !moved {
            break;
        }
    }
    out.into_iter()
        .map(|(m, ps)| {
            let mut a = Assignment::new();
            for (t, p) in ps {
                a.entry(t).or_default().insert(p);
            }
            (m, a)
        })
        .collect()
}

fn least_loaded(
    out: &BTreeMap<String, Vec<(Uuid, i32)>>,
    eligible: impl Fn(&str) -> bool,
) -> Option<String> {
    out.iter()
        .filter(|(m, _)| eligible(m))
        .min_by_key(|(m, ps)| (ps.len(), (*m).clone()))
        .map(|(m, _)| m.clone())
}

/// One balancing move; `Some(false)` when the assignment is balanced.
fn one_move(
    out: &mut BTreeMap<String, Vec<(Uuid, i32)>>,
    name_of: &BTreeMap<Uuid, String>,
    eligible: &dyn Fn(&str, &str) -> bool,
) -> Option<bool> {
    let mut by_load: Vec<(usize, String)> =
        out.iter().map(|(m, ps)| (ps.len(), m.clone())).collect();
    by_load.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for (load, from) in &by_load {
        // The newest partitions move first, so the oldest stay put.
        let candidates: Vec<(Uuid, i32)> = out.get(from)?.iter().rev().copied().collect();
        for (topic_id, p) in candidates {
            let name = name_of.get(&topic_id)?;
            let target = by_load
                .iter()
                .rev()
                .find(|(l, m)| *l + 1 < *load && eligible(m, name));
            if let Some((_, to)) = target {
                let to = to.clone();
                out.get_mut(from)?.retain(|x| *x != (topic_id, p));
                out.get_mut(&to)?.push((topic_id, p));
                return Some(true);
            }
        }
    }
    Some(false)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::coordinator::consumer_group::member::partition_count;

    fn spec(topics: &[&str], previous: Assignment) -> MemberSpec {
        MemberSpec {
            subscribed: topics.iter().map(|t| t.to_string()).collect(),
            previous,
            instance_id: None,
        }
    }

    fn one_topic(partitions: i32) -> BTreeMap<String, TopicMeta> {
        BTreeMap::from([(
            "t".to_string(),
            TopicMeta {
                topic_id: Uuid::from_u128(1),
                partitions,
            },
        )])
    }

    #[test]
    fn three_members_share_six_partitions_two_each_and_a_newcomer_takes_only_surplus() {
        let members: BTreeMap<String, MemberSpec> = ["a", "b"]
            .iter()
            .map(|m| (m.to_string(), spec(&["t"], Assignment::new())))
            .collect();
        let first = assign(&members, &one_topic(6));
        assert!(first.values().all(|a| partition_count(a) == 3));
        let mut members: BTreeMap<String, MemberSpec> = first
            .iter()
            .map(|(m, a)| (m.clone(), spec(&["t"], a.clone())))
            .collect();
        members.insert("c".into(), spec(&["t"], Assignment::new()));
        let second = assign(&members, &one_topic(6));
        assert!(
            second.values().all(|a| partition_count(a) == 2),
            "{second:?}"
        );
        let all: BTreeSet<i32> = second
            .values()
            .flat_map(|a| a.values().flatten().copied())
            .collect();
        assert_eq!(all, (0..6).collect());
        for m in ["a", "b"] {
            let kept = &second[m][&Uuid::from_u128(1)];
            assert!(
                kept.is_subset(&first[m][&Uuid::from_u128(1)]),
                "sticky: {m} keeps its own"
            );
        }
    }
}
