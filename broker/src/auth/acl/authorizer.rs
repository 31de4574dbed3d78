//! The authorization decision with Kafka's `StandardAuthorizer` semantics
//! (`StandardAuthorizerData.authorize`):
//! - a principal in `super.users` may do everything;
//! - an ACL applies when its resource pattern matches (LITERAL: the exact name or the
//!   wildcard `*`; PREFIXED: a prefix of the name), its principal is the session's or
//!   `User:*`, its host is the client's address or `*`, and its operation is the one asked,
//!   `ALL`, or (for ALLOW only) one that implies it ([`AclOperation::allow_implies`]);
//! - any applying DENY wins, else any applying ALLOW allows;
//! - when no ACL at all (of any principal) is bound to a pattern matching the resource,
//!   `allow.everyone.if.no.acl.found` decides (default false); otherwise it is denied.
//!
//! A check reads the metadata image it is given (ACLs are indexed there by resource type,
//! pattern type and name, `brook_raft::AclsImage`): a handful of map lookups on borrowed
//! keys, no allocation, no lock. Pure.

use std::net::IpAddr;

use brook_raft::{AclEntry, AclsImage};

use super::codes::WILDCARD_RESOURCE;
use super::codes::{AclOperation, PatternType, PermissionType, ResourceType, WILDCARD_HOST};
use crate::config::AuthorizerSettings;
use crate::server::session::{KafkaPrincipal, Session};

/// Kafka's `StandardAuthorizer`, configured (`authorizer.class.name`).
#[derive(Clone, Debug)]
pub struct Authorizer {
    super_users: Vec<KafkaPrincipal>,
    allow_everyone_if_no_acl_found: bool,
}

/// What one ACL pattern's entries said about a request.
#[derive(Default)]
struct Verdict {
    allowed: bool,
    denied: bool,
    resource_has_acls: bool,
}

impl Authorizer {
    pub fn new(settings: &AuthorizerSettings) -> Authorizer {
        Authorizer {
            super_users: settings
                .super_users
                .iter()
                .map(|(principal_type, name)| KafkaPrincipal {
                    principal_type: principal_type.clone(),
                    name: name.clone(),
                })
                .collect(),
            allow_everyone_if_no_acl_found: settings.allow_everyone_if_no_acl_found,
        }
    }

    pub fn is_super_user(&self, principal: &KafkaPrincipal) -> bool {
        self.super_users.iter().any(|s| s == principal)
    }

    /// Whether `session` may perform `operation` on the resource `(resource_type, name)`.
    pub fn authorize(
        &self,
        acls: &AclsImage,
        session: &Session,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        self.authorize_principal(
            acls,
            session.principal(),
            session.peer.ip(),
            operation,
            resource_type,
            name,
        )
    }

    /// Kafka's `authorizeByResourceType(WRITE, TOPIC)` as the idempotent producer's check
    /// uses it (KIP-679): some topic pattern grants the session WRITE and is not denied.
    /// Walks the topic ACLs: only InitProducerId asks, never the produce path.
    pub fn may_write_some_topic(&self, acls: &AclsImage, session: &Session) -> bool {
        let principal = session.principal();
        if self.is_super_user(principal) {
            return true;
        }
        let topic = ResourceType::Topic.code();
        let has_topic_acls = [PatternType::Literal, PatternType::Prefixed]
            .iter()
            .any(|p| acls.names(topic, p.code()).is_some());
        if !has_topic_acls {
            return self.allow_everyone_if_no_acl_found;
        }
        let ask = Ask {
            principal,
            client: session.peer.ip().to_canonical(),
            operation: AclOperation::Write,
        };
        [PatternType::Literal, PatternType::Prefixed]
            .iter()
            .any(|p| {
                acls.names(topic, p.code()).is_some_and(|names| {
                    names.iter().any(|(name, entries)| {
                        entries
                            .iter()
                            .any(|e| applies(&ask, e) == Some(PermissionType::Allow))
                            && self.authorize(
                                acls,
                                session,
                                AclOperation::Write,
                                ResourceType::Topic,
                                name,
                            )
                    })
                })
            })
    }

    /// Whether `principal` connected from `client` may perform `operation` on the resource:
    /// for work done on someone's behalf outside their request (a consumer group's topic
    /// patterns re-resolved at a topic change for the member that last resolved them).
    pub fn authorize_principal(
        &self,
        acls: &AclsImage,
        principal: &KafkaPrincipal,
        client: IpAddr,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        if self.is_super_user(principal) {
            return true;
        }
        let mut verdict = Verdict::default();
        let ask = Ask {
            principal,
            client: client.to_canonical(),
            operation,
        };
        let rtype = resource_type.code();
        let literal = PatternType::Literal.code();
        verdict.add(&ask, acls.entries(rtype, literal, name));
        if name != WILDCARD_RESOURCE {
            verdict.add(&ask, acls.entries(rtype, literal, WILDCARD_RESOURCE));
        }
        if let Some(prefixed) = acls.names(rtype, PatternType::Prefixed.code()) {
            // Every prefix of the name (on character boundaries), the name itself included.
            for end in name.char_indices().map(|(i, c)| i + c.len_utf8()) {
                if verdict.denied {
                    break;
                }
                if let Some(prefix) = name.get(..end) {
                    verdict.add(&ask, prefixed.get(prefix));
                }
            }
        }
        if verdict.denied {
            false
        } else if verdict.allowed {
            true
        } else if !verdict.resource_has_acls {
            self.allow_everyone_if_no_acl_found
        } else {
            false
        }
    }
}

/// One authorization question.
struct Ask<'a> {
    principal: &'a KafkaPrincipal,
    client: IpAddr,
    operation: AclOperation,
}

impl Verdict {
    fn add(&mut self, ask: &Ask<'_>, entries: Option<&std::collections::BTreeSet<AclEntry>>) {
        let Some(entries) = entries else { return };
        self.resource_has_acls |= !entries.is_empty();
        for entry in entries {
            match applies(ask, entry) {
                Some(PermissionType::Deny) => {
                    self.denied = true;
                    return;
                }
                Some(PermissionType::Allow) => self.allowed = true,
                _ => {}
            }
        }
    }
}

/// The entry's permission when it applies to the question (principal, host, operation).
fn applies(ask: &Ask<'_>, entry: &AclEntry) -> Option<PermissionType> {
    let principal_matches = match entry.principal.split_once(':') {
        Some((kind, name)) => {
            kind == ask.principal.principal_type
                && (name == ask.principal.name
                    || (name == "*" && kind == KafkaPrincipal::USER_TYPE))
        }
        None => false,
    };
    if !principal_matches {
        return None;
    }
    let host_matches = entry.host == WILDCARD_HOST
        || entry
            .host
            .parse::<IpAddr>()
            .is_ok_and(|h| h.to_canonical() == ask.client);
    if !host_matches {
        return None;
    }
    let permission = PermissionType::from_code(entry.permission_type);
    let acl_operation = AclOperation::from_code(entry.operation);
    let operation_matches = match permission {
        PermissionType::Allow => acl_operation.allow_implies(ask.operation),
        PermissionType::Deny => {
            acl_operation == ask.operation || acl_operation == AclOperation::All
        }
        _ => false,
    };
    operation_matches.then_some(permission)
}

#[cfg(test)]
mod tests {
    use super::*;
    use brook_raft::AclBinding;
    use std::net::Ipv4Addr;
    use AclOperation::*;

    const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    fn authorizer(allow_everyone: bool) -> Authorizer {
        Authorizer {
            super_users: vec![KafkaPrincipal::user("admin")],
            allow_everyone_if_no_acl_found: allow_everyone,
        }
    }

    fn acl(
        name: &str,
        pattern: PatternType,
        who: &str,
        op: AclOperation,
        p: PermissionType,
    ) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Topic.code(),
            resource_name: name.into(),
            pattern_type: pattern.code(),
            principal: who.into(),
            host: "*".into(),
            operation: op.code(),
            permission_type: p.code(),
        }
    }

    fn acls(bindings: &[AclBinding]) -> AclsImage {
        let mut acls = AclsImage::default();
        for b in bindings {
            acls.insert(b);
        }
        acls
    }

    fn may(a: &Authorizer, acls: &AclsImage, who: &str, op: AclOperation, topic: &str) -> bool {
        a.authorize_principal(
            acls,
            &KafkaPrincipal::user(who),
            LOCAL,
            op,
            ResourceType::Topic,
            topic,
        )
    }

    #[test]
    fn super_users_may_do_everything_and_others_nothing_without_acls() {
        let none = AclsImage::default();
        assert!(may(&authorizer(false), &none, "admin", Write, "t"));
        assert!(!may(&authorizer(false), &none, "alice", Write, "t"));
        assert!(may(&authorizer(true), &none, "alice", Write, "t"));
    }

    #[test]
    fn literal_prefixed_and_wildcard_patterns_match_as_kafka_matches_them() {
        use PatternType::*;
        use PermissionType::Allow;
        let a = authorizer(false);
        let image = acls(&[
            acl("orders", Literal, "User:alice", Read, Allow),
            acl("pay-", Prefixed, "User:bob", Write, Allow),
            acl("*", Literal, "User:carol", Describe, Allow),
        ]);
        assert!(may(&a, &image, "alice", Read, "orders"));
        assert!(!may(&a, &image, "alice", Read, "orders2"));
        assert!(may(&a, &image, "bob", Write, "pay-eu"));
        assert!(may(&a, &image, "bob", Write, "pay-"));
        assert!(!may(&a, &image, "bob", Write, "pay"));
        assert!(may(&a, &image, "carol", Describe, "anything"));
        assert!(!may(&a, &image, "carol", Read, "anything"));
    }

    #[test]
    fn a_matching_deny_beats_every_allow_and_denies_no_implied_operation() {
        use PatternType::*;
        use PermissionType::{Allow, Deny};
        let a = authorizer(true);
        let image = acls(&[
            acl("*", Literal, "User:*", All, Allow),
            acl("secret", Literal, "User:alice", Read, Deny),
        ]);
        assert!(!may(&a, &image, "alice", Read, "secret"));
        assert!(may(&a, &image, "alice", Describe, "secret"));
        assert!(may(&a, &image, "bob", Read, "secret"));
    }

    #[test]
    fn allows_imply_describe_and_acls_of_others_deny_despite_allow_everyone() {
        use PatternType::*;
        use PermissionType::Allow;
        let a = authorizer(true);
        let image = acls(&[
            acl("t", Literal, "User:alice", Write, Allow),
            acl("c", Literal, "User:alice", AlterConfigs, Allow),
        ]);
        assert!(may(&a, &image, "alice", Describe, "t"));
        assert!(!may(&a, &image, "alice", Read, "t"));
        assert!(may(&a, &image, "alice", DescribeConfigs, "c"));
        // The resource has ACLs, none for bob: denied, allow.everyone.if.no.acl.found or not.
        assert!(!may(&a, &image, "bob", Describe, "t"));
        // No ACL on this one: allow.everyone.if.no.acl.found decides.
        assert!(may(&a, &image, "bob", Describe, "other"));
    }

    #[test]
    fn hosts_match_exactly_or_by_wildcard() {
        let a = authorizer(false);
        let mut b = acl(
            "t",
            PatternType::Literal,
            "User:alice",
            Read,
            PermissionType::Allow,
        );
        b.host = "10.0.0.1".into();
        let image = acls(&[b]);
        assert!(!may(&a, &image, "alice", Read, "t"));
        let ten = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let alice = KafkaPrincipal::user("alice");
        assert!(a.authorize_principal(&image, &alice, ten, Read, ResourceType::Topic, "t"));
        let mapped = IpAddr::V6(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped());
        assert!(a.authorize_principal(&image, &alice, mapped, Read, ResourceType::Topic, "t"));
    }
}
