//! The authorizer settings: `authorizer.class.name` turns ACLs on when it names Kafka's
//! `StandardAuthorizer` (any other class is refused at start, naming the key: Brook cannot
//! load Java classes and would otherwise run without the checks asked for); `super.users`
//! (`User:a;User:b`) and `allow.everyone.if.no.acl.found` are that authorizer's own keys,
//! which Kafka reads from the broker's properties without listing them among its configs
//! (so Brook keeps them in the static layer without describing them). Pure.

use super::broker::Layers;
use super::error::ConfigError;

/// Kafka's KRaft authorizer, the one `authorizer.class.name` Brook serves.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

/// `StandardAuthorizer.SUPER_USERS_CONFIG`.
pub const SUPER_USERS: &str = "super.users";
/// `StandardAuthorizer.ALLOW_EVERYONE_IF_NO_ACL_IS_FOUND_CONFIG`.
pub const ALLOW_EVERYONE_IF_NO_ACL_FOUND: &str = "allow.everyone.if.no.acl.found";

/// The authorizer's own keys: not broker configs, kept as given for the authorizer.
pub fn is_authorizer_key(key: &str) -> bool {
    key == SUPER_USERS || key == ALLOW_EVERYONE_IF_NO_ACL_FOUND
}

/// The configured authorizer's settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthorizerSettings {
    /// `(principal type, name)` pairs, e.g. `("User", "admin")`.
    pub super_users: Vec<(String, String)>,
    pub allow_everyone_if_no_acl_found: bool,
}

/// `None` when no authorizer is configured (`authorizer.class.name` empty).
pub(crate) fn resolve(layers: &Layers) -> Result<Option<AuthorizerSettings>, ConfigError> {
    let class = layers
        .effective("authorizer.class.name")
        .unwrap_or("")
        .trim();
    if class.is_empty() {
        return Ok(None);
    }
    if class != STANDARD_AUTHORIZER {
        return Err(ConfigError::Unsupported {
            key: "authorizer.class.name".to_owned(),
            reason: format!(
                "authorizer.class.name={class}: Brook serves only Kafka's {STANDARD_AUTHORIZER} (it cannot load other classes): refusing to start rather than run without the checks that class would make"
            ),
        });
    }
    let super_users =
        parse_super_users(layers.effective(SUPER_USERS).unwrap_or("")).map_err(|reason| {
            ConfigError::invalid(
                SUPER_USERS,
                layers.effective(SUPER_USERS).unwrap_or(""),
                reason,
            )
        })?;
    let allow = layers
        .effective(ALLOW_EVERYONE_IF_NO_ACL_FOUND)
        .unwrap_or("false")
        .trim();
    // Kafka reads it with Boolean.parseBoolean: anything but "true" (any case) is false.
    let allow_everyone_if_no_acl_found = allow.eq_ignore_ascii_case("true");
    Ok(Some(AuthorizerSettings {
        super_users,
        allow_everyone_if_no_acl_found,
    }))
}

/// `User:a;User:b` (Kafka splits on `;` and trims; each is `Type:name`).
fn parse_super_users(value: &str) -> Result<Vec<(String, String)>, String> {
    value
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| match s.split_once(':') {
            Some((kind, name)) if !kind.is_empty() => Ok((kind.to_owned(), name.to_owned())),
            _ => Err(format!(
                "expected a principal Type:name, as in User:admin, got {s:?}"
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layers(pairs: &[(&str, &str)]) -> Layers {
        Layers::from_static(pairs)
    }

    #[test]
    fn the_standard_authorizer_is_served_with_its_super_users() {
        let settings = resolve(&layers(&[
            ("authorizer.class.name", STANDARD_AUTHORIZER),
            ("super.users", "User:admin; User:CN=broker,O=x"),
            ("allow.everyone.if.no.acl.found", "TRUE"),
        ]))
        .expect("valid")
        .expect("configured");
        assert_eq!(
            settings.super_users,
            vec![
                ("User".to_owned(), "admin".to_owned()),
                ("User".to_owned(), "CN=broker,O=x".to_owned())
            ]
        );
        assert!(settings.allow_everyone_if_no_acl_found);
    }

    #[test]
    fn no_class_means_no_authorizer_and_other_classes_are_refused() {
        assert_eq!(resolve(&layers(&[])).expect("valid"), None);
        let refused = resolve(&layers(&[(
            "authorizer.class.name",
            "kafka.security.authorizer.AclAuthorizer",
        )]));
        assert!(
            matches!(refused, Err(ConfigError::Unsupported { ref key, .. }) if key == "authorizer.class.name")
        );
        let bad = resolve(&layers(&[
            ("authorizer.class.name", STANDARD_AUTHORIZER),
            ("super.users", "admin"),
        ]));
        assert!(bad.is_err());
    }
}
