//! The Kafka requests a controller answers on its controller listener, beside the raft peer
//! RPC on the same port (`brook_raft::network::sniff` tells them apart by the first frame):
//! what `kafka-metadata-quorum --bootstrap-controller` and `kafka-features
//! --bootstrap-controller` send — ApiVersions (with the finalized features, so DescribeFeatures
//! works), DescribeCluster (the controllers, KIP-919), DescribeQuorum, and KIP-853's
//! AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter. Any other API closes the connection, as a
//! Kafka controller does for an API its listener does not expose.
//!
//! The listener's security: TLS (mutual when configured) when it is mapped to SSL or SASL_SSL,
//! and on SASL_PLAINTEXT / SASL_SSL a SASL login before any of these requests
//! (`cluster::quorum_sasl` runs it; ApiVersions is answered before the login too). With an
//! authorizer configured, requests are authorized as Kafka's controller authorizes them
//! (`authorize`): the principal is the SASL user's, else the client certificate's, mapped by
//! the listener's `ssl.principal.mapping.rules`, or ANONYMOUS without either.
//!
//! Served for both a combined node (the `Broker`) and a controller-only one
//! ([`ControllerOnly`]), through [`ControllerNode`]; the handler holds a `Weak` so a node
//! that stops is not kept alive by its own listener.

mod authorize;
mod cluster;
mod voters;

use std::net::SocketAddr;
use std::sync::{Arc, Weak};

use base64::Engine as _;
use brook_protocol::kafka_protocol::messages::{RequestKind, ResponseKind};
use brook_protocol::request::{decode_request, Decoded};
use brook_protocol::response::encode_response;
use brook_raft::network::sniff::KafkaHandler;
use brook_raft::network::PeerStream;
use brook_raft::MetadataQuorum;
use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::auth::Authorizer;
use crate::broker::Broker;
use crate::config::BrokerConfig;
use authorize::Caller;

/// The largest request read (the voter APIs are small; Kafka's limit is far larger).
const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// What the controller listener's requests need from the node.
pub trait ControllerNode: Send + Sync + 'static {
    fn quorum(&self) -> &MetadataQuorum;
    fn config(&self) -> &BrokerConfig;
    fn authorizer(&self) -> Option<&Authorizer>;
}

impl ControllerNode for Broker {
    fn quorum(&self) -> &MetadataQuorum {
        &self.quorum
    }
    fn config(&self) -> &BrokerConfig {
        &self.config
    }
    fn authorizer(&self) -> Option<&Authorizer> {
        self.authorizer.as_ref()
    }
}

/// A controller-only node (`process.roles=controller`): its quorum, configuration and
/// authorizer.
pub struct ControllerOnly {
    pub quorum: MetadataQuorum,
    pub config: BrokerConfig,
    pub authorizer: Option<Authorizer>,
}

impl ControllerOnly {
    pub fn new(quorum: MetadataQuorum, config: BrokerConfig) -> Self {
        let authorizer = config.authorizer.as_ref().map(Authorizer::new);
        ControllerOnly {
            quorum,
            config,
            authorizer,
        }
    }
}

impl ControllerNode for ControllerOnly {
    fn quorum(&self) -> &MetadataQuorum {
        &self.quorum
    }
    fn config(&self) -> &BrokerConfig {
        &self.config
    }
    fn authorizer(&self) -> Option<&Authorizer> {
        self.authorizer.as_ref()
    }
}

/// Starts answering Kafka requests on `node`'s controller listener.
pub fn install<N: ControllerNode>(node: &Arc<N>) {
    let weak: Weak<N> = Arc::downgrade(node);
    let handler: KafkaHandler = Arc::new(move |stream, peer, client_cert, sasl_user| {
        let weak = weak.clone();
        Box::pin(async move {
            let Some(caller) = weak.upgrade().and_then(|node| {
                authorize::caller(node.config(), peer, client_cert.as_deref(), sasl_user)
            }) else {
                return;
            };
            serve(stream, peer, caller, weak).await
        })
    });
    node.quorum().serve_kafka_on_controller_listener(handler);
}

/// A Kafka UUID from its base64 text (`meta.properties`' `directory.id`).
pub fn kafka_uuid(text: &str) -> Option<uuid::Uuid> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .ok()?;
    uuid::Uuid::from_slice(&bytes).ok()
}

async fn serve<N: ControllerNode>(
    mut stream: PeerStream,
    peer: SocketAddr,
    caller: Caller,
    node: Weak<N>,
) {
    loop {
        let mut len = [0u8; 4];
        if stream.read_exact(&mut len).await.is_err() {
            return;
        }
        let len = u32::from_be_bytes(len) as usize;
        if len > MAX_REQUEST_BYTES {
            tracing::debug!(%peer, len, "oversized request on the controller listener");
            return;
        }
        let mut frame = vec![0u8; len];
        if stream.read_exact(&mut frame).await.is_err() {
            return;
        }
        let request = match decode_request(Bytes::from(frame)) {
            Ok(Decoded::Request(request)) => request,
            Ok(Decoded::UnsupportedVersion { api_key, header }) => {
                // ApiVersions of a newer client is answered at v0 with the versions served.
                if api_key != brook_protocol::kafka_protocol::messages::ApiKey::ApiVersions {
                    return;
                }
                let Some(node) = node.upgrade() else {
                    return;
                };
                let body = cluster::unsupported_api_versions(node.config());
                drop(node);
                if write(&mut stream, api_key, 0, header.correlation_id, &body)
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
            Err(e) => {
                tracing::debug!(%peer, error = %e, "bad request on the controller listener");
                return;
            }
        };
        let Some(node) = node.upgrade() else {
            return;
        };
        let version = request.header.request_api_version;
        if let Some(refused) = authorize::refusal(node.as_ref(), &caller, &request.body) {
            drop(node);
            if write(
                &mut stream,
                request.api_key,
                version,
                request.header.correlation_id,
                &refused,
            )
            .await
            .is_err()
            {
                return;
            }
            continue;
        }
        let response = match request.body {
            RequestKind::ApiVersions(_) => Some(ResponseKind::ApiVersions(cluster::api_versions(
                node.as_ref(),
            ))),
            RequestKind::DescribeCluster(req) => Some(ResponseKind::DescribeCluster(
                cluster::describe_cluster(node.as_ref(), &req).await,
            )),
            RequestKind::DescribeQuorum(_) => Some(ResponseKind::DescribeQuorum(
                cluster::describe_quorum(node.as_ref(), version).await,
            )),
            RequestKind::AddRaftVoter(req) => Some(ResponseKind::AddRaftVoter(
                voters::add(node.as_ref(), &req).await,
            )),
            RequestKind::RemoveRaftVoter(req) => Some(ResponseKind::RemoveRaftVoter(
                voters::remove(node.as_ref(), &req).await,
            )),
            RequestKind::UpdateRaftVoter(req) => Some(ResponseKind::UpdateRaftVoter(
                voters::update(node.as_ref(), &req),
            )),
            _ => None,
        };
        drop(node);
        let Some(response) = response else {
            tracing::debug!(%peer, api = ?request.api_key, "api not served on the controller listener");
            return;
        };
        if write(
            &mut stream,
            request.api_key,
            version,
            request.header.correlation_id,
            &response,
        )
        .await
        .is_err()
        {
            return;
        }
    }
}

/// The answer to an ApiVersions request `frame` on the controller listener (before a SASL
/// login: `cluster::quorum_sasl`), at its version or, for a version this codec cannot read,
/// at v0; `None` for anything else.
pub(crate) fn api_versions_answer(
    config: &BrokerConfig,
    image: &brook_raft::MetadataImage,
    frame: Bytes,
) -> Option<Bytes> {
    use brook_protocol::kafka_protocol::messages::ApiKey;
    let (version, correlation_id, body) = match decode_request(frame).ok()? {
        Decoded::Request(request) if request.api_key == ApiKey::ApiVersions => (
            request.header.request_api_version,
            request.header.correlation_id,
            ResponseKind::ApiVersions(cluster::api_versions_of(config, image)),
        ),
        Decoded::UnsupportedVersion {
            api_key: ApiKey::ApiVersions,
            header,
        } => (
            0,
            header.correlation_id,
            cluster::unsupported_api_versions(config),
        ),
        _ => return None,
    };
    encode_response(ApiKey::ApiVersions, version, correlation_id, &body).ok()
}

async fn write(
    stream: &mut PeerStream,
    api_key: brook_protocol::kafka_protocol::messages::ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> std::io::Result<()> {
    let frame = encode_response(api_key, version, correlation_id, body)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    stream.write_all(&frame).await?;
    stream.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_ids_read_as_kafka_uuids() {
        let id = uuid::Uuid::new_v4();
        let text = crate::metadata::meta_properties::uuid_to_kafka_string(id);
        assert_eq!(kafka_uuid(&text), Some(id));
        assert_eq!(kafka_uuid("xyz"), None);
    }
}
