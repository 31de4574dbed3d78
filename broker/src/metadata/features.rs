//! Feature levels (KIP-584, Kafka's `FeatureControlManager`): the features Brook supports,
//! the level each is finalized at, and UpdateFeatures' checks with Kafka 4.4's messages.
//!
//! A level set by UpdateFeatures lives in the metadata quorum (`MetadataImage::features`,
//! the same on every node); a feature never updated runs at the broker's default, as if the
//! cluster had been formatted with it: `transaction.version` at `brook.transaction.version`,
//! `group.version` at 1 when `group.coordinator.rebalance.protocols` lists `consumer`, else 0,
//! `eligible.leader.replicas.version` at 1 (KIP-966; Kafka 4.1+ formats new clusters so, and
//! the metadata quorum applies partition changes by the same rule: `brook_raft::elr_enabled`).
//! Level 0 is "disabled", and ApiVersions leaves it out of the finalized features as Kafka
//! does. The features Kafka 4.4 has and Brook does not implement (`metadata.version`,
//! `kraft.version`, `share.version`, `streams.version`) are refused as a Kafka controller
//! refuses a feature it does not know.

use brook_raft::MetadataImage;

use crate::config::BrokerConfig;
use crate::error::BrokerError;

pub const GROUP_VERSION: &str = "group.version";
pub const ELIGIBLE_LEADER_REPLICAS_VERSION: &str = brook_raft::ELIGIBLE_LEADER_REPLICAS_VERSION;
pub const TRANSACTION_VERSION: &str = "transaction.version";

/// The features Brook supports, with their highest level (the lowest is 0 for each):
/// `group.version` 1 serves KIP-848's ConsumerGroupHeartbeat/ConsumerGroupDescribe;
/// `transaction.version` 2 is Transactions V2 (KIP-890), which Java 4.x and franz-go
/// clients use when it is finalized; `eligible.leader.replicas.version` 1 is KIP-966's
/// eligible leader replicas.
pub const SUPPORTED: [(&str, i16); 3] = [
    (ELIGIBLE_LEADER_REPLICAS_VERSION, 1),
    (GROUP_VERSION, 1),
    (TRANSACTION_VERSION, 2),
];

pub const KRAFT_VERSION: &str = "kraft.version";

/// The features ApiVersions reports (Kafka's `kafka-features describe` lists them): the
/// updatable ones and `kraft.version`, 1 for a quorum formatted dynamic (`brook format
/// --standalone / --initial-controllers / --no-initial-controllers`, KIP-853), else 0. It is
/// set by `brook format` only: UpdateFeatures refuses it as before.
pub const REPORTED: [(&str, i16); 4] = [
    (ELIGIBLE_LEADER_REPLICAS_VERSION, 1),
    (GROUP_VERSION, 1),
    (KRAFT_VERSION, 1),
    (TRANSACTION_VERSION, 2),
];

/// The highest level Brook supports for `name` (`None`: a feature Brook does not know).
pub fn max_supported(name: &str) -> Option<i16> {
    SUPPORTED
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, max)| *max)
}

/// The level `name` runs at under `image`: the quorum's, else the broker's default.
pub fn finalized(config: &BrokerConfig, image: &MetadataImage, name: &str) -> i16 {
    if let Some(level) = image.features.get(name) {
        return *level;
    }
    match name {
        GROUP_VERSION => i16::from(config.group_consumer_protocol_enabled),
        TRANSACTION_VERSION => config.transaction_version,
        ELIGIBLE_LEADER_REPLICAS_VERSION => i16::from(brook_raft::elr_enabled(image)),
        _ => 0,
    }
}

/// Whether KIP-848 consumer groups are served: `consumer` is an enabled rebalance protocol
/// and `group.version` is at least 1 (Kafka 4.4 answers ConsumerGroupHeartbeat with
/// UNSUPPORTED_VERSION at group.version 0).
pub fn consumer_protocol_enabled(config: &BrokerConfig, image: &MetadataImage) -> bool {
    config.group_consumer_protocol_enabled && finalized(config, image, GROUP_VERSION) >= 1
}

/// The finalized features' epoch clients compare (a higher one is newer): the metadata
/// image's position, as Kafka's is its metadata offset.
pub fn epoch(image: &MetadataImage) -> i64 {
    i64::try_from(image.applied_index()).unwrap_or(i64::MAX)
}

/// UpdateFeatures' upgrade type (v1+; v0's `AllowDowngrade` maps to a safe downgrade).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpgradeType {
    Upgrade,
    SafeDowngrade,
    UnsafeDowngrade,
    Unknown,
}

impl UpgradeType {
    pub fn from_code(code: i8) -> UpgradeType {
        match code {
            1 => UpgradeType::Upgrade,
            2 => UpgradeType::SafeDowngrade,
            3 => UpgradeType::UnsafeDowngrade,
            _ => UpgradeType::Unknown,
        }
    }
}

/// Kafka's `FeatureControlManager.updateFeature` checks, in its order, for moving `name`
/// from `current` to `level`; `controller` is the node that checks (named in Kafka's
/// message). A refusal is INVALID_UPDATE_VERSION with Kafka's message.
pub fn check_update(
    name: &str,
    level: i16,
    upgrade: UpgradeType,
    current: i16,
    controller: u64,
) -> Result<(), BrokerError> {
    let refuse = |why: String| {
        Err(BrokerError::InvalidUpdateVersion(format!(
            "Invalid update version {level} for feature {name}. {why}"
        )))
    };
    if upgrade == UpgradeType::Unknown {
        return refuse("The controller does not support the given upgrade type.".into());
    }
    if level < 0 {
        return refuse("A feature version cannot be less than 0.".into());
    }
    match max_supported(name) {
        None => {
            return refuse(format!(
                "Local controller {controller} does not support this feature."
            ))
        }
        Some(max) if level > max => {
            return refuse(format!(
                "Local controller {controller} only supports versions 0-{max}"
            ))
        }
        Some(_) => {}
    }
    if level < current && upgrade == UpgradeType::Upgrade {
        return refuse("Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.".into());
    }
    if level > current && upgrade != UpgradeType::Upgrade {
        return refuse("Can't downgrade to a newer version.".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(name: &str, level: i16, upgrade: UpgradeType, current: i16) -> String {
        check_update(name, level, upgrade, current, 1)
            .expect_err("refused")
            .to_string()
    }

    #[test]
    fn updates_are_checked_in_kafkas_order_with_its_messages() {
        use UpgradeType::*;
        let prefix = "Invalid update version 3 for feature transaction.version.";
        assert_eq!(
            refusal(TRANSACTION_VERSION, 3, Upgrade, 2),
            format!("{prefix} Local controller 1 only supports versions 0-2")
        );
        assert_eq!(
            refusal(TRANSACTION_VERSION, 3, Unknown, 2),
            format!("{prefix} The controller does not support the given upgrade type.")
        );
        assert_eq!(
            refusal("foo.version", 1, Upgrade, 0),
            "Invalid update version 1 for feature foo.version. Local controller 1 does not support this feature."
        );
        assert_eq!(
            refusal(TRANSACTION_VERSION, 1, Upgrade, 2),
            "Invalid update version 1 for feature transaction.version. Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade."
        );
        assert_eq!(
            refusal(GROUP_VERSION, 1, SafeDowngrade, 0),
            "Invalid update version 1 for feature group.version. Can't downgrade to a newer version."
        );
        assert_eq!(
            refusal(GROUP_VERSION, -1, SafeDowngrade, 1),
            "Invalid update version -1 for feature group.version. A feature version cannot be less than 0."
        );
        for (level, upgrade, current) in [
            (2, Upgrade, 1),
            (2, Upgrade, 2),
            (0, SafeDowngrade, 2),
            (1, UnsafeDowngrade, 2),
        ] {
            assert!(check_update(TRANSACTION_VERSION, level, upgrade, current, 1).is_ok());
        }
    }

    #[test]
    fn a_level_in_the_quorum_overrides_the_brokers_default() {
        let config = BrokerConfig::load(None, Vec::new(), &[])
            .expect("defaults")
            .0;
        let mut image = MetadataImage::default();
        assert_eq!(finalized(&config, &image, TRANSACTION_VERSION), 2);
        assert_eq!(finalized(&config, &image, GROUP_VERSION), 1);
        assert!(consumer_protocol_enabled(&config, &image));
        image.features.insert(GROUP_VERSION.into(), 0);
        image.features.insert(TRANSACTION_VERSION.into(), 1);
        assert_eq!(finalized(&config, &image, TRANSACTION_VERSION), 1);
        assert!(!consumer_protocol_enabled(&config, &image));
    }
}
