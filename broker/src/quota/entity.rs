//! Quota entities and keys as Kafka names and checks them (`ClientQuotaEntity`,
//! `QuotaConfig`, the controller's `ClientQuotaControlManager`): which entity types may be
//! combined, which keys each combination takes, and the value rules, with Kafka's
//! INVALID_REQUEST messages (checked against the 4.4 jars). Pure: no I/O, no state.

use brook_raft::QuotaEntity;

pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
pub const IP: &str = "ip";

pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
pub const CONNECTION_CREATION_RATE: &str = "connection_creation_rate";

/// A quota key's `ConfigDef` type, which bounds its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyType {
    Long,
    Int,
    Double,
}

/// `QuotaConfig.userAndClientQuotaConfigs()`.
const USER_AND_CLIENT_KEYS: &[(&str, KeyType)] = &[
    (PRODUCER_BYTE_RATE, KeyType::Long),
    (CONSUMER_BYTE_RATE, KeyType::Long),
    (REQUEST_PERCENTAGE, KeyType::Double),
    (CONTROLLER_MUTATION_RATE, KeyType::Double),
];

/// `QuotaConfig.ipConfigs()`.
const IP_KEYS: &[(&str, KeyType)] = &[(CONNECTION_CREATION_RATE, KeyType::Int)];

/// Builds an entity from (type, name) pairs as a request carries them: the checks of
/// `ClientQuotaControlManager.validateEntity` and `configKeysForEntityType`.
pub fn validate_entity(
    pairs: impl IntoIterator<Item = (String, Option<String>)>,
) -> Result<QuotaEntity, String> {
    let mut entity = QuotaEntity::new();
    for (entity_type, name) in pairs {
        if entity.contains_key(&entity_type) {
            return Err(format!(
                "Invalid client quota entity, duplicate entity entry {entity_type}"
            ));
        }
        if ![USER, CLIENT_ID, IP].contains(&entity_type.as_str()) {
            return Err(format!("Unhandled client quota entity type: {entity_type}"));
        }
        if name.as_deref() == Some("") {
            return Err(format!("Empty {entity_type} not supported"));
        }
        entity.insert(entity_type, name);
    }
    if entity.is_empty() {
        return Err("Invalid empty client quota entity".to_owned());
    }
    keys_for(&entity).map(|_| entity)
}

/// The keys an entity takes (`configKeysForEntityType`).
fn keys_for(entity: &QuotaEntity) -> Result<&'static [(&'static str, KeyType)], String> {
    match entity.get(IP) {
        Some(_) if entity.len() > 1 => Err(
            // Kafka's message lacks the space between "should" and "not".
            "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"
                .to_owned(),
        ),
        Some(Some(ip)) if ip.parse::<std::net::IpAddr>().is_err() => {
            Err(format!("{ip} is not a valid IP or resolvable host."))
        }
        Some(_) => Ok(IP_KEYS),
        None => Ok(USER_AND_CLIENT_KEYS),
    }
}

/// Checks one key and value for a validated entity (`validateQuotaKeyValue`).
pub fn validate_value(entity: &QuotaEntity, key: &str, value: f64) -> Result<(), String> {
    let keys = keys_for(entity)?;
    let Some((_, key_type)) = keys.iter().find(|(k, _)| *k == key) else {
        return Err(format!("Invalid configuration key {key}"));
    };
    if !value.is_finite() {
        return Err(format!("Quota {key} must be a finite number"));
    }
    if value <= 0.0 {
        return Err(format!("Quota {key} must be greater than 0"));
    }
    let too_large = match key_type {
        KeyType::Double => return Ok(()),
        KeyType::Int => (value > f64::from(i32::MAX)).then_some("an INT"),
        // i64::MAX is not exact in f64; Kafka compares against the same rounded value.
        #[allow(clippy::cast_precision_loss)]
        KeyType::Long => (value > i64::MAX as f64).then_some("a LONG"),
    };
    if let Some(kind) = too_large {
        return Err(format!("Proposed value for {key} is too large for {kind}."));
    }
    if (value % 1.0).abs() > 1e-6 {
        return Err(format!("{key} cannot be a fractional value."));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
        p.iter()
            .map(|(t, n)| ((*t).to_owned(), n.map(str::to_owned)))
            .collect()
    }

    #[test]
    fn entities_are_checked_with_kafkas_messages() {
        assert!(validate_entity(pairs(&[(USER, Some("alice")), (CLIENT_ID, None)])).is_ok());
        assert_eq!(
            validate_entity(pairs(&[])),
            Err("Invalid empty client quota entity".into())
        );
        assert_eq!(
            validate_entity(pairs(&[("group", Some("g"))])),
            Err("Unhandled client quota entity type: group".into())
        );
        assert_eq!(
            validate_entity(pairs(&[(USER, Some(""))])),
            Err("Empty user not supported".into())
        );
        assert_eq!(
            validate_entity(pairs(&[(USER, Some("a")), (USER, Some("b"))])),
            Err("Invalid client quota entity, duplicate entity entry user".into())
        );
        assert!(
            validate_entity(pairs(&[(IP, Some("10.0.0.1")), (USER, None)]))
                .is_err_and(|e| e.starts_with("Invalid quota entity combination"))
        );
        assert_eq!(
            validate_entity(pairs(&[(IP, Some("nonsense"))])),
            Err("nonsense is not a valid IP or resolvable host.".into())
        );
        assert!(validate_entity(pairs(&[(IP, None)])).is_ok());
    }

    #[test]
    fn values_are_checked_by_their_keys_type() {
        let user = validate_entity(pairs(&[(USER, Some("alice"))])).expect("valid");
        let ip = validate_entity(pairs(&[(IP, None)])).expect("valid");
        assert_eq!(validate_value(&user, PRODUCER_BYTE_RATE, 1048576.0), Ok(()));
        assert_eq!(validate_value(&user, REQUEST_PERCENTAGE, 12.5), Ok(()));
        assert_eq!(
            validate_value(&user, "producer_rate", 1.0),
            Err("Invalid configuration key producer_rate".into())
        );
        assert_eq!(
            validate_value(&user, CONNECTION_CREATION_RATE, 1.0),
            Err("Invalid configuration key connection_creation_rate".into())
        );
        assert_eq!(
            validate_value(&user, CONSUMER_BYTE_RATE, 0.0),
            Err("Quota consumer_byte_rate must be greater than 0".into())
        );
        assert_eq!(
            validate_value(&user, CONSUMER_BYTE_RATE, f64::NAN),
            Err("Quota consumer_byte_rate must be a finite number".into())
        );
        assert_eq!(
            validate_value(&user, PRODUCER_BYTE_RATE, 1.5),
            Err("producer_byte_rate cannot be a fractional value.".into())
        );
        assert_eq!(
            validate_value(&ip, CONNECTION_CREATION_RATE, 3e9),
            Err("Proposed value for connection_creation_rate is too large for an INT.".into())
        );
    }
}
