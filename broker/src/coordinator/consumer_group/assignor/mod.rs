//! Server-side assignors (KIP-848): `uniform` (the default, first of
//! `group.consumer.assignors`), sticky: a member keeps the partitions of its previous
//! target assignment as far as balance allows; and `range`, deterministic like Kafka's
//! (contiguous ranges in member order). They work on topic ids and see only topics that
//! exist. Pure functions.

mod range;
mod uniform;

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::member::Assignment;

pub const UNIFORM: &str = "uniform";
pub const RANGE: &str = "range";
/// Brook's assignors, in Kafka's default `group.consumer.assignors` order.
pub const ASSIGNORS: [&str; 2] = [UNIFORM, RANGE];

/// A topic the group subscribes to, as the metadata has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMeta {
    pub topic_id: Uuid,
    pub partitions: i32,
}

/// What an assignor gets per member: its subscription and its previous target.
#[derive(Debug, Clone)]
pub struct MemberSpec {
    pub subscribed: BTreeSet<String>,
    pub previous: Assignment,
    /// Static members come first in `range`'s order.
    pub instance_id: Option<String>,
}

/// The target assignment of every member by `assignor` (a name from [`ASSIGNORS`]).
pub fn assign(
    assignor: &str,
    members: &BTreeMap<String, MemberSpec>,
    topics: &BTreeMap<String, TopicMeta>,
) -> BTreeMap<String, Assignment> {
    if assignor == RANGE {
        range::assign(members, topics)
    } else {
        uniform::assign(members, topics)
    }
}
