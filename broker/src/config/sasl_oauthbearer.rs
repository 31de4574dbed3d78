//! How a SASL listener checks OAUTHBEARER tokens, from Kafka's keys.
//!
//! `listener.name.<l>.oauthbearer.sasl.server.callback.handler.class` (only so prefixed, as
//! in Kafka) chooses:
//! unset (or Kafka's `OAuthBearerUnsecuredValidatorCallbackHandler`) is the unsecured
//! validator of KIP-255, whose options are the `unsecuredValidator*` options of the
//! listener's `…oauthbearer.sasl.jaas.config`; `OAuthBearerValidatorCallbackHandler` is
//! KIP-768's signed-JWT validator, configured by `sasl.oauthbearer.jwks.endpoint.url`,
//! `.expected.audience`, `.expected.issuer`, `.sub.claim.name`, `.scope.claim.name` and
//! `.clock.skew.seconds`, each looked up as Kafka's `ConfigurationUtils` does:
//! `listener.name.<l>.oauthbearer.<key>`, then `listener.name.<l>.<key>`, then `<key>`.
//! Any other handler class (a Java plugin) stops the node naming the key.
//!
//! Brook deviations, each stopping the node with the key named rather than running with
//! less checking than asked for: the JWKS is read once at start from a `file:` URL (an
//! http(s) endpoint is refused: fetch the provider's JWKS into a file); the signed validator
//! without a JWKS URL is refused (Kafka 4.x would then check claims but no signature); a
//! negative clock skew is refused. Pure but for reading the JWKS file.

use super::broker::Layers;
use super::error::ConfigError;
use super::jaas::JaasEntry;
use super::value::split_list;
use crate::auth::sasl::oauthbearer::OAuthBearerValidator;
use crate::auth::sasl::oauthbearer_jwks::JwkSet;
use crate::auth::sasl::oauthbearer_signed::SignedValidator;
use crate::auth::sasl::oauthbearer_unsecured::UnsecuredValidator;

const CALLBACK_HANDLER: &str = "sasl.server.callback.handler.class";
const UNSECURED_HANDLER: &str = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler";
const SIGNED_HANDLERS: &[&str] = &[
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    // Its name before Kafka 3.4 (KIP-768's first home), still in older configurations.
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
];
pub const JWKS_ENDPOINT_URL: &str = "sasl.oauthbearer.jwks.endpoint.url";
const EXPECTED_AUDIENCE: &str = "sasl.oauthbearer.expected.audience";
const EXPECTED_ISSUER: &str = "sasl.oauthbearer.expected.issuer";
const SUB_CLAIM_NAME: &str = "sasl.oauthbearer.sub.claim.name";
const SCOPE_CLAIM_NAME: &str = "sasl.oauthbearer.scope.claim.name";
const CLOCK_SKEW_SECONDS: &str = "sasl.oauthbearer.clock.skew.seconds";

/// The OAUTHBEARER validator of the listener whose keys start with `prefix`
/// (`listener.name.<l>.`); `jaas_key` and `jaas` are its OAUTHBEARER JAAS entry.
pub(crate) fn resolve_oauthbearer(
    prefix: &str,
    jaas_key: &str,
    jaas: &JaasEntry,
    layers: &Layers,
) -> Result<OAuthBearerValidator, ConfigError> {
    let setting = |key: &str| -> Option<(String, String)> {
        [
            format!("{prefix}oauthbearer.{key}"),
            format!("{prefix}{key}"),
            key.to_owned(),
        ]
        .into_iter()
        .find_map(|full| {
            let value = layers.effective(&full)?.trim().to_owned();
            Some((full, value))
        })
    };
    // Kafka reads a server callback handler only with its listener and mechanism prefix.
    let handler_key = format!("{prefix}oauthbearer.{CALLBACK_HANDLER}");
    let handler = layers
        .effective(&handler_key)
        .map(|class| (handler_key.clone(), class.trim().to_owned()))
        .filter(|(_, class)| !class.is_empty());
    match handler {
        None => unsecured(jaas_key, jaas),
        Some((_, class)) if class == UNSECURED_HANDLER => unsecured(jaas_key, jaas),
        Some((_, class)) if SIGNED_HANDLERS.contains(&class.as_str()) => {
            signed(&setting).map(OAuthBearerValidator::Signed)
        }
        Some((key, class)) => Err(ConfigError::Unsupported {
            key: key.clone(),
            reason: format!(
                "{key}={class}: a Java class Brook cannot load; Brook checks OAUTHBEARER tokens with Kafka's unsecured validator (no {CALLBACK_HANDLER}) or {} (signed JWTs)",
                SIGNED_HANDLERS[0]
            ),
        }),
    }
}

fn unsecured(jaas_key: &str, jaas: &JaasEntry) -> Result<OAuthBearerValidator, ConfigError> {
    UnsecuredValidator::from_jaas_options(&jaas.options)
        .map(OAuthBearerValidator::Unsecured)
        .map_err(|reason| ConfigError::invalid(jaas_key, "[hidden]", reason))
}

fn signed(
    setting: &dyn Fn(&str) -> Option<(String, String)>,
) -> Result<SignedValidator, ConfigError> {
    let Some((url_key, url)) = setting(JWKS_ENDPOINT_URL).filter(|(_, url)| !url.is_empty()) else {
        return Err(ConfigError::Unsupported {
            key: JWKS_ENDPOINT_URL.to_owned(),
            reason: format!(
                "{} needs {JWKS_ENDPOINT_URL} (listener.name.<listener>.oauthbearer.{JWKS_ENDPOINT_URL}): the JSON Web Key Set that verifies token signatures; Brook does not accept tokens it cannot verify",
                SIGNED_HANDLERS[0]
            ),
        });
    };
    let path = jwks_file_path(&url).map_err(|reason| ConfigError::Unsupported {
        key: url_key.clone(),
        reason: format!("{url_key}={url}: {reason}"),
    })?;
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::invalid(&url_key, &url, format!("cannot read {path}: {e}")))?;
    let keys =
        JwkSet::parse(&text).map_err(|reason| ConfigError::invalid(&url_key, &url, reason))?;

    let claim_name = |key: &str, default: &str| {
        setting(key)
            .map(|(_, v)| v)
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| default.to_owned())
    };
    let clock_skew_seconds = match setting(CLOCK_SKEW_SECONDS) {
        None => 30,
        Some((key, text)) => match text.parse::<i32>() {
            Ok(seconds) if seconds >= 0 => i64::from(seconds),
            _ => {
                return Err(ConfigError::invalid(
                    &key,
                    &text,
                    "must be a non-negative number of seconds",
                ))
            }
        },
    };
    Ok(SignedValidator {
        keys,
        expected_audience: setting(EXPECTED_AUDIENCE)
            .map(|(_, list)| split_list(&list))
            .unwrap_or_default(),
        expected_issuer: setting(EXPECTED_ISSUER)
            .map(|(_, v)| v)
            .filter(|v| !v.is_empty()),
        sub_claim: claim_name(SUB_CLAIM_NAME, "sub"),
        scope_claim: claim_name(SCOPE_CLAIM_NAME, "scope"),
        clock_skew_seconds,
    })
}

/// The local path of a `file:` URL (`file:/p`, `file:///p`, `file://localhost/p`).
fn jwks_file_path(url: &str) -> Result<&str, String> {
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return Err("Brook reads the JSON Web Key Set from a file: URL only (read once at start); save the provider's JWKS to a file (for example with curl) and name it as file:/path/to/jwks.json".to_owned());
    }
    let Some(rest) = url.strip_prefix("file:") else {
        return Err("not a file: URL".to_owned());
    };
    let path = match rest.strip_prefix("//") {
        Some(authority_and_path) => {
            let (host, path) = authority_and_path.split_at(
                authority_and_path
                    .find('/')
                    .unwrap_or(authority_and_path.len()),
            );
            if !host.is_empty() && host != "localhost" {
                return Err(format!(
                    "a file: URL on another host ({host}) cannot be read"
                ));
            }
            path
        }
        None => rest,
    };
    if path.is_empty() {
        return Err("the file: URL names no file".to_owned());
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::jaas::parse_jaas;

    const PREFIX: &str = "listener.name.sasl_plaintext.";
    const JAAS_KEY: &str = "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config";
    const VALIDATOR: &str =
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler";

    fn resolve(jaas: &str, pairs: &[(&str, &str)]) -> Result<OAuthBearerValidator, ConfigError> {
        let entry = parse_jaas(jaas).expect("valid JAAS");
        resolve_oauthbearer(PREFIX, JAAS_KEY, &entry, &Layers::from_static(pairs))
    }

    const LOGIN: &str =
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required";

    #[test]
    fn without_a_handler_class_the_unsecured_validator_takes_the_jaas_options() {
        let validator = resolve(
            &format!(r#"{LOGIN} unsecuredLoginStringClaim_sub="admin" unsecuredValidatorRequiredScope="read write" unsecuredValidatorAllowableClockSkewMs="500" unsecuredValidatorPrincipalClaimName="upn";"#),
            &[],
        )
        .expect("valid");
        let OAuthBearerValidator::Unsecured(v) = validator else {
            panic!("unsecured expected")
        };
        assert_eq!(v.required_scope, vec!["read", "write"]);
        assert_eq!(v.allowable_clock_skew_ms, 500);
        assert_eq!(v.principal_claim, "upn");
        assert_eq!(v.scope_claim, "scope");
        let err = resolve(
            &format!(r#"{LOGIN} unsecuredValidatorAllowableClockSkewMs="-1";"#),
            &[],
        )
        .expect_err("negative");
        assert!(err.to_string().contains(JAAS_KEY), "{err}");
        let err = resolve(
            &format!(r#"{LOGIN} unsecuredValidatorRequiredScope="a\"b";"#),
            &[],
        )
        .expect_err("bad scope");
        assert!(err.to_string().contains("Invalid scope value"), "{err}");
    }

    #[test]
    fn the_signed_validator_reads_a_jwks_file_and_the_prefixed_keys() {
        let dir = tempfile::tempdir().expect("tempdir");
        let jwks = dir.path().join("jwks.json");
        std::fs::write(
            &jwks,
            r#"{"keys":[{"kty":"RSA","kid":"k1","use":"sig","n":"AQAB","e":"AQAB"},{"kty":"oct","k":"c2VjcmV0"}]}"#,
        )
        .expect("write");
        let url = format!("file:{}", jwks.display());
        let handler = format!("{PREFIX}oauthbearer.{CALLBACK_HANDLER}");
        let validator = resolve(
            &format!("{LOGIN};"),
            &[
                (&handler, VALIDATOR),
                (
                    "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url",
                    &url,
                ),
                (
                    "listener.name.sasl_plaintext.sasl.oauthbearer.expected.audience",
                    "kafka, brook",
                ),
                ("sasl.oauthbearer.expected.issuer", "https://issuer"),
                ("sasl.oauthbearer.clock.skew.seconds", "5"),
            ],
        )
        .expect("valid");
        let OAuthBearerValidator::Signed(v) = validator else {
            panic!("signed expected")
        };
        assert_eq!(v.keys.keys.len(), 1);
        assert_eq!(v.expected_audience, vec!["kafka", "brook"]);
        assert_eq!(v.expected_issuer.as_deref(), Some("https://issuer"));
        assert_eq!(v.clock_skew_seconds, 5);
        assert_eq!(
            (v.sub_claim.as_str(), v.scope_claim.as_str()),
            ("sub", "scope")
        );
        assert_eq!(jwks_file_path("file:///a/b.json"), Ok("/a/b.json"));
        assert_eq!(jwks_file_path("file://localhost/a"), Ok("/a"));
    }

    #[test]
    fn what_brook_cannot_check_stops_the_node_naming_the_key() {
        let handler = format!("{PREFIX}oauthbearer.{CALLBACK_HANDLER}");
        let jaas = format!("{LOGIN};");
        let err = resolve(&jaas, &[(&handler, VALIDATOR)]).expect_err("no JWKS");
        assert!(err.to_string().contains(JWKS_ENDPOINT_URL), "{err}");
        let err = resolve(
            &jaas,
            &[
                (&handler, VALIDATOR),
                (JWKS_ENDPOINT_URL, "https://idp/keys"),
            ],
        )
        .expect_err("http");
        assert!(err.to_string().contains("file: URL only"), "{err}");
        let err = resolve(
            &jaas,
            &[
                (&handler, VALIDATOR),
                (JWKS_ENDPOINT_URL, "file:/nonexistent/jwks.json"),
            ],
        )
        .expect_err("missing file");
        assert!(err.to_string().contains("cannot read"), "{err}");
        let err = resolve(&jaas, &[(&handler, "com.example.MyHandler")]).expect_err("plugin");
        assert!(err.to_string().contains(&handler), "{err}");
    }
}
