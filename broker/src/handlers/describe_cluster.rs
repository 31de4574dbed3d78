//! DescribeCluster: the brokers and the controller, as `kafka-topics` and AdminClient
//! ask for them.

use brook_protocol::kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use brook_protocol::kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeClusterResponse,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;

use crate::auth::Access;
use crate::broker::Broker;
use crate::handlers::metadata::controller_id;
use crate::server::session::Session;

/// The brokers' addresses on the listener the request came in on.
pub fn handle(
    broker: &Broker,
    session: &Session,
    req: DescribeClusterRequest,
    _version: i16,
) -> DescribeClusterResponse {
    let image = broker.image();
    // Fenced brokers only when asked for (v2+, KIP-1073), flagged as such.
    let brokers = image
        .brokers
        .values()
        .filter(|b| b.is_active() || req.include_fenced_brokers)
        .filter_map(|b| {
            let (host, port) = b.endpoint(&session.listener_name)?;
            let broker = DescribeClusterBroker::default()
                .with_broker_id(BrokerId(b.broker_id))
                .with_host(StrBytes::from_string(host.to_owned()))
                .with_port(i32::from(port))
                .with_rack(b.rack.clone().map(StrBytes::from_string))
                .with_is_fenced(!b.is_active());
            Some(broker)
        })
        .collect();
    DescribeClusterResponse::default()
        .with_endpoint_type(1)
        .with_cluster_id(StrBytes::from_string(broker.cluster_id.clone()))
        .with_controller_id(BrokerId(controller_id(broker)))
        .with_brokers(brokers)
        .with_cluster_authorized_operations(if req.include_cluster_authorized_operations {
            Access::new(broker, session).cluster_operations()
        } else {
            i32::MIN
        })
}
