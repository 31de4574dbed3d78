//! ACLs with Kafka's `StandardAuthorizer` semantics: [`codes`] (Kafka's vocabularies),
//! [`authorizer`] (the decision), [`filter`] (DescribeAcls / DeleteAcls filters and the
//! checks of new bindings). Bindings live in the metadata image (`brook_raft::AclsImage`).
//!
//! Handlers ask through [`Access`]: built once per request from the broker and the
//! connection's session, it holds the image of that moment, so each check afterwards is
//! lock-free and allocation-free. Without an authorizer every check allows.

pub mod authorizer;
pub mod codes;
pub mod filter;

use std::sync::Arc;

use brook_raft::MetadataImage;

pub use authorizer::Authorizer;
pub use codes::{AclOperation, PatternType, PermissionType, ResourceType, CLUSTER_NAME};

use crate::broker::Broker;
use crate::server::session::Session;

/// One request's authorization context.
pub struct Access<'a> {
    checks: Option<(&'a Authorizer, Arc<MetadataImage>)>,
    session: &'a Session,
}

impl<'a> Access<'a> {
    pub fn new(broker: &'a Broker, session: &'a Session) -> Access<'a> {
        Access {
            checks: super::authorizer(broker).map(|a| (a, broker.image())),
            session,
        }
    }

    /// Whether the session may perform `operation` on the resource.
    pub fn allows(&self, operation: AclOperation, resource_type: ResourceType, name: &str) -> bool {
        match &self.checks {
            None => true,
            Some((authorizer, image)) => {
                let allowed =
                    authorizer.authorize(&image.acls, self.session, operation, resource_type, name);
                if !allowed {
                    tracing::debug!(
                        principal = %self.session.principal(),
                        ?operation,
                        ?resource_type,
                        resource = name,
                        "authorization denied"
                    );
                }
                allowed
            }
        }
    }

    pub fn topic(&self, operation: AclOperation, topic: &str) -> bool {
        self.allows(operation, ResourceType::Topic, topic)
    }

    pub fn group(&self, operation: AclOperation, group: &str) -> bool {
        self.allows(operation, ResourceType::Group, group)
    }

    pub fn transactional_id(&self, operation: AclOperation, id: &str) -> bool {
        self.allows(operation, ResourceType::TransactionalId, id)
    }

    /// Kafka's check for a transaction's offsets (AddOffsetsToTxn, TxnOffsetCommit): WRITE on
    /// the transactional id, then READ on the group; the refusal's code, if any.
    pub fn txn_offsets(&self, transactional_id: &str, group: &str) -> Option<crate::error::Denied> {
        use crate::error::Denied;
        if !self.transactional_id(AclOperation::Write, transactional_id) {
            Some(Denied::TransactionalId)
        } else if !self.group(AclOperation::Read, group) {
            Some(Denied::Group)
        } else {
            None
        }
    }

    pub fn cluster(&self, operation: AclOperation) -> bool {
        self.allows(operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// Kafka 4.x's idempotent-producer rule (KIP-679): IDEMPOTENT_WRITE on the cluster, or
    /// WRITE on any topic.
    pub fn idempotent_write(&self) -> bool {
        if self.cluster(AclOperation::IdempotentWrite) {
            return true;
        }
        match &self.checks {
            None => true,
            Some((authorizer, image)) => authorizer.may_write_some_topic(&image.acls, self.session),
        }
    }

    /// KIP-430: of the operations set in `candidates` (bit n = operation code n), those
    /// the session may perform on the resource.
    pub fn authorized_operations(
        &self,
        resource_type: ResourceType,
        name: &str,
        candidates: i32,
    ) -> i32 {
        (0..31)
            .filter(|bit| candidates & (1 << bit) != 0)
            .filter(|&bit| {
                let op = AclOperation::from_code(bit as i8);
                self.allows_quietly(op, resource_type, name)
            })
            .fold(0, |bits, bit| bits | (1 << bit))
    }

    /// KIP-430's cluster bitfield as Kafka fills it: the cluster operations the session
    /// may perform when it may DESCRIBE the cluster, else none.
    pub fn cluster_operations(&self) -> i32 {
        if !self.cluster(AclOperation::Describe) {
            return 0;
        }
        self.authorized_operations(
            ResourceType::Cluster,
            CLUSTER_NAME,
            super::authorized::CLUSTER_OPERATIONS,
        )
    }

    fn allows_quietly(
        &self,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        match &self.checks {
            None => true,
            Some((authorizer, image)) => {
                authorizer.authorize(&image.acls, self.session, operation, resource_type, name)
            }
        }
    }
}
