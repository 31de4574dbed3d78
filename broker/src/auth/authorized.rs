//! The "authorized operations" bitfields of Metadata and DescribeCluster (KIP-430),
//! for a broker without an authorizer: every operation that applies to the resource.
//! Bit n stands for Kafka's `AclOperation` code n. The field's "not requested" value
//! is `i32::MIN`; a client that did ask must get real bits (kafka-python decodes
//! each set bit as an operation and rejects bit 31).

const READ: i32 = 3;
const WRITE: i32 = 4;
const CREATE: i32 = 5;
const DELETE: i32 = 6;
const ALTER: i32 = 7;
const DESCRIBE: i32 = 8;
const CLUSTER_ACTION: i32 = 9;
const DESCRIBE_CONFIGS: i32 = 10;
const ALTER_CONFIGS: i32 = 11;
const IDEMPOTENT_WRITE: i32 = 12;

const fn bits(ops: &[i32]) -> i32 {
    let mut out = 0;
    let mut i = 0;
    while i < ops.len() {
        out |= 1 << ops[i];
        i += 1;
    }
    out
}

/// What Kafka's `AclEntry.supportedOperations(TOPIC)` lists.
pub const TOPIC_OPERATIONS: i32 = bits(&[
    READ,
    WRITE,
    CREATE,
    DESCRIBE,
    DELETE,
    ALTER,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
]);

/// What Kafka's `AclEntry.supportedOperations(CLUSTER)` lists.
pub const CLUSTER_OPERATIONS: i32 = bits(&[
    CREATE,
    CLUSTER_ACTION,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
    IDEMPOTENT_WRITE,
    ALTER,
    DESCRIBE,
]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_and_cluster_operations_set_exactly_their_bits() {
        assert_eq!(TOPIC_OPERATIONS, 0b1101_1111_1000);
        assert_eq!(CLUSTER_OPERATIONS, 0b1_1111_1010_0000);
    }
}
