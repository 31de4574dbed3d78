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

use crate::broker::Broker;

/// The broker's authorizer, if one is configured.
pub fn authorizer(broker: &Broker) -> Option<&Authorizer> {
    broker.authorizer.as_ref()
}
