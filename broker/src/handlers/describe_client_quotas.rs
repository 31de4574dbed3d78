//! DescribeClientQuotas (48): `kafka-configs --describe --entity-type users|clients|ips`
//! (also sent alongside DescribeUserScramCredentials for users). Filters as Kafka's
//! `ClientQuotasImage.describe`: each component names an entity type with match type 0
//! (exactly this name), 1 (the default entity) or 2 (any name, default included); an
//! entity matches when it has every filtered type as asked; `strict` also requires it to
//! have no other type. A malformed filter is INVALID_REQUEST (an unknown entity type
//! UNSUPPORTED_VERSION) with Kafka's message and no entries.
//!
//! Authorization (Kafka's `handleDescribeClientQuotasRequest`): DESCRIBE_CONFIGS on the
//! cluster, else `CLUSTER_AUTHORIZATION_FAILED` with its message and no entries.

use std::collections::{BTreeMap, BTreeSet};

use brook_protocol::kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use brook_protocol::kafka_protocol::messages::describe_client_quotas_response::{
    EntityData, EntryData, ValueData,
};
use brook_protocol::kafka_protocol::messages::{
    DescribeClientQuotasRequest, DescribeClientQuotasResponse,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::kafka_protocol::ResponseError;
use brook_raft::QuotaEntity;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::Denied;
use crate::quota::entity::{CLIENT_ID, IP, USER};
use crate::server::session::Session;

const MATCH_TYPE_EXACT: i8 = 0;
const MATCH_TYPE_DEFAULT: i8 = 1;
const MATCH_TYPE_SPECIFIED: i8 = 2;

/// A parsed filter: types that must have one name (`None` = the default), and types that
/// must be present with any name.
#[derive(Debug, Default, PartialEq)]
struct Filter {
    exact: BTreeMap<String, Option<String>>,
    any: BTreeSet<String>,
    strict: bool,
}

pub fn handle(
    broker: &Broker,
    session: &Session,
    req: DescribeClientQuotasRequest,
    _version: i16,
) -> DescribeClientQuotasResponse {
    if !Access::new(broker, session).cluster(AclOperation::DescribeConfigs) {
        return refused(Denied::Cluster.code(), Denied::Cluster.to_string());
    }
    let filter = match parse(&req.components, req.strict) {
        Ok(filter) => filter,
        Err((code, message)) => return refused(code, message),
    };
    let image = broker.image();
    let entries = image
        .client_quotas
        .entities()
        .filter(|(entity, _)| filter.matches(entity))
        .map(|(entity, values)| {
            let entity = entity
                .iter()
                .map(|(t, n)| {
                    EntityData::default()
                        .with_entity_type(StrBytes::from_string(t.clone()))
                        .with_entity_name(n.clone().map(StrBytes::from_string))
                })
                .collect();
            let values = values
                .iter()
                .map(|(k, v)| {
                    ValueData::default()
                        .with_key(StrBytes::from_string(k.clone()))
                        .with_value(*v)
                })
                .collect();
            EntryData::default().with_entity(entity).with_values(values)
        })
        .collect();
    DescribeClientQuotasResponse::default().with_entries(Some(entries))
}

fn refused(code: ResponseError, message: String) -> DescribeClientQuotasResponse {
    DescribeClientQuotasResponse::default()
        .with_error_code(code.code())
        .with_error_message(Some(StrBytes::from_string(message)))
        .with_entries(None)
}

fn parse(components: &[ComponentData], strict: bool) -> Result<Filter, (ResponseError, String)> {
    let invalid = |m: &str| (ResponseError::InvalidRequest, m.to_owned());
    let mut filter = Filter {
        strict,
        ..Filter::default()
    };
    for c in components {
        let entity_type = c.entity_type.to_string();
        if entity_type.is_empty() {
            return Err(invalid("Invalid empty entity type."));
        }
        if filter.exact.contains_key(&entity_type) || filter.any.contains(&entity_type) {
            return Err(invalid(&format!(
                "Entity type {entity_type} cannot appear more than once in the filter."
            )));
        }
        if ![IP, USER, CLIENT_ID].contains(&entity_type.as_str()) {
            return Err((
                ResponseError::UnsupportedVersion,
                format!("Unsupported entity type {entity_type}"),
            ));
        }
        let name = c._match.as_ref().map(|m| m.to_string());
        match (c.match_type, name) {
            (MATCH_TYPE_EXACT, None) => {
                return Err(invalid(
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                ))
            }
            (MATCH_TYPE_EXACT, name) => {
                filter.exact.insert(entity_type, name);
            }
            (MATCH_TYPE_DEFAULT, Some(_)) => {
                return Err(invalid(
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                ))
            }
            (MATCH_TYPE_DEFAULT, None) => {
                filter.exact.insert(entity_type, None);
            }
            (MATCH_TYPE_SPECIFIED, Some(_)) => {
                return Err(invalid(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                ))
            }
            (MATCH_TYPE_SPECIFIED, None) => {
                filter.any.insert(entity_type);
            }
            (other, _) => return Err(invalid(&format!("Unknown match type {other}"))),
        }
    }
    let has = |t: &str| filter.exact.contains_key(t) || filter.any.contains(t);
    if has(IP) && (has(USER) || has(CLIENT_ID)) {
        return Err(invalid(
            "Invalid entity filter component combination. IP filter component should not be \
             used with user or clientId filter component.",
        ));
    }
    Ok(filter)
}

impl Filter {
    fn matches(&self, entity: &QuotaEntity) -> bool {
        if self.strict && entity.len() != self.exact.len() + self.any.len() {
            return false;
        }
        self.exact.iter().all(|(t, n)| entity.get(t) == Some(n))
            && self.any.iter().all(|t| entity.contains_key(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn component(t: &str, match_type: i8, name: Option<&str>) -> ComponentData {
        ComponentData::default()
            .with_entity_type(StrBytes::from_string(t.to_owned()))
            .with_match_type(match_type)
            .with_match(name.map(|n| StrBytes::from_string(n.to_owned())))
    }

    fn entity(pairs: &[(&str, Option<&str>)]) -> QuotaEntity {
        pairs
            .iter()
            .map(|(t, n)| ((*t).to_owned(), n.map(str::to_owned)))
            .collect()
    }

    #[test]
    fn filters_match_exact_default_and_any_names_strictly_or_not() {
        let alice = entity(&[(USER, Some("alice"))]);
        let alice_c1 = entity(&[(USER, Some("alice")), (CLIENT_ID, Some("c1"))]);
        let default_user = entity(&[(USER, None)]);
        let exact = parse(&[component(USER, 0, Some("alice"))], false).expect("valid");
        assert!(exact.matches(&alice) && exact.matches(&alice_c1));
        assert!(!exact.matches(&default_user));
        let strict = parse(&[component(USER, 0, Some("alice"))], true).expect("valid");
        assert!(strict.matches(&alice) && !strict.matches(&alice_c1));
        let default = parse(&[component(USER, 1, None)], true).expect("valid");
        assert!(default.matches(&default_user) && !default.matches(&alice));
        let any = parse(&[component(USER, 2, None)], true).expect("valid");
        assert!(any.matches(&default_user) && any.matches(&alice) && !any.matches(&alice_c1));
        let everything = parse(&[], false).expect("valid");
        assert!(everything.matches(&alice_c1));
    }

    #[test]
    fn malformed_filters_get_kafkas_errors() {
        let err = |c: &[ComponentData]| parse(c, false).expect_err("refused");
        assert_eq!(
            err(&[component(USER, 0, None)]).1,
            "Request specified MATCH_TYPE_EXACT, but set match string to null."
        );
        assert_eq!(
            err(&[component("group", 2, None)]),
            (
                ResponseError::UnsupportedVersion,
                "Unsupported entity type group".to_owned()
            )
        );
        assert_eq!(
            err(&[component(USER, 2, None), component(USER, 1, None)]).1,
            "Entity type user cannot appear more than once in the filter."
        );
        assert!(err(&[component(IP, 2, None), component(USER, 2, None)])
            .1
            .starts_with("Invalid entity filter component combination."));
    }
}
