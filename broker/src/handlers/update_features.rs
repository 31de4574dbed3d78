//! UpdateFeatures (57, KIP-584): `kafka-features upgrade / downgrade / disable`. ALTER on
//! the cluster; each feature checked as Kafka's controller checks it (see
//! `metadata::features`), in request order against the levels now finalized. The first
//! refusal fails the whole request (nothing changes) with one top-level error, as Kafka's
//! `UpdateFeaturesResponse.createWithErrors` reports it, with its controller's preamble;
//! otherwise every level goes to the quorum in one command (none with ValidateOnly,
//! `--dry-run`) and each feature's result is NONE.

use brook_protocol::kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use brook_protocol::kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_raft::Command;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::{BrokerError, Denied};
use crate::metadata::features::{self, UpgradeType};
use crate::server::session::Session;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: UpdateFeaturesRequest,
    version: i16,
) -> UpdateFeaturesResponse {
    let refused = |e: BrokerError| {
        UpdateFeaturesResponse::default()
            .with_error_code(e.code().code())
            .with_error_message(Some(StrBytes::from_string(e.to_string())))
    };
    if !Access::new(broker, session).cluster(AclOperation::Alter) {
        return refused(BrokerError::NotAuthorized(Denied::Cluster));
    }
    let image = broker.image();
    // Kafka names the active controller, which checks; Brook's proposer checks.
    let controller = broker.quorum.leader().unwrap_or(broker.node_id as u64);
    let mut levels = Vec::with_capacity(req.feature_updates.len());
    for update in &req.feature_updates {
        let name = update.feature.as_str();
        let upgrade = match version {
            0 if update.allow_downgrade => UpgradeType::SafeDowngrade,
            0 => UpgradeType::Upgrade,
            _ => UpgradeType::from_code(update.upgrade_type),
        };
        let current = features::finalized(&broker.config, &image, name);
        let level = update.max_version_level;
        if let Err(e) = features::check_update(name, level, upgrade, current, controller) {
            // Kafka's QuorumController says why the whole request failed.
            return refused(BrokerError::InvalidUpdateVersion(format!(
                "The update failed for all features since the following feature had an error: {e}"
            )));
        }
        levels.push((name.to_owned(), level));
    }
    if !req.validate_only && !levels.is_empty() {
        let command = Command::UpdateFeatures {
            levels: levels.clone(),
        };
        if let Err(e) = broker.quorum.propose(command).await {
            return refused(BrokerError::from(e));
        }
    }
    let results = levels
        .into_iter()
        .map(|(name, _)| {
            UpdatableFeatureResult::default().with_feature(StrBytes::from_string(name))
        })
        .collect();
    UpdateFeaturesResponse::default().with_results(results)
}
