//! Authentication and authorization. [`sasl`] authenticates connections on SASL
//! listeners; [`acl`] is the ACL authorizer (Kafka's `StandardAuthorizer`), configured by
//! `authorizer.class.name`. Without one every principal may do everything, `authorized`
//! reports that in the bitfields clients ask for, and the ACL APIs answer
//! SECURITY_DISABLED as Kafka does. [`authorizer`] is the one place that says which.

pub mod acl;
pub mod authorized;
pub mod sasl;
pub mod ssl_principal;

pub use acl::{Access, Authorizer};

use std::net::IpAddr;

use brook_raft::MetadataImage;

use crate::broker::Broker;
use crate::server::session::KafkaPrincipal;

/// The broker's authorizer, if one is configured.
pub fn authorizer(broker: &Broker) -> Option<&Authorizer> {
    broker.authorizer.as_ref()
}

/// Whether `principal` from `host` may DESCRIBE `topic` under `image`'s ACLs (always without
/// an authorizer): the filter of a consumer group's topic patterns, which Kafka 4.4 resolves
/// with the context of the heartbeat that asked (`TopicRegexResolver`).
pub fn may_describe_topic(
    broker: &Broker,
    image: &MetadataImage,
    principal: &KafkaPrincipal,
    host: IpAddr,
    topic: &str,
) -> bool {
    authorizer(broker).is_none_or(|a| {
        a.authorize_principal(
            &image.acls,
            principal,
            host,
            acl::AclOperation::Describe,
            acl::ResourceType::Topic,
            topic,
        )
    })
}
