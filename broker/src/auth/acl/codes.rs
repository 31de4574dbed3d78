//! Kafka's ACL vocabularies with their wire codes (`ResourceType`, `PatternType`,
//! `AclOperation`, `AclPermissionType` in Kafka's `common.acl` / `common.resource`).
//! A code Kafka does not know decodes to `Unknown`, as Kafka's `fromCode` does; the
//! handlers refuse it where Kafka does. Pure.

/// Kafka's `ResourceType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ResourceType {
    Unknown = 0,
    Any = 1,
    Topic = 2,
    Group = 3,
    Cluster = 4,
    TransactionalId = 5,
    DelegationToken = 6,
    User = 7,
}

/// Kafka's `PatternType`: `Any` and `Match` only appear in filters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PatternType {
    Unknown = 0,
    Any = 1,
    Match = 2,
    Literal = 3,
    Prefixed = 4,
}

/// Kafka's `AclOperation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AclOperation {
    Unknown = 0,
    Any = 1,
    All = 2,
    Read = 3,
    Write = 4,
    Create = 5,
    Delete = 6,
    Alter = 7,
    Describe = 8,
    ClusterAction = 9,
    DescribeConfigs = 10,
    AlterConfigs = 11,
    IdempotentWrite = 12,
    CreateTokens = 13,
    DescribeTokens = 14,
}

/// Kafka's `AclPermissionType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PermissionType {
    Unknown = 0,
    Any = 1,
    Deny = 2,
    Allow = 3,
}

/// Kafka's `ResourcePattern.WILDCARD_RESOURCE`: a LITERAL `*` matches every name.
pub const WILDCARD_RESOURCE: &str = "*";
/// Kafka's `AclEntry.WILDCARD_HOST`.
pub const WILDCARD_HOST: &str = "*";
/// Kafka's `CLUSTER_NAME`: the one cluster resource's name.
pub const CLUSTER_NAME: &str = "kafka-cluster";

macro_rules! codes {
    ($ty:ident { $($variant:ident),* $(,)? }) => {
        impl $ty {
            /// The variant for a wire code; `Unknown` for codes Kafka does not define.
            pub fn from_code(code: i8) -> $ty {
                [$($ty::$variant),*]
                    .into_iter()
                    .find(|v| *v as i8 == code)
                    .unwrap_or($ty::Unknown)
            }

            pub fn code(self) -> i8 {
                self as i8
            }
        }
    };
}

codes!(ResourceType {
    Unknown,
    Any,
    Topic,
    Group,
    Cluster,
    TransactionalId,
    DelegationToken,
    User
});
codes!(PatternType {
    Unknown,
    Any,
    Match,
    Literal,
    Prefixed
});
codes!(AclOperation {
    Unknown,
    Any,
    All,
    Read,
    Write,
    Create,
    Delete,
    Alter,
    Describe,
    ClusterAction,
    DescribeConfigs,
    AlterConfigs,
    IdempotentWrite,
    CreateTokens,
    DescribeTokens,
});
codes!(PermissionType {
    Unknown,
    Any,
    Deny,
    Allow
});

impl AclOperation {
    /// The operations an ALLOW of `self` also grants (Kafka's `StandardAuthorizerData`:
    /// READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
    /// DESCRIBE_CONFIGS). DENY entries imply nothing.
    pub fn allow_implies(self, wanted: AclOperation) -> bool {
        self == wanted
            || self == AclOperation::All
            || match wanted {
                AclOperation::Describe => matches!(
                    self,
                    AclOperation::Read
                        | AclOperation::Write
                        | AclOperation::Delete
                        | AclOperation::Alter
                ),
                AclOperation::DescribeConfigs => self == AclOperation::AlterConfigs,
                _ => false,
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknown_codes_decode_to_unknown() {
        assert_eq!(ResourceType::from_code(5), ResourceType::TransactionalId);
        assert_eq!(ResourceType::from_code(42), ResourceType::Unknown);
        assert_eq!(AclOperation::from_code(12), AclOperation::IdempotentWrite);
        assert_eq!(AclOperation::IdempotentWrite.code(), 12);
        assert_eq!(PatternType::from_code(4), PatternType::Prefixed);
        assert_eq!(PermissionType::from_code(-1), PermissionType::Unknown);
    }

    #[test]
    fn an_allow_implies_describe_only_from_the_operations_kafka_names() {
        use AclOperation::*;
        for op in [Read, Write, Delete, Alter, Describe, All] {
            assert!(op.allow_implies(Describe), "{op:?}");
        }
        for op in [Create, ClusterAction, IdempotentWrite, AlterConfigs] {
            assert!(!op.allow_implies(Describe), "{op:?}");
        }
        assert!(AlterConfigs.allow_implies(DescribeConfigs));
        assert!(!Read.allow_implies(Write));
        assert!(All.allow_implies(IdempotentWrite));
    }
}
