//! `metadata.version` (KIP-778): Kafka 4.4's production levels, their release names and which
//! of them changed the metadata records, with the rules that follow (Kafka's `MetadataVersion`
//! and `FeatureControlManager.updateMetadataVersion`). Pure.
//!
//! Brook has one metadata format, so the level changes nothing in how it writes the metadata
//! log: it is kept by the quorum as the cluster's finalized level because Kafka's tools and
//! the other features read it (`eligible.leader.replicas.version` 1 needs 4.0-IV1), and it
//! moves only as Kafka lets it: up freely, down only across levels that did not change the
//! metadata records (a downgrade past one "might delete metadata information").

/// Kafka 4.4's production metadata versions from 3.3-IV3 (level 7) to 4.4-IV2 (level 33), in
/// level order, each with whether it changed the metadata records (`didMetadataChange`).
const VERSIONS: [(&str, bool); 27] = [
    ("3.3-IV3", true),
    ("3.4-IV0", true),
    ("3.5-IV0", false),
    ("3.5-IV1", false),
    ("3.5-IV2", true),
    ("3.6-IV0", false),
    ("3.6-IV1", true),
    ("3.6-IV2", true),
    ("3.7-IV0", true),
    ("3.7-IV1", false),
    ("3.7-IV2", true),
    ("3.7-IV3", false),
    ("3.7-IV4", false),
    ("3.8-IV0", false),
    ("3.9-IV0", false),
    ("4.0-IV0", false),
    ("4.0-IV1", true),
    ("4.0-IV2", false),
    ("4.0-IV3", false),
    ("4.1-IV0", false),
    ("4.1-IV1", false),
    ("4.2-IV0", false),
    ("4.2-IV1", false),
    ("4.3-IV0", true),
    ("4.4-IV0", false),
    ("4.4-IV1", true),
    ("4.4-IV2", true),
];

pub const FEATURE_NAME: &str = "metadata.version";
/// 3.3-IV3, the first KRaft level Kafka 4.x accepts.
pub const MINIMUM: i16 = 7;
/// 4.4-IV2: Kafka 4.4's latest production level, what `format` gives a new cluster and what
/// a Brook cluster formatted before the level was kept runs at.
pub const LATEST_PRODUCTION: i16 = MINIMUM + VERSIONS.len() as i16 - 1;
/// 4.5-IV0, Kafka 4.4's unstable level: named only in the message for an unknown level.
const LATEST_TESTING: i16 = LATEST_PRODUCTION + 1;
pub const IBP_3_9_IV0: i16 = 21;
pub const IBP_4_0_IV0: i16 = 22;
pub const IBP_4_0_IV1: i16 = 23;
pub const IBP_4_0_IV2: i16 = 24;
pub const IBP_4_1_IV0: i16 = 26;

fn entry(level: i16) -> Option<(&'static str, bool)> {
    // `checked_sub`: a level comes from a client's request, i16::MIN included.
    level
        .checked_sub(MINIMUM)
        .and_then(|i| usize::try_from(i).ok())
        .and_then(|i| VERSIONS.get(i).copied())
}

/// The release name of `level` (`4.4-IV2`), as `kafka-features describe` prints it.
pub fn name(level: i16) -> Option<&'static str> {
    entry(level).map(|(name, _)| name)
}

/// The level named `release` exactly (`3.9-IV0`).
pub fn level_of(release: &str) -> Option<i16> {
    VERSIONS
        .iter()
        .position(|(name, _)| *name == release)
        .map(|i| MINIMUM + i as i16)
}

/// Every production release name, `3.3-IV3, …, 4.4-IV2` (Kafka's list in its messages).
pub fn names() -> String {
    VERSIONS
        .iter()
        .map(|(name, _)| *name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Kafka's `checkIfMetadataChanged`: whether some level in `(low, high]` changed the
/// metadata records, so that going from one to the other is not a pure relabelling.
fn metadata_changed_between(a: i16, b: i16) -> bool {
    let (low, high) = if a < b { (a, b) } else { (b, a) };
    (low + 1..=high).any(|level| entry(level).is_none_or(|(_, changed)| changed))
}

/// Kafka 4.4's checks of a metadata.version update from `current` to `level` (the range and
/// the upgrade type are checked before, as for every feature): `Err` is the message Kafka's
/// controller answers with INVALID_UPDATE_VERSION.
pub fn check_update(current: i16, level: i16, unsafe_downgrade: bool) -> Result<(), String> {
    if entry(level).is_none() {
        return Err(format!(
            "Invalid metadata.version {level}. Valid versions are from {MINIMUM} to {LATEST_TESTING}."
        ));
    }
    if level < current && metadata_changed_between(current, level) {
        let why = if unsafe_downgrade {
            "Unsafe metadata downgrade is not supported in this version."
        } else {
            "Refusing to perform the requested downgrade because it might delete metadata information."
        };
        return Err(format!(
            "Unsupported metadata.version downgrade from {current} to {level}. {why}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_names_are_kafka_44s() {
        assert_eq!(
            (
                MINIMUM,
                LATEST_PRODUCTION,
                name(MINIMUM),
                name(LATEST_PRODUCTION)
            ),
            (7, 33, Some("3.3-IV3"), Some("4.4-IV2"))
        );
        assert_eq!(level_of("3.9-IV0"), Some(IBP_3_9_IV0));
        assert_eq!(level_of("4.0-IV1"), Some(IBP_4_0_IV1));
        assert_eq!(level_of("4.1-IV0"), Some(IBP_4_1_IV0));
        assert_eq!((name(6), name(34), level_of("4.5-IV0")), (None, None, None));
        assert_eq!((name(i16::MIN), name(i16::MAX)), (None, None));
        assert!(check_update(LATEST_PRODUCTION, i16::MIN, false).is_err());
    }

    #[test]
    fn upgrades_pass_and_downgrades_only_across_levels_that_changed_nothing() {
        assert_eq!(check_update(21, 33, false), Ok(()));
        // 4.4-IV0 (31) changed nothing since 4.3-IV0 (30); 3.9-IV0 back to 3.7-IV3 neither.
        assert_eq!(check_update(31, 30, false), Ok(()));
        assert_eq!(check_update(21, 18, false), Ok(()));
        assert_eq!(
            check_update(33, 30, false),
            Err("Unsupported metadata.version downgrade from 33 to 30. Refusing to perform the requested downgrade because it might delete metadata information.".into())
        );
        assert_eq!(
            check_update(25, 21, true),
            Err("Unsupported metadata.version downgrade from 25 to 21. Unsafe metadata downgrade is not supported in this version.".into())
        );
        // 3.7-IV2 (17) changed the records: 3.9-IV0 may not go below it.
        assert!(check_update(21, 16, false).is_err());
        assert_eq!(
            check_update(33, 99, false),
            Err("Invalid metadata.version 99. Valid versions are from 7 to 34.".into())
        );
    }
}
