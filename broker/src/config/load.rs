//! Loading the static broker configuration: `server.properties`, `BROOK_*` environment
//! variables and `--override key=value` arguments, with the precedence
//! override > env > file > default.
//!
//! Unknown keys are not fatal (Kafka logs "The configuration 'x' was supplied but isn't
//! a known config"): each gives one warning, returned for the caller to log; so does a
//! Kafka key Brook accepts without acting on it (see [`super::support`]). An invalid
//! value is fatal and names the key and value. The only I/O is reading the file.

use std::collections::BTreeMap;
use std::path::Path;

use super::broker::{BrokerConfig, Layers};
use super::error::ConfigError;
use super::keys::broker_key;
use super::properties::parse_properties;
use super::value::normalize;

/// Environment variables for Brook config start with this; the rest, lower-cased with
/// `_` as `.`, is the key (`BROOK_LOG_DIRS` → `log.dirs`).
const ENV_PREFIX: &str = "BROOK_";
/// The prefix of Brook's own keys (`brook.log.open.files.max`, ...).
const BROOK_KEY_PREFIX: &str = "brook.";

/// Where a static value came from, for warnings.
#[derive(Clone, Copy)]
enum Origin {
    File,
    Env,
    Override,
}

impl BrokerConfig {
    /// Loads the static configuration. `env` is the process environment (pass
    /// `std::env::vars()`); `overrides` are the `--override` arguments in order (a later
    /// one wins). Returns the config and the warnings to log.
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
        overrides: &[String],
    ) -> Result<(BrokerConfig, Vec<String>), ConfigError> {
        let file_pairs = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
                    path: path.to_path_buf(),
                    source,
                })?;
                parse_properties(&text)
            }
            None => Vec::new(),
        };
        let mut env_pairs: Vec<(String, String)> = env
            .into_iter()
            .filter_map(|(name, value)| {
                let rest = name.strip_prefix(ENV_PREFIX)?;
                Some((rest.to_ascii_lowercase().replace('_', "."), value))
            })
            .collect();
        // Environment order is arbitrary; sort so that warnings are deterministic.
        env_pairs.sort();
        let override_pairs = overrides
            .iter()
            .map(|arg| {
                arg.split_once('=')
                    .map(|(k, v)| (k.trim().to_owned(), v.to_owned()))
                    .ok_or_else(|| ConfigError::BadOverride { arg: arg.clone() })
            })
            .collect::<Result<Vec<_>, _>>()?;

        let mut warnings = Vec::new();
        let mut static_props = BTreeMap::new();
        let sources = [
            (Origin::File, file_pairs),
            (Origin::Env, env_pairs),
            (Origin::Override, override_pairs),
        ];
        for (origin, pairs) in sources {
            for (key, value) in pairs {
                let Some(def) = broker_key(&key).or_else(|| listener_prefixed_key(&key)) else {
                    if super::authorizer::is_authorizer_key(&key) {
                        static_props.insert(key, value.trim().to_owned());
                        continue;
                    }
                    // Kafka's own names that Brook lacks are ignored with a warning, as
                    // Kafka ignores names it does not know; Brook's own namespace is
                    // Brook's, so a misspelt `brook.` key stops the node instead of
                    // silently leaving the default in force.
                    if key.starts_with(BROOK_KEY_PREFIX) {
                        return Err(ConfigError::UnknownBrokerKey { key });
                    }
                    warnings.push(unknown_key_warning(origin, &key));
                    continue;
                };
                let canonical = normalize(&key, def.config_type, def.validator, &value)?;
                if let Some(gap) = def.gap {
                    warnings.push(format!(
                        "the configuration '{key}' is a Kafka config Brook accepts but does not act on yet ({}); it is only stored and described",
                        gap.label()
                    ));
                }
                static_props.insert(key, canonical);
            }
        }
        // Kafka's populateSynonyms: broker.id follows node.id unless set (then must equal).
        if !static_props.contains_key("broker.id") {
            let node_id = static_props
                .get("node.id")
                .map(String::as_str)
                .or_else(|| broker_key("node.id").and_then(|k| k.default))
                .unwrap_or_default()
                .to_owned();
            static_props.insert("broker.id".to_owned(), node_id);
        }
        let layers = Layers {
            static_props,
            ..Layers::default()
        };
        Ok((BrokerConfig::build(layers)?, warnings))
    }
}

/// Kafka's per-listener keys (`ListenerName.configPrefix`): `listener.name.<listener>.<key>`
/// and, for SASL, `listener.name.<listener>.<mechanism>.<key>`; typed and validated as
/// their base key, and stored under the full name.
fn listener_prefixed_key(key: &str) -> Option<&'static super::keys::KeyDef> {
    let rest = key.strip_prefix("listener.name.")?;
    let (_listener, rest) = rest.split_once('.')?;
    broker_key(rest).or_else(|| {
        let (_mechanism, base) = rest.split_once('.')?;
        broker_key(base)
            .filter(|def| def.name.starts_with("sasl.") || def.name.starts_with("connections."))
    })
}

fn unknown_key_warning(origin: Origin, key: &str) -> String {
    match origin {
        Origin::File => {
            format!("the configuration '{key}' was supplied but isn't a known config; ignored")
        }
        Origin::Env => format!(
            "environment variable {ENV_PREFIX}{} does not name a known config ('{key}'); ignored",
            key.to_ascii_uppercase().replace('.', "_")
        ),
        Origin::Override => format!("--override '{key}' is not a known config; ignored"),
    }
}
