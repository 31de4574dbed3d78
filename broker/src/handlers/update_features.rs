//! UpdateFeatures (57, KIP-584): `kafka-features upgrade / downgrade / disable`. ALTER on
//! the cluster; each feature checked as Kafka's controller checks it (see
//! `metadata::features`), in request order against the levels now finalized and, for the
//! dependencies between features, the levels the whole request would leave (so
//! `--release-version`, which sends every feature of a release at once, passes or fails as
//! one). The first
//! refusal fails the whole request (nothing changes) with one top-level error, as Kafka's
//! `UpdateFeaturesResponse.createWithErrors` reports it, with its controller's preamble;
//! otherwise every level goes to the quorum in one command (none with ValidateOnly,
//! `--dry-run`) and each feature's result is NONE. Turning `eligible.leader.replicas.version`
//! on also writes Kafka's ELR safety configs (one cluster-wide `min.insync.replicas`).
//! Upgrading `kraft.version` to 1 asks the metadata leader whether it knows every voter's
//! directory id (a static quorum's voters publish theirs to it) and, unless validating, has
//! it record them in the voter set before the level is written (Kafka's
//! `RaftClient.upgradeKRaftVersion`).

use brook_protocol::kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use brook_protocol::kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use brook_protocol::kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_raft::{Command, VoterDirectoryIds};

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::{BrokerError, Denied};
use crate::metadata::features::{self, Accepted, Checking, UpgradeType};
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
    let upgrade_of = |update: &FeatureUpdateKey| match version {
        0 if update.allow_downgrade => UpgradeType::SafeDowngrade,
        0 => UpgradeType::Upgrade,
        _ => UpgradeType::from_code(update.upgrade_type),
    };
    // Kafka's `proposedUpdatedVersions`: the levels as the whole request would leave them,
    // against which each feature's dependencies are checked.
    let mut proposed = features::all_finalized(&broker.config, &image);
    for update in &req.feature_updates {
        proposed.insert(update.feature.to_string(), update.max_version_level);
    }
    let upgrades_kraft = req.feature_updates.iter().any(|update| {
        update.feature.as_str() == features::KRAFT_VERSION
            && update.max_version_level
                > features::finalized(&broker.config, &image, features::KRAFT_VERSION)
    });
    // Only the leader knows which voters published their directory ids.
    let kraft_voters = if upgrades_kraft {
        match broker.quorum.upgrade_voters(true).await {
            Ok(known) => known,
            Err(e) => return refused(BrokerError::from(e)),
        }
    } else {
        VoterDirectoryIds::Known
    };
    let checking = Checking {
        controller,
        proposed: &proposed,
        kraft_voters,
    };
    let mut levels = Vec::with_capacity(req.feature_updates.len());
    for update in &req.feature_updates {
        let name = update.feature.as_str();
        let current = features::finalized(&broker.config, &image, name);
        let level = update.max_version_level;
        match features::check_update(name, level, upgrade_of(update), current, &checking) {
            Ok(Accepted::Level) => levels.push((name.to_owned(), level)),
            Ok(Accepted::Nothing) => {}
            Err(e) => {
                // Kafka's QuorumController says why the whole request failed.
                return refused(BrokerError::InvalidUpdateVersion(format!(
                    "The update failed for all features since the following feature had an error: {e}"
                )));
            }
        }
    }
    if !req.validate_only && !levels.is_empty() {
        let kraft_level = levels
            .iter()
            .find(|(name, _)| name == features::KRAFT_VERSION)
            .map(|(_, level)| *level);
        if let Some(level) = kraft_level {
            // The voter set first, then the level: a retry after a failure in between finds
            // the voters recorded and writes the level.
            match broker.quorum.upgrade_voters(false).await {
                Ok(VoterDirectoryIds::Known) => {}
                Ok(why) => {
                    return refused(BrokerError::InvalidUpdateVersion(format!(
                        "The update failed for all features since the following feature had an error: {}",
                        features::kraft_version_refusal(level, why)
                    )))
                }
                Err(e) => return refused(BrokerError::from(e)),
            }
        }
        let command = Command::UpdateFeatures {
            levels: levels.clone(),
        };
        if let Err(e) = broker.quorum.propose(command).await {
            return refused(BrokerError::from(e));
        }
        let enables_elr = levels
            .iter()
            .any(|(name, level)| name == features::ELIGIBLE_LEADER_REPLICAS_VERSION && *level > 0);
        if enables_elr {
            if let Err(e) = elr_safety_records(broker).await {
                return refused(e);
            }
        }
    }
    // Every feature of the request succeeded, whether or not it wrote a level.
    let results = req
        .feature_updates
        .iter()
        .map(|update| UpdatableFeatureResult::default().with_feature(update.feature.clone()))
        .collect();
    UpdateFeaturesResponse::default().with_results(results)
}

/// Kafka 4.4's `maybeGenerateElrSafetyRecords`, after an update that turns eligible leader
/// replicas on: the cluster gets a cluster-wide `min.insync.replicas` (this broker's static
/// value, Kafka's controller's) if it has none, and no broker keeps its own, so every
/// partition's ELR is measured against the one min ISR the quorum applies (KIP-966).
async fn elr_safety_records(broker: &Broker) -> Result<(), BrokerError> {
    let image = broker.image();
    let key = brook_raft::MIN_IN_SYNC_REPLICAS.to_string();
    let mut commands = Vec::new();
    let cluster_has_it = image
        .broker_configs(None)
        .is_some_and(|c| c.contains_key(&key));
    if !cluster_has_it {
        let value = broker
            .config
            .static_config()
            .get(&key)
            .cloned()
            .unwrap_or_else(|| "1".to_string());
        commands.push(Command::AlterBrokerConfigs {
            broker_id: None,
            set: [(key.clone(), value)].into_iter().collect(),
            delete: Vec::new(),
        });
    }
    for (id, configs) in &image.broker_configs {
        if id.is_some() && configs.contains_key(&key) {
            commands.push(Command::AlterBrokerConfigs {
                broker_id: *id,
                set: Default::default(),
                delete: vec![key.clone()],
            });
        }
    }
    for command in commands {
        broker.quorum.propose(command).await?;
    }
    Ok(())
}
