//! ACL binding filters of DescribeAcls and DeleteAcls, and the checks of bindings and
//! filters that Kafka makes before storing or matching them.
//!
//! Matching is Kafka's `AclBindingFilter.matches`: resource type ANY or equal; pattern type
//! LITERAL / PREFIXED equal with the exact name (or any name when none is given), ANY with
//! the exact name, MATCH with the bindings that would apply to the named resource (LITERAL
//! of that name or `*`, PREFIXED of a prefix of it); principal, host: absent or equal;
//! operation and permission: ANY or equal. Checks are Kafka's `AclControlManager`'s
//! (`validateNewAcl`, `validateFilter`), answered INVALID_REQUEST. Pure.

use brook_raft::AclBinding;

use super::codes::{AclOperation, PatternType, PermissionType, ResourceType, WILDCARD_RESOURCE};

/// A filter, as the wire gives it (codes decoded).
#[derive(Clone, Debug)]
pub struct AclFilter {
    pub resource_type: ResourceType,
    pub resource_name: Option<String>,
    pub pattern_type: PatternType,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: AclOperation,
    pub permission_type: PermissionType,
}

impl AclFilter {
    /// Kafka's `validateFilter`: UNKNOWN anywhere is refused.
    pub fn check(&self) -> Result<(), &'static str> {
        if self.resource_type == ResourceType::Unknown || self.pattern_type == PatternType::Unknown
        {
            return Err("Unknown patternFilter.");
        }
        if self.operation == AclOperation::Unknown
            || self.permission_type == PermissionType::Unknown
        {
            return Err("Unknown entryFilter.");
        }
        Ok(())
    }

    pub fn matches(&self, b: &AclBinding) -> bool {
        self.matches_pattern(b) && self.matches_entry(b)
    }

    fn matches_pattern(&self, b: &AclBinding) -> bool {
        let rtype = ResourceType::from_code(b.resource_type);
        let ptype = PatternType::from_code(b.pattern_type);
        if self.resource_type != ResourceType::Any && self.resource_type != rtype {
            return false;
        }
        if !matches!(self.pattern_type, PatternType::Any | PatternType::Match)
            && self.pattern_type != ptype
        {
            return false;
        }
        let Some(name) = &self.resource_name else {
            return true;
        };
        if self.pattern_type == PatternType::Any || self.pattern_type == ptype {
            return *name == b.resource_name;
        }
        match ptype {
            PatternType::Literal => {
                *name == b.resource_name || b.resource_name == WILDCARD_RESOURCE
            }
            PatternType::Prefixed => name.starts_with(b.resource_name.as_str()),
            _ => false,
        }
    }

    fn matches_entry(&self, b: &AclBinding) -> bool {
        self.principal.as_ref().is_none_or(|p| *p == b.principal)
            && self.host.as_ref().is_none_or(|h| *h == b.host)
            && (self.operation == AclOperation::Any || self.operation.code() == b.operation)
            && (self.permission_type == PermissionType::Any
                || self.permission_type.code() == b.permission_type)
    }
}

/// Kafka's `validateNewAcl`: the message of the INVALID_REQUEST a binding is refused with.
pub fn check_new_binding(b: &AclBinding) -> Result<(), String> {
    let rtype = ResourceType::from_code(b.resource_type);
    if matches!(rtype, ResourceType::Unknown | ResourceType::Any) {
        return Err(format!(
            "Invalid resourceType {}",
            kafka_name(&format!("{rtype:?}"))
        ));
    }
    let ptype = PatternType::from_code(b.pattern_type);
    if !matches!(ptype, PatternType::Literal | PatternType::Prefixed) {
        return Err(format!(
            "Invalid patternType {}",
            kafka_name(&format!("{ptype:?}"))
        ));
    }
    let op = AclOperation::from_code(b.operation);
    if matches!(op, AclOperation::Unknown | AclOperation::Any) {
        return Err(format!(
            "Invalid operation {}",
            kafka_name(&format!("{op:?}"))
        ));
    }
    let perm = PermissionType::from_code(b.permission_type);
    if !matches!(perm, PermissionType::Allow | PermissionType::Deny) {
        return Err(format!(
            "Invalid permissionType {}",
            kafka_name(&format!("{perm:?}"))
        ));
    }
    if b.resource_name.is_empty() {
        return Err("Resource name should not be empty".to_owned());
    }
    if !b.principal.contains(':') {
        return Err(format!(
            "Could not parse principal from `{}` (no colon is present separating the principal type from the principal name)",
            b.principal
        ));
    }
    Ok(())
}

/// Kafka's enum constant spelling of a variant name: `TransactionalId` → `TRANSACTIONAL_ID`.
fn kafka_name(variant: &str) -> String {
    let mut out = String::with_capacity(variant.len() + 4);
    for (i, c) in variant.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(name: &str, pattern: PatternType) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Topic.code(),
            resource_name: name.into(),
            pattern_type: pattern.code(),
            principal: "User:alice".into(),
            host: "*".into(),
            operation: AclOperation::Read.code(),
            permission_type: PermissionType::Allow.code(),
        }
    }

    fn filter(name: Option<&str>, pattern: PatternType) -> AclFilter {
        AclFilter {
            resource_type: ResourceType::Any,
            resource_name: name.map(str::to_owned),
            pattern_type: pattern,
            principal: None,
            host: None,
            operation: AclOperation::Any,
            permission_type: PermissionType::Any,
        }
    }

    #[test]
    fn pattern_filters_match_as_kafkas_resource_pattern_filter() {
        use PatternType::*;
        let literal = binding("orders", Literal);
        let wildcard = binding("*", Literal);
        let prefixed = binding("ord", Prefixed);
        assert!(filter(None, Any).matches(&prefixed));
        assert!(filter(Some("orders"), Any).matches(&literal));
        assert!(!filter(Some("orders"), Any).matches(&wildcard));
        assert!(filter(Some("orders"), Match).matches(&wildcard));
        assert!(filter(Some("orders"), Match).matches(&prefixed));
        assert!(filter(Some("orders"), Match).matches(&literal));
        assert!(!filter(Some("orders"), Prefixed).matches(&prefixed));
        assert!(filter(Some("ord"), Prefixed).matches(&prefixed));
        assert!(!filter(None, Literal).matches(&prefixed));
    }

    #[test]
    fn entry_filters_match_absent_any_or_equal_fields() {
        let b = binding("t", PatternType::Literal);
        let mut f = filter(None, PatternType::Any);
        f.principal = Some("User:alice".into());
        f.operation = AclOperation::Read;
        assert!(f.matches(&b));
        f.permission_type = PermissionType::Deny;
        assert!(!f.matches(&b));
    }

    #[test]
    fn new_bindings_are_checked_as_kafkas_controller_checks_them() {
        let mut b = binding("t", PatternType::Literal);
        assert_eq!(check_new_binding(&b), Ok(()));
        b.resource_type = ResourceType::Any.code();
        assert_eq!(
            check_new_binding(&b),
            Err("Invalid resourceType ANY".into())
        );
        b.resource_type = ResourceType::TransactionalId.code();
        b.pattern_type = PatternType::Match.code();
        assert_eq!(
            check_new_binding(&b),
            Err("Invalid patternType MATCH".into())
        );
        b.pattern_type = PatternType::Prefixed.code();
        b.principal = "alice".into();
        assert!(check_new_binding(&b).is_err_and(|m| m.starts_with("Could not parse principal")));
        assert_eq!(kafka_name("TransactionalId"), "TRANSACTIONAL_ID");
    }

    #[test]
    fn unknown_filters_are_refused() {
        let mut f = filter(None, PatternType::Unknown);
        assert_eq!(f.check(), Err("Unknown patternFilter."));
        f.pattern_type = PatternType::Any;
        f.operation = AclOperation::Unknown;
        assert_eq!(f.check(), Err("Unknown entryFilter."));
    }
}
