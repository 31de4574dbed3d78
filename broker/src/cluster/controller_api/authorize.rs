//! Who is asking on the controller listener, and whether they may (with an authorizer
//! configured), as Kafka's controller checks its requests: AddRaftVoter and RemoveRaftVoter
//! need ALTER on the cluster, UpdateRaftVoter CLUSTER_ACTION, DescribeQuorum DESCRIBE; a
//! refusal is CLUSTER_AUTHORIZATION_FAILED. A SASL-authenticated peer's raft traffic needs
//! CLUSTER_ACTION (Kafka's Vote, Fetch and the broker-to-controller requests do;
//! `cluster::quorum_sasl`). Without an authorizer every caller may, as in Kafka.

use std::net::{IpAddr, SocketAddr};

use brook_protocol::kafka_protocol::messages::{
    AddRaftVoterResponse, DescribeQuorumResponse, RemoveRaftVoterResponse, RequestKind,
    ResponseKind, UpdateRaftVoterResponse,
};
use brook_protocol::kafka_protocol::ResponseError;

use super::ControllerNode;
use crate::auth::acl::{AclOperation, ResourceType, CLUSTER_NAME};
use crate::auth::ssl_principal::{subject_dn_rfc2253, PrincipalMappingRules};
use crate::config::tls::ListenerTls;
use crate::config::BrokerConfig;
use crate::server::session::KafkaPrincipal;

/// The principal of a connection and where it comes from.
pub(super) struct Caller {
    principal: KafkaPrincipal,
    host: IpAddr,
}

/// The caller of a connection from `peer` that logged in as `sasl_user` or presented
/// `client_cert` (DER): `User:<sasl_user>` (as Kafka, SASL's principal wins over the
/// certificate's on SASL_SSL), else the certificate's subject DN mapped by the controller
/// listener's `ssl.principal.mapping.rules`, else ANONYMOUS. `None` (logged) when the
/// certificate's subject cannot be mapped, as a broker listener closes such a connection.
pub(super) fn caller(
    config: &BrokerConfig,
    peer: SocketAddr,
    client_cert: Option<&[u8]>,
    sasl_user: Option<String>,
) -> Option<Caller> {
    let host = peer.ip();
    if let Some(user) = sasl_user {
        return Some(Caller {
            principal: KafkaPrincipal::user(user),
            host,
        });
    }
    let Some(cert) = client_cert else {
        return Some(Caller {
            principal: KafkaPrincipal::anonymous(),
            host,
        });
    };
    let mapped = subject_dn_rfc2253(cert).and_then(|dn| mapping_rules(config)?.apply(&dn));
    match mapped {
        Some(name) => Some(Caller {
            principal: KafkaPrincipal::user(name),
            host,
        }),
        None => {
            tracing::info!(%peer, "controller listener client certificate maps to no principal; connection closed");
            None
        }
    }
}

/// The controller listener's principal mapping rules (it is an SSL listener when a client
/// certificate was presented).
fn mapping_rules(config: &BrokerConfig) -> Option<PrincipalMappingRules> {
    let name = config.controller_listener_names.first()?;
    ListenerTls::resolve(&config.layers, name, "SSL")
        .ok()
        .map(|tls| tls.principal_mapping_rules)
}

/// The refusal to send instead of serving `request`, if the caller may not make it.
pub(super) fn refusal(
    node: &dyn ControllerNode,
    caller: &Caller,
    request: &RequestKind,
) -> Option<ResponseKind> {
    let authorizer = node.authorizer()?;
    let operation = match request {
        RequestKind::AddRaftVoter(_) | RequestKind::RemoveRaftVoter(_) => AclOperation::Alter,
        RequestKind::UpdateRaftVoter(_) => AclOperation::ClusterAction,
        RequestKind::DescribeQuorum(_) => AclOperation::Describe,
        _ => return None,
    };
    let image = node.quorum().image();
    let allowed = authorizer.authorize_principal(
        &image.acls,
        &caller.principal,
        caller.host,
        operation,
        ResourceType::Cluster,
        CLUSTER_NAME,
    );
    if allowed {
        return None;
    }
    let code = ResponseError::ClusterAuthorizationFailed.code();
    Some(match request {
        RequestKind::AddRaftVoter(_) => {
            ResponseKind::AddRaftVoter(AddRaftVoterResponse::default().with_error_code(code))
        }
        RequestKind::RemoveRaftVoter(_) => {
            ResponseKind::RemoveRaftVoter(RemoveRaftVoterResponse::default().with_error_code(code))
        }
        RequestKind::UpdateRaftVoter(_) => {
            ResponseKind::UpdateRaftVoter(UpdateRaftVoterResponse::default().with_error_code(code))
        }
        _ => ResponseKind::DescribeQuorum(DescribeQuorumResponse::default().with_error_code(code)),
    })
}
