//! `brook format --release-version` / `--feature name=level`: the initial feature levels, as
//! Kafka's `kafka-storage format` (`StorageTool`, `Formatter`) derives them, with its
//! messages. Pure.
//!
//! `--release-version` names a `metadata.version` (3.3-IV3 … 4.4-IV2, Kafka 4.4's list);
//! the features a release finalizes by default follow from it as in Kafka 4.4
//! (`group.version` 1 from 4.0-IV0, `transaction.version` 2 from 4.0-IV2,
//! `eligible.leader.replicas.version` 1 from 4.1-IV0); `--feature` overrides one (the last one
//! given wins, as in Kafka). Brook keeps the levels of the features it implements
//! (`metadata.version`, `eligible.leader.replicas.version`, `group.version`,
//! `transaction.version`, and `kraft.version`, which `mod.rs` derives from the quorum flags).
//! Kafka's other features (`share.version`, …) are refused by name as unsupported, rather
//! than formatted and then not honoured.

use std::collections::BTreeMap;

use crate::metadata::features::{
    ELIGIBLE_LEADER_REPLICAS_VERSION, GROUP_VERSION, KRAFT_VERSION, METADATA_VERSION,
    TRANSACTION_VERSION,
};
use crate::metadata::metadata_version::{
    self, IBP_3_9_IV0, IBP_4_0_IV0, IBP_4_0_IV1, IBP_4_0_IV2, IBP_4_1_IV0, LATEST_PRODUCTION,
    MINIMUM,
};

/// The features `--feature` accepts, in Kafka's sorted order, with their highest level.
const FORMAT_FEATURES: [(&str, i16); 4] = [
    (ELIGIBLE_LEADER_REPLICAS_VERSION, 1),
    (GROUP_VERSION, 1),
    (KRAFT_VERSION, 1),
    (TRANSACTION_VERSION, 2),
];

/// What `--release-version` and `--feature` settle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Features {
    pub metadata_level: i16,
    /// Explicit `--feature` levels and release defaults, `metadata.version` excluded (it is
    /// `metadata_level`).
    pub levels: BTreeMap<String, i16>,
    /// Whether `--feature kraft.version=N` was given (checked against the quorum flags).
    pub kraft_version_given: Option<i16>,
}

impl Features {
    /// The release's name, e.g. `4.4-IV2`.
    pub fn release(&self) -> &'static str {
        metadata_version::name(self.metadata_level).unwrap_or("4.4-IV2")
    }

    /// Whether the release lets a quorum change its voters (KIP-853 came with 3.9-IV0).
    pub fn supports_kraft_version_1(&self) -> bool {
        self.metadata_level >= IBP_3_9_IV0
    }
}

/// Parses the flags; `Err` is Kafka's message.
pub fn parse(release: Option<&str>, features: &[String]) -> Result<Features, String> {
    let mut explicit = BTreeMap::new();
    for argument in features {
        let (name, level) = name_and_level(argument)?;
        explicit.insert(name, level);
    }
    let metadata_level = match (release, explicit.remove(METADATA_VERSION)) {
        (Some(_), Some(_)) => {
            return Err(
                "Use --release-version instead of --feature metadata.version=X to avoid ambiguity."
                    .into(),
            )
        }
        (Some(name), None) => metadata_level(name)?,
        (None, Some(level)) => {
            if metadata_version::name(level).is_none() {
                return Err(format!("No MetadataVersion with feature level {level}. Valid feature levels are from {MINIMUM} to {LATEST_PRODUCTION}."));
            }
            level
        }
        (None, None) => LATEST_PRODUCTION,
    };
    for (name, level) in &explicit {
        let Some((_, max)) = FORMAT_FEATURES.iter().find(|(n, _)| n == name) else {
            let names: Vec<&str> = FORMAT_FEATURES.iter().map(|(n, _)| *n).collect();
            return Err(format!(
                "Unsupported feature: {name}. Supported features are: {}",
                names.join(", ")
            ));
        };
        if !(0..=*max).contains(level) {
            return Err(format!("No feature:{name} with feature level {level}"));
        }
    }
    // Kafka's feature dependency: eligible leader replicas need metadata.version 4.0-IV1.
    if let Some(level) = explicit.get(ELIGIBLE_LEADER_REPLICAS_VERSION) {
        if *level >= 1 && metadata_level < IBP_4_0_IV1 {
            return Err(format!(
                "{ELIGIBLE_LEADER_REPLICAS_VERSION} could not be set to {level} because it depends on metadata.version level {IBP_4_0_IV1}"
            ));
        }
    }
    let kraft_version_given = explicit.remove(KRAFT_VERSION);
    let mut levels = BTreeMap::from([
        (
            ELIGIBLE_LEADER_REPLICAS_VERSION.to_owned(),
            i16::from(metadata_level >= IBP_4_1_IV0),
        ),
        (
            GROUP_VERSION.to_owned(),
            i16::from(metadata_level >= IBP_4_0_IV0),
        ),
        (
            TRANSACTION_VERSION.to_owned(),
            if metadata_level >= IBP_4_0_IV2 { 2 } else { 0 },
        ),
    ]);
    levels.extend(explicit);
    Ok(Features {
        metadata_level,
        levels,
        kraft_version_given,
    })
}

fn metadata_level(name: &str) -> Result<i16, String> {
    metadata_version::level_of(name).ok_or_else(|| {
        format!(
            "Unknown metadata.version '{name}'. Supported metadata.version are: {}",
            metadata_version::names()
        )
    })
}

/// Kafka's `StorageTool.parseNameAndLevel`.
fn name_and_level(argument: &str) -> Result<(String, i16), String> {
    let Some((name, level)) = argument.split_once('=') else {
        return Err(format!(
            "Can't parse feature=level string {argument}: equals sign not found."
        ));
    };
    let level = level.trim().parse::<i16>().map_err(|_| {
        format!(
            "Can't parse feature=level string {argument}: unable to parse {} as a short.",
            level.trim()
        )
    })?;
    Ok((name.trim().to_owned(), level))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn features(release: Option<&str>, args: &[&str]) -> Result<Features, String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        parse(release, &args)
    }

    #[test]
    fn a_release_sets_kafkas_default_levels_and_a_feature_overrides_one() {
        let latest = features(None, &[]).expect("default");
        assert_eq!(latest.release(), "4.4-IV2");
        assert_eq!(latest.levels[GROUP_VERSION], 1);
        assert_eq!(latest.levels[TRANSACTION_VERSION], 2);
        assert_eq!(latest.levels[ELIGIBLE_LEADER_REPLICAS_VERSION], 1);
        let elr = |release| {
            features(Some(release), &[]).expect("release").levels[ELIGIBLE_LEADER_REPLICAS_VERSION]
        };
        assert_eq!((elr("4.0-IV3"), elr("4.1-IV0")), (0, 1));
        let old = features(Some("3.9-IV0"), &[]).expect("3.9");
        assert_eq!((old.metadata_level, old.release()), (21, "3.9-IV0"));
        assert_eq!(old.levels[GROUP_VERSION], 0);
        assert_eq!(old.levels[TRANSACTION_VERSION], 0);
        assert!(old.supports_kraft_version_1());
        assert!(!features(Some("3.8-IV0"), &[])
            .expect("3.8")
            .supports_kraft_version_1());
        let mid = features(Some("4.0-IV1"), &[]).expect("4.0-IV1");
        assert_eq!(
            (mid.levels[GROUP_VERSION], mid.levels[TRANSACTION_VERSION]),
            (1, 0)
        );
        let set = features(
            None,
            &[
                "transaction.version=2",
                "transaction.version=1",
                "kraft.version=1",
            ],
        )
        .expect("set");
        assert_eq!(set.levels[TRANSACTION_VERSION], 1);
        assert_eq!(set.kraft_version_given, Some(1));
        assert_eq!(
            features(None, &["metadata.version=20"])
                .expect("mv")
                .release(),
            "3.8-IV0"
        );
    }

    #[test]
    fn bad_flags_get_kafkas_messages() {
        let err = |release, args: &[&str]| features(release, args).expect_err("refused");
        assert_eq!(
            err(Some("4.0-IV0"), &["metadata.version=20"]),
            "Use --release-version instead of --feature metadata.version=X to avoid ambiguity."
        );
        assert!(err(Some("9.9-IV0"), &[]).starts_with(
            "Unknown metadata.version '9.9-IV0'. Supported metadata.version are: 3.3-IV3, 3.4-IV0,"
        ));
        assert_eq!(
            err(None, &["metadata.version=99"]),
            "No MetadataVersion with feature level 99. Valid feature levels are from 7 to 33."
        );
        assert_eq!(
            err(None, &["foo=1"]),
            "Unsupported feature: foo. Supported features are: eligible.leader.replicas.version, group.version, kraft.version, transaction.version"
        );
        assert_eq!(
            err(Some("3.9-IV0"), &["eligible.leader.replicas.version=1"]),
            "eligible.leader.replicas.version could not be set to 1 because it depends on metadata.version level 23"
        );
        assert_eq!(
            err(None, &["transaction.version=3"]),
            "No feature:transaction.version with feature level 3"
        );
        assert_eq!(
            err(None, &["kraft.version=-1"]),
            "No feature:kraft.version with feature level -1"
        );
        assert_eq!(
            err(None, &["transaction.version"]),
            "Can't parse feature=level string transaction.version: equals sign not found."
        );
        assert_eq!(
            err(None, &["transaction.version=99999999"]),
            "Can't parse feature=level string transaction.version=99999999: unable to parse 99999999 as a short."
        );
    }
}
