//! Every kind of log line a client can cause at will, each with its own limit (`limit`), and
//! the list `report_suppressed` summarises.

use super::limit::Limited;

pub static MALFORMED_FRAME: Limited = Limited::new("connections closed for a malformed frame");
pub static TRUNCATED_FRAME: Limited = Limited::new("connections closed mid-frame");
pub static BAD_REQUEST: Limited = Limited::new("connections closed for a bad request");
pub static SASL_PROTOCOL: Limited =
    Limited::new("connections closed for a request out of SASL order");
pub static FAILED_AUTHENTICATION: Limited = Limited::new("failed authentications");
pub static TLS_HANDSHAKE: Limited = Limited::new("failed TLS handshakes");
pub static ADDRESS_LIMIT: Limited = Limited::new("connections refused at max.connections.per.ip");
pub static IDLE: Limited = Limited::new("connections closed after connections.max.idle.ms");
pub static CONNECTION_RATE: Limited =
    Limited::new("connections refused past their address's connection_creation_rate");
pub static AUTO_CREATION_FAILED: Limited = Limited::new("topic auto-creations refused");
/// A full disk fails every produce to its partitions until space is freed: one ERROR line
/// per failure would add to the disk it reports full.
pub static APPEND_FAILED: Limited =
    Limited::new("produce appends failed with a storage error (KAFKA_STORAGE_ERROR)");

/// This node's logins to a peer's SASL controller listener, refused: raft retries every few
/// hundred ms while the password is wrong.
pub static CONTROLLER_LOGIN_REFUSED: Limited =
    Limited::new("logins to a peer's controller listener refused");

/// Raft connections refused after their login: the principal lacks CLUSTER_ACTION.
pub static RAFT_UNAUTHORIZED: Limited =
    Limited::new("raft connections refused for a principal without CLUSTER_ACTION");

pub static ALL: [&Limited; 13] = [
    &MALFORMED_FRAME,
    &TRUNCATED_FRAME,
    &BAD_REQUEST,
    &SASL_PROTOCOL,
    &FAILED_AUTHENTICATION,
    &TLS_HANDSHAKE,
    &ADDRESS_LIMIT,
    &IDLE,
    &CONNECTION_RATE,
    &AUTO_CREATION_FAILED,
    &APPEND_FAILED,
    &CONTROLLER_LOGIN_REFUSED,
    &RAFT_UNAUTHORIZED,
];
