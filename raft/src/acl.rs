//! ACL bindings in the metadata image (KRaft's `AccessControlEntryRecord`), kept indexed
//! the way the broker's authorizer looks them up: by resource type and pattern type, then
//! by resource name, so a check is a few map lookups on borrowed keys (no allocation).
//!
//! The codes are Kafka's (`ResourceType`, `PatternType`, `AclOperation`,
//! `AclPermissionType`), kept as `i8` because this crate knows no Kafka types; the broker
//! validates them before proposing. A binding is stored once: adding an existing one
//! changes nothing, as Kafka's `AclControlManager` skips duplicates.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// One ACL binding: a resource pattern and an access control entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclBinding {
    pub resource_type: i8,
    pub resource_name: String,
    pub pattern_type: i8,
    pub principal: String,
    pub host: String,
    pub operation: i8,
    pub permission_type: i8,
}

/// The resource-pattern part of the index key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AclPatternKey {
    pub resource_type: i8,
    pub pattern_type: i8,
}

/// The access-control-entry part of a binding.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AclEntry {
    pub principal: String,
    pub host: String,
    pub operation: i8,
    pub permission_type: i8,
}

/// Every binding, indexed by (resource type, pattern type) then resource name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AclsImage {
    by_pattern: BTreeMap<AclPatternKey, BTreeMap<String, BTreeSet<AclEntry>>>,
    len: usize,
}

impl AclsImage {
    /// Adds a binding; false when it was already there.
    pub fn insert(&mut self, binding: &AclBinding) -> bool {
        let (key, name, entry) = split(binding);
        let added = self
            .by_pattern
            .entry(key)
            .or_default()
            .entry(name.to_owned())
            .or_default()
            .insert(entry);
        self.len += usize::from(added);
        added
    }

    /// Removes a binding; false when it was not there.
    pub fn remove(&mut self, binding: &AclBinding) -> bool {
        let (key, name, entry) = split(binding);
        let Some(by_name) = self.by_pattern.get_mut(&key) else {
            return false;
        };
        let Some(entries) = by_name.get_mut(name) else {
            return false;
        };
        let removed = entries.remove(&entry);
        if entries.is_empty() {
            by_name.remove(name);
        }
        if by_name.is_empty() {
            self.by_pattern.remove(&key);
        }
        self.len -= usize::from(removed);
        removed
    }

    /// The entries bound to exactly this resource pattern.
    pub fn entries(
        &self,
        resource_type: i8,
        pattern_type: i8,
        name: &str,
    ) -> Option<&BTreeSet<AclEntry>> {
        self.by_pattern
            .get(&AclPatternKey {
                resource_type,
                pattern_type,
            })?
            .get(name)
    }

    /// The resource names with entries for one (resource type, pattern type).
    pub fn names(
        &self,
        resource_type: i8,
        pattern_type: i8,
    ) -> Option<&BTreeMap<String, BTreeSet<AclEntry>>> {
        self.by_pattern.get(&AclPatternKey {
            resource_type,
            pattern_type,
        })
    }

    /// Every binding, in index order.
    pub fn bindings(&self) -> impl Iterator<Item = AclBinding> + '_ {
        self.by_pattern.iter().flat_map(|(key, by_name)| {
            by_name.iter().flat_map(move |(name, entries)| {
                entries.iter().map(move |e| AclBinding {
                    resource_type: key.resource_type,
                    resource_name: name.clone(),
                    pattern_type: key.pattern_type,
                    principal: e.principal.clone(),
                    host: e.host.clone(),
                    operation: e.operation,
                    permission_type: e.permission_type,
                })
            })
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

fn split(b: &AclBinding) -> (AclPatternKey, &str, AclEntry) {
    (
        AclPatternKey {
            resource_type: b.resource_type,
            pattern_type: b.pattern_type,
        },
        &b.resource_name,
        AclEntry {
            principal: b.principal.clone(),
            host: b.host.clone(),
            operation: b.operation,
            permission_type: b.permission_type,
        },
    )
}

/// Stored as the plain list of bindings; the index is rebuilt on load.
impl Serialize for AclsImage {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.bindings())
    }
}

impl<'de> Deserialize<'de> for AclsImage {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let bindings = Vec::<AclBinding>::deserialize(deserializer)?;
        let mut image = AclsImage::default();
        for b in &bindings {
            image.insert(b);
        }
        Ok(image)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(name: &str, principal: &str) -> AclBinding {
        AclBinding {
            resource_type: 2,
            resource_name: name.into(),
            pattern_type: 3,
            principal: principal.into(),
            host: "*".into(),
            operation: 3,
            permission_type: 3,
        }
    }

    #[test]
    fn bindings_are_stored_once_and_removed_with_their_empty_index_nodes() {
        let mut acls = AclsImage::default();
        assert!(acls.insert(&binding("orders", "User:alice")));
        assert!(!acls.insert(&binding("orders", "User:alice")));
        assert!(acls.insert(&binding("orders", "User:bob")));
        assert_eq!(acls.len(), 2);
        assert_eq!(acls.entries(2, 3, "orders").map(BTreeSet::len), Some(2));
        assert!(acls.remove(&binding("orders", "User:alice")));
        assert!(!acls.remove(&binding("orders", "User:alice")));
        assert!(acls.remove(&binding("orders", "User:bob")));
        assert!(acls.is_empty());
        assert_eq!(acls, AclsImage::default());
    }

    #[test]
    fn the_index_round_trips_through_json_as_a_list() {
        let mut acls = AclsImage::default();
        acls.insert(&binding("orders", "User:alice"));
        acls.insert(&binding("pay", "User:*"));
        let json = serde_json::to_string(&acls).expect("serializable");
        assert!(json.starts_with('['));
        let back: AclsImage = serde_json::from_str(&json).expect("round trip");
        assert_eq!(back, acls);
    }
}
