//! Cluster metadata as the broker uses it: `meta.properties`, the clean-shutdown record,
//! topic creation (shared by CreateTopics and auto-creation), and topic-name validation.

pub mod clean_shutdown;
pub mod features;
pub mod meta_properties;
pub mod metadata_version;
pub mod offsets_topic;
pub mod topics;
pub mod txn_state_topic;
