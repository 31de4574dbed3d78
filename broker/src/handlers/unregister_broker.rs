//! UnregisterBroker (key 64; `kafka-cluster unregister --id N`, `Admin.unregisterBroker`,
//! KIP-1073): removes a retired broker's registration, so it leaves DescribeCluster and
//! can lead nothing; move its replicas away first (`kafka-reassign-partitions`), as Kafka
//! expects. One `Command::UnregisterBroker` through the quorum; a broker that still runs
//! registers again, as in Kafka.
//!
//! Answers BROKER_ID_NOT_REGISTERED ("Broker ID N is not currently registered") for an id
//! without a registration. Authorization (`ControllerApis.handleUnregisterBroker`): ALTER on
//! the cluster, else CLUSTER_AUTHORIZATION_FAILED.

use brook_protocol::kafka_protocol::messages::{UnregisterBrokerRequest, UnregisterBrokerResponse};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_raft::Command;
use tracing::info;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::{BrokerError, Denied};
use crate::server::session::Session;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: UnregisterBrokerRequest,
) -> UnregisterBrokerResponse {
    if !Access::new(broker, session).cluster(AclOperation::Alter) {
        let denied = Denied::Cluster;
        return UnregisterBrokerResponse::default()
            .with_error_code(denied.code().code())
            .with_error_message(Some(StrBytes::from_string(denied.to_string())));
    }
    let broker_id = req.broker_id.0;
    match broker
        .quorum
        .propose(Command::UnregisterBroker { broker_id })
        .await
    {
        Ok(()) => {
            info!(broker_id, "broker unregistered");
            UnregisterBrokerResponse::default()
        }
        Err(e) => {
            let e = BrokerError::from(e);
            let message = match &e {
                BrokerError::Propose(brook_raft::ProposeError::Apply(apply)) => apply.to_string(),
                other => other.to_string(),
            };
            UnregisterBrokerResponse::default()
                .with_error_code(e.code().code())
                .with_error_message(Some(StrBytes::from_string(message)))
        }
    }
}
