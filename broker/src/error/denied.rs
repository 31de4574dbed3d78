//! Authorization refusals: the resource kind whose ACL the session lacks picks Kafka's
//! `*_AUTHORIZATION_FAILED` code; the messages are Kafka's default ones (`Errors.java`).

use std::fmt;

use brook_protocol::kafka_protocol::ResponseError;

/// What the session was not authorized for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    Topic,
    Group,
    Cluster,
    TransactionalId,
}

impl Denied {
    pub fn code(self) -> ResponseError {
        match self {
            Denied::Topic => ResponseError::TopicAuthorizationFailed,
            Denied::Group => ResponseError::GroupAuthorizationFailed,
            Denied::Cluster => ResponseError::ClusterAuthorizationFailed,
            Denied::TransactionalId => ResponseError::TransactionalIdAuthorizationFailed,
        }
    }
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Denied::Topic => "Topic authorization failed.",
            Denied::Group => "Group authorization failed.",
            Denied::Cluster => "Cluster authorization failed.",
            Denied::TransactionalId => "Transactional Id authorization failed.",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_has_kafkas_code() {
        assert_eq!(Denied::Topic.code().code(), 29);
        assert_eq!(Denied::Group.code().code(), 30);
        assert_eq!(Denied::Cluster.code().code(), 31);
        assert_eq!(Denied::TransactionalId.code().code(), 53);
    }
}
