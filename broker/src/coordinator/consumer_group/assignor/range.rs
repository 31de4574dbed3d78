//! The `range` assignor: per topic, the members subscribed to it get contiguous shares
//! (the first `partitions % members` one more), so topics with the same partition count
//! are co-partitioned. Like Kafka's server-side `RangeAssignor` it is not sticky but
//! deterministic: static members first by instance id, then the others by member id, so
//! a member keeps its range as long as the member set is unchanged.

use std::collections::BTreeMap;

use super::{MemberSpec, TopicMeta};
use crate::coordinator::consumer_group::member::Assignment;

pub fn assign(
    members: &BTreeMap<String, MemberSpec>,
    topics: &BTreeMap<String, TopicMeta>,
) -> BTreeMap<String, Assignment> {
    let mut order: Vec<(&String, &MemberSpec)> = members.iter().collect();
    order.sort_by(
        |(a_id, a), (b_id, b)| match (&a.instance_id, &b.instance_id) {
            (Some(x), Some(y)) => x.cmp(y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a_id.cmp(b_id),
        },
    );
    let mut out: BTreeMap<String, Assignment> = members
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    for (name, meta) in topics {
        let subscribers: Vec<&String> = order
            .iter()
            .filter(|(_, s)| s.subscribed.contains(name))
            .map(|(m, _)| *m)
            .collect();
        if subscribers.is_empty() || meta.partitions <= 0 {
            continue;
        }
        let n = usize::try_from(meta.partitions).unwrap_or(0);
        let quota = n / subscribers.len();
        let extra = n % subscribers.len();
        let mut next = 0usize;
        for (i, member) in subscribers.iter().enumerate() {
            let end = (next + quota + usize::from(i < extra)).min(n);
            if next < end {
                let range = (next..end).filter_map(|p| i32::try_from(p).ok()).collect();
                if let Some(a) = out.get_mut(*member) {
                    a.insert(meta.topic_id, range);
                }
            }
            next = end;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use uuid::Uuid;

    use super::*;

    fn spec(instance_id: Option<&str>) -> MemberSpec {
        MemberSpec {
            subscribed: BTreeSet::from(["t".to_string()]),
            previous: Assignment::new(),
            instance_id: instance_id.map(str::to_owned),
        }
    }

    #[test]
    fn contiguous_ranges_in_member_order_static_members_first() {
        let members = BTreeMap::from([
            ("b".to_string(), spec(None)),
            ("a".to_string(), spec(None)),
            ("z".to_string(), spec(Some("i-1"))),
        ]);
        let topic_id = Uuid::from_u128(3);
        let topics = BTreeMap::from([(
            "t".to_string(),
            TopicMeta {
                topic_id,
                partitions: 7,
            },
        )]);
        let out = assign(&members, &topics);
        assert_eq!(out["z"][&topic_id], BTreeSet::from([0, 1, 2]));
        assert_eq!(out["a"][&topic_id], BTreeSet::from([3, 4]));
        assert_eq!(out["b"][&topic_id], BTreeSet::from([5, 6]));
    }
}
