//! Authentication and authorization. [`sasl`] authenticates connections on SASL
//! listeners. Brook has no authorizer yet, so every principal may do everything;
//! `authorized` reports that in the bitfields clients ask for, and [`authorizer`] is the
//! one place that says "no authorizer is configured" (Kafka's `authorizer.class.name`
//! left empty), which the ACL APIs answer with SECURITY_DISABLED as Kafka does.

pub mod authorized;
pub mod sasl;
pub mod ssl_principal;

use crate::broker::Broker;

/// The authorizer that holds and checks ACLs. None exists yet: the type has no value, so
/// the ACL handlers' "with an authorizer" arms are empty matches the compiler checks, to
/// be filled in when the security work gives it one.
pub enum Authorizer {}

/// The broker's authorizer, if one is configured: never, for now.
pub fn authorizer(_broker: &Broker) -> Option<&Authorizer> {
    None
}
