//! Feature levels (KIP-584, Kafka's `FeatureControlManager`): the features Brook supports,
//! the level each is finalized at, and UpdateFeatures' checks with Kafka 4.4's messages.
//!
//! A level set by `brook format` or UpdateFeatures lives in the metadata quorum
//! (`MetadataImage::features`, the same on every node); a feature never set runs at the
//! broker's default, as if the cluster had been formatted with it: `metadata.version` at
//! 4.4-IV2 (Kafka 4.4's latest production level; a cluster formatted before Brook kept the
//! level), `transaction.version` at `brook.transaction.version`, `group.version` at 1 when
//! `group.coordinator.rebalance.protocols` lists `consumer`, else 0,
//! `eligible.leader.replicas.version` at 1 (KIP-966; Kafka 4.1+ formats new clusters so, and
//! the metadata quorum applies partition changes by the same rule: `brook_raft::elr_enabled`),
//! `kraft.version` at 0 (`brook format` writes 1 for a dynamic quorum).
//! Level 0 is "disabled", and ApiVersions leaves it out of the finalized features as Kafka
//! does. Kafka 4.4's `share.version` and `streams.version`, which Brook does not implement,
//! are supported at level 0 only, as a Kafka controller without them supports them.

use std::collections::BTreeMap;

use brook_raft::{MetadataImage, VoterDirectoryIds};

use crate::config::BrokerConfig;
use crate::error::BrokerError;
use crate::metadata::metadata_version::{self, IBP_4_0_IV1};

pub const GROUP_VERSION: &str = "group.version";
pub const ELIGIBLE_LEADER_REPLICAS_VERSION: &str = brook_raft::ELIGIBLE_LEADER_REPLICAS_VERSION;
pub const TRANSACTION_VERSION: &str = "transaction.version";
pub const KRAFT_VERSION: &str = "kraft.version";
pub const METADATA_VERSION: &str = metadata_version::FEATURE_NAME;

/// The features Brook supports with their (lowest, highest) level:
/// `group.version` 1 serves KIP-848's ConsumerGroupHeartbeat/ConsumerGroupDescribe;
/// `transaction.version` 2 is Transactions V2 (KIP-890), which Java 4.x and franz-go clients
/// use when it is finalized; `eligible.leader.replicas.version` 1 is KIP-966's eligible
/// leader replicas; `kraft.version` 1 a quorum whose voters change (KIP-853);
/// `metadata.version` 3.3-IV3 (7) to 4.4-IV2 (33), Kafka 4.4's production levels. ApiVersions
/// reports each (`kafka-features describe` lists them).
pub const SUPPORTED: [(&str, i16, i16); 5] = [
    (ELIGIBLE_LEADER_REPLICAS_VERSION, 0, 1),
    (GROUP_VERSION, 0, 1),
    (KRAFT_VERSION, 0, 1),
    (
        METADATA_VERSION,
        metadata_version::MINIMUM,
        metadata_version::LATEST_PRODUCTION,
    ),
    (TRANSACTION_VERSION, 0, 2),
];

/// Kafka 4.4's production features Brook does not implement: level 0 is accepted (and
/// changes nothing), so `kafka-features downgrade --release-version` works; a higher level is
/// refused as by a Kafka controller that does not support the feature.
const NOT_IMPLEMENTED: [&str; 2] = ["share.version", "streams.version"];

/// The levels Brook supports for `name`; (0, 0) for a feature it does not (Kafka's
/// `QuorumFeatures.DISABLED`).
pub fn supported_range(name: &str) -> (i16, i16) {
    SUPPORTED
        .iter()
        .find(|(n, _, _)| *n == name)
        .map_or((0, 0), |(_, min, max)| (*min, *max))
}

/// The level `name` runs at under `image`: the quorum's, else the broker's default.
pub fn finalized(config: &BrokerConfig, image: &MetadataImage, name: &str) -> i16 {
    if let Some(level) = image.features.get(name) {
        return *level;
    }
    match name {
        METADATA_VERSION => metadata_version::LATEST_PRODUCTION,
        GROUP_VERSION => i16::from(config.group_consumer_protocol_enabled),
        TRANSACTION_VERSION => config.transaction_version,
        ELIGIBLE_LEADER_REPLICAS_VERSION => i16::from(brook_raft::elr_enabled(image)),
        _ => 0,
    }
}

/// Every supported feature's finalized level under `image` (Kafka's
/// `proposedUpdatedVersions` before the request's levels go over it).
pub fn all_finalized(config: &BrokerConfig, image: &MetadataImage) -> BTreeMap<String, i16> {
    SUPPORTED
        .iter()
        .map(|(name, _, _)| (name.to_string(), finalized(config, image, name)))
        .collect()
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

/// What the checking controller knows besides the feature's current level.
pub struct Checking<'a> {
    /// The node that checks, named in Kafka's messages ("Local controller N").
    pub controller: u64,
    /// Every feature's level as the whole request would leave it (Kafka's
    /// `proposedUpdatedVersions`), for the dependencies between features.
    pub proposed: &'a BTreeMap<String, i16>,
    /// Whether the metadata leader knows the directory id of every voter: a quorum moves to
    /// `kraft.version` 1 (its voters may change) only then (Kafka's
    /// `LeaderState.maybeAppendUpgradedKRaftVersion`).
    pub kraft_voters: VoterDirectoryIds,
}

/// What an accepted update leaves to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepted {
    /// The level goes to the quorum.
    Level,
    /// Nothing changes (an unimplemented feature kept at 0, `kraft.version` at its level).
    Nothing,
}

/// Kafka's `FeatureControlManager.updateFeature` checks, in its order, for moving `name`
/// from `current` to `level`. A refusal is INVALID_UPDATE_VERSION with Kafka's message.
pub fn check_update(
    name: &str,
    level: i16,
    upgrade: UpgradeType,
    current: i16,
    checking: &Checking<'_>,
) -> Result<Accepted, BrokerError> {
    let refuse = |why: String| Err(BrokerError::InvalidUpdateVersion(why));
    let invalid = |why: &str| {
        refuse(format!(
            "Invalid update version {level} for feature {name}. {why}"
        ))
    };
    if upgrade == UpgradeType::Unknown {
        return invalid("The controller does not support the given upgrade type.");
    }
    if level < 0 {
        return invalid("A feature version cannot be less than 0.");
    }
    let controller = checking.controller;
    match supported_range(name) {
        (min, max) if (min..=max).contains(&level) => {}
        (_, 0) => {
            return invalid(&format!(
                "Local controller {controller} does not support this feature."
            ))
        }
        (min, max) => {
            return invalid(&format!(
                "Local controller {controller} only supports versions {min}-{max}"
            ))
        }
    }
    if level < current && upgrade == UpgradeType::Upgrade {
        return invalid("Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.");
    }
    if level > current && upgrade != UpgradeType::Upgrade {
        return invalid("Can't downgrade to a newer version.");
    }
    match name {
        METADATA_VERSION => {
            let unsafe_downgrade = upgrade == UpgradeType::UnsafeDowngrade;
            metadata_version::check_update(current, level, unsafe_downgrade)
                .map(|()| Accepted::Level)
                .or_else(refuse)
        }
        KRAFT_VERSION => kraft_version_update(current, level, upgrade, checking),
        ELIGIBLE_LEADER_REPLICAS_VERSION | GROUP_VERSION | TRANSACTION_VERSION => {
            // Kafka's `Feature.validateVersion`: only eligible leader replicas depend on
            // another feature (metadata.version 4.0-IV1, where partition records carry ELRs).
            let metadata_level = checking
                .proposed
                .get(METADATA_VERSION)
                .copied()
                .unwrap_or(0);
            if name == ELIGIBLE_LEADER_REPLICAS_VERSION
                && level >= 1
                && metadata_level < IBP_4_0_IV1
            {
                return invalid(&format!("{name} could not be set to {level} because it depends on {METADATA_VERSION} level {IBP_4_0_IV1}"));
            }
            Ok(Accepted::Level)
        }
        _ if NOT_IMPLEMENTED.contains(&name) => Ok(Accepted::Nothing),
        _ => invalid(&format!("Feature {name} not found.")),
    }
}

/// `kraft.version`, which Kafka keeps in the raft log itself: an upgrade to 1 turns a static
/// quorum into a dynamic one, possible only when the leader knows every voter's directory id
/// (recorded for a quorum formatted dynamic and for the one-node default; published to the
/// leader by each voter of a `controller.quorum.voters` quorum, as Kafka's send
/// UpdateRaftVoter); it cannot go back down.
fn kraft_version_update(
    current: i16,
    level: i16,
    upgrade: UpgradeType,
    checking: &Checking<'_>,
) -> Result<Accepted, BrokerError> {
    if level == current {
        return Ok(Accepted::Nothing);
    }
    if upgrade != UpgradeType::Upgrade {
        return Err(BrokerError::InvalidUpdateVersion(format!(
            "Invalid update version {level} for feature {KRAFT_VERSION}. Can't downgrade the version of this feature."
        )));
    }
    match checking.kraft_voters {
        VoterDirectoryIds::Known => Ok(Accepted::Level),
        why => Err(BrokerError::InvalidUpdateVersion(kraft_version_refusal(
            level, why,
        ))),
    }
}

/// Kafka's refusal of a `kraft.version` upgrade while the leader does not know a voter's
/// directory id: a voter that never published it is a controller that "has not registered"
/// (`ClusterControlManager`, checked first); one that published it to this leader only in an
/// earlier term has not sent UpdateRaftVoter in this epoch
/// (`LeaderState.maybeAppendUpgradedKRaftVersion`).
pub fn kraft_version_refusal(level: i16, why: VoterDirectoryIds) -> String {
    match why {
        VoterDirectoryIds::Unregistered(id) => format!(
            "Invalid update version {level} for feature {KRAFT_VERSION}. controller {id} has not registered, and may not support this feature"
        ),
        _ => format!(
            "Invalid upgrade of {KRAFT_VERSION} to KRAFT_VERSION_{level} because not all of the voters support it"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proposed(metadata_level: i16) -> BTreeMap<String, i16> {
        BTreeMap::from([(METADATA_VERSION.to_owned(), metadata_level)])
    }

    fn check(
        name: &str,
        level: i16,
        upgrade: UpgradeType,
        current: i16,
    ) -> Result<Accepted, BrokerError> {
        let proposed = proposed(metadata_version::LATEST_PRODUCTION);
        let checking = Checking {
            controller: 1,
            proposed: &proposed,
            kraft_voters: VoterDirectoryIds::Known,
        };
        check_update(name, level, upgrade, current, &checking)
    }

    fn refusal(name: &str, level: i16, upgrade: UpgradeType, current: i16) -> String {
        check(name, level, upgrade, current)
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
            assert_eq!(
                check(TRANSACTION_VERSION, level, upgrade, current).ok(),
                Some(Accepted::Level)
            );
        }
    }

    #[test]
    fn metadata_version_moves_within_kafkas_levels_and_downgrades_as_kafka_allows() {
        use UpgradeType::*;
        assert_eq!(
            check(METADATA_VERSION, 33, Upgrade, 21).ok(),
            Some(Accepted::Level)
        );
        assert_eq!(
            check(METADATA_VERSION, 30, SafeDowngrade, 31).ok(),
            Some(Accepted::Level)
        );
        assert_eq!(
            refusal(METADATA_VERSION, 34, Upgrade, 33),
            "Invalid update version 34 for feature metadata.version. Local controller 1 only supports versions 7-33"
        );
        assert_eq!(
            refusal(METADATA_VERSION, 30, SafeDowngrade, 33),
            "Unsupported metadata.version downgrade from 33 to 30. Refusing to perform the requested downgrade because it might delete metadata information."
        );
        assert_eq!(
            refusal(METADATA_VERSION, 30, UnsafeDowngrade, 33),
            "Unsupported metadata.version downgrade from 33 to 30. Unsafe metadata downgrade is not supported in this version."
        );
        assert_eq!(
            refusal(METADATA_VERSION, 0, SafeDowngrade, 33),
            "Invalid update version 0 for feature metadata.version. Local controller 1 only supports versions 7-33"
        );
    }

    #[test]
    fn eligible_leader_replicas_need_the_metadata_version_the_request_leaves() {
        let checking = |metadata_level| {
            let proposed = proposed(metadata_level);
            let checking = Checking {
                controller: 1,
                proposed: &proposed,
                kraft_voters: VoterDirectoryIds::Known,
            };
            check_update(
                ELIGIBLE_LEADER_REPLICAS_VERSION,
                1,
                UpgradeType::Upgrade,
                0,
                &checking,
            )
            .map_err(|e| e.to_string())
        };
        assert_eq!(
            checking(metadata_version::IBP_3_9_IV0),
            Err("Invalid update version 1 for feature eligible.leader.replicas.version. eligible.leader.replicas.version could not be set to 1 because it depends on metadata.version level 23".into())
        );
        assert_eq!(checking(IBP_4_0_IV1), Ok(Accepted::Level));
        // Turning it off needs nothing.
        let proposed = proposed(metadata_version::IBP_3_9_IV0);
        let off = Checking {
            controller: 1,
            proposed: &proposed,
            kraft_voters: VoterDirectoryIds::Known,
        };
        assert!(check_update(
            ELIGIBLE_LEADER_REPLICAS_VERSION,
            0,
            UpgradeType::SafeDowngrade,
            1,
            &off
        )
        .is_ok());
    }

    #[test]
    fn kraft_version_goes_up_only_with_every_voters_directory_id_and_never_down() {
        use UpgradeType::*;
        assert_eq!(
            check(KRAFT_VERSION, 1, Upgrade, 0).ok(),
            Some(Accepted::Level)
        );
        assert_eq!(
            check(KRAFT_VERSION, 1, Upgrade, 1).ok(),
            Some(Accepted::Nothing)
        );
        assert_eq!(
            check(KRAFT_VERSION, 1, SafeDowngrade, 1).ok(),
            Some(Accepted::Nothing)
        );
        assert_eq!(
            refusal(KRAFT_VERSION, 0, SafeDowngrade, 1),
            "Invalid update version 0 for feature kraft.version. Can't downgrade the version of this feature."
        );
        assert_eq!(
            refusal(KRAFT_VERSION, 0, Upgrade, 1),
            "Invalid update version 0 for feature kraft.version. Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade."
        );
        let proposed = proposed(33);
        let refused_for = |kraft_voters| {
            let static_quorum = Checking {
                controller: 1,
                proposed: &proposed,
                kraft_voters,
            };
            check_update(KRAFT_VERSION, 1, Upgrade, 0, &static_quorum)
                .expect_err("refused")
                .to_string()
        };
        assert_eq!(
            refused_for(VoterDirectoryIds::Unregistered(3)),
            "Invalid update version 1 for feature kraft.version. controller 3 has not registered, and may not support this feature"
        );
        assert_eq!(
            refused_for(VoterDirectoryIds::NotThisTerm),
            "Invalid upgrade of kraft.version to KRAFT_VERSION_1 because not all of the voters support it"
        );
    }

    #[test]
    fn unimplemented_kafka_features_stay_at_0_and_unknown_ones_are_not_found() {
        use UpgradeType::*;
        assert_eq!(
            check("share.version", 0, SafeDowngrade, 0).ok(),
            Some(Accepted::Nothing)
        );
        assert_eq!(
            refusal("share.version", 2, Upgrade, 0),
            "Invalid update version 2 for feature share.version. Local controller 1 does not support this feature."
        );
        assert_eq!(
            refusal("foo.version", 0, SafeDowngrade, 0),
            "Invalid update version 0 for feature foo.version. Feature foo.version not found."
        );
    }

    #[test]
    fn a_level_in_the_quorum_overrides_the_brokers_default() {
        let config = BrokerConfig::load(None, Vec::new(), &[])
            .expect("defaults")
            .0;
        let mut image = MetadataImage::default();
        assert_eq!(finalized(&config, &image, METADATA_VERSION), 33);
        assert_eq!(finalized(&config, &image, KRAFT_VERSION), 0);
        assert_eq!(finalized(&config, &image, TRANSACTION_VERSION), 2);
        assert_eq!(finalized(&config, &image, GROUP_VERSION), 1);
        assert!(consumer_protocol_enabled(&config, &image));
        image.features.insert(GROUP_VERSION.into(), 0);
        image.features.insert(TRANSACTION_VERSION.into(), 1);
        assert_eq!(finalized(&config, &image, TRANSACTION_VERSION), 1);
        assert!(!consumer_protocol_enabled(&config, &image));
    }
}
