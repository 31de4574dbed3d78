//! AlterClientQuotas (49): `kafka-configs --alter --entity-type users|clients|ips
//! [--entity-name N | --entity-default] --add-config producer_byte_rate=…` and
//! `--delete-config`. Checked per entity as Kafka's controller checks it
//! (`ClientQuotaControlManager.alterClientQuotas`, messages in `quota::entity`): a key twice
//! in one entity or an entity twice in one request is INVALID_REQUEST, a bad entity or value
//! refuses that entity only. The accepted entities' changes go to the quorum in one command
//! (Kafka writes them as one atomic batch of records), none with `validate_only`.
//!
//! Authorization (Kafka's `handleAlterClientQuotasRequest`): ALTER_CONFIGS on the cluster,
//! else every entity CLUSTER_AUTHORIZATION_FAILED.

use std::collections::BTreeMap;

use brook_protocol::kafka_protocol::messages::alter_client_quotas_request::EntryData;
use brook_protocol::kafka_protocol::messages::alter_client_quotas_response::{
    EntityData, EntryData as ResultData,
};
use brook_protocol::kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::kafka_protocol::ResponseError;
use brook_raft::{Command, QuotaAlteration, QuotaEntity};

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::{BrokerError, Denied};
use crate::quota::entity::{validate_entity, validate_value};
use crate::server::session::Session;

type Outcome = Result<(), (ResponseError, String)>;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: AlterClientQuotasRequest,
    _version: i16,
) -> AlterClientQuotasResponse {
    if !Access::new(broker, session).cluster(AclOperation::AlterConfigs) {
        let e = BrokerError::NotAuthorized(Denied::Cluster);
        let entries = req
            .entries
            .iter()
            .map(|entry| result(entry, &Err((e.code(), e.to_string()))))
            .collect();
        return AlterClientQuotasResponse::default().with_entries(entries);
    }
    let image = broker.image();
    let mut outcomes: Vec<Outcome> = Vec::with_capacity(req.entries.len());
    let mut alterations: Vec<(usize, QuotaAlteration)> = Vec::new();
    let mut seen: Vec<QuotaEntity> = Vec::new();
    for entry in &req.entries {
        let checked = check(entry, &seen, &image.client_quotas);
        if let Ok((entity, _)) | Err((Some(entity), _)) = &checked {
            seen.push(entity.clone());
        }
        match checked {
            Ok((_, Some(alteration))) => {
                alterations.push((outcomes.len(), alteration));
                outcomes.push(Ok(()));
            }
            Ok((_, None)) => outcomes.push(Ok(())),
            Err((_, message)) => outcomes.push(Err((ResponseError::InvalidRequest, message))),
        }
    }
    if !req.validate_only && !alterations.is_empty() {
        let command = Command::AlterClientQuotas {
            alterations: alterations.iter().map(|(_, a)| a.clone()).collect(),
        };
        if let Err(e) = broker.quorum.propose(command).await {
            let e = BrokerError::from(e);
            for (i, _) in &alterations {
                outcomes[*i] = Err((e.code(), e.to_string()));
            }
        }
    }
    let entries = req
        .entries
        .iter()
        .zip(&outcomes)
        .map(|(entry, outcome)| result(entry, outcome))
        .collect();
    AlterClientQuotasResponse::default().with_entries(entries)
}

/// One entry's entity and the change it makes (`None`: nothing changes), or why it is
/// refused (with its entity when that much was valid, so a later duplicate is caught).
#[allow(clippy::type_complexity)]
fn check(
    entry: &EntryData,
    seen: &[QuotaEntity],
    current: &brook_raft::ClientQuotasImage,
) -> Result<(QuotaEntity, Option<QuotaAlteration>), (Option<QuotaEntity>, String)> {
    let pairs = entry.entity.iter().map(|e| {
        (
            e.entity_type.to_string(),
            e.entity_name.as_ref().map(|n| n.to_string()),
        )
    });
    let entity = validate_entity(pairs).map_err(|m| (None, m))?;
    if seen.contains(&entity) {
        return Err((None, format!("Ignoring duplicate entity {}", show(&entity))));
    }
    let mut ops: BTreeMap<String, Option<f64>> = BTreeMap::new();
    for op in &entry.ops {
        let key = op.key.to_string();
        if ops.contains_key(&key) {
            let message = format!(
                "Duplicate quota key {key} not updating quota for this entity {}",
                show(&entity)
            );
            return Err((Some(entity), message));
        }
        ops.insert(key, (!op.remove).then_some(op.value));
    }
    let existing = current.get(&entity);
    let mut alteration = QuotaAlteration {
        entity: entity.clone(),
        set: BTreeMap::new(),
        remove: Vec::new(),
    };
    for (key, value) in ops {
        let now = existing.and_then(|v| v.get(&key)).copied();
        match value {
            // Removing a key the entity does not have writes nothing, as in Kafka.
            None if now.is_some() => alteration.remove.push(key),
            None => {}
            Some(value) => {
                validate_value(&entity, &key, value).map_err(|m| (Some(entity.clone()), m))?;
                if now != Some(value) {
                    alteration.set.insert(key, value);
                }
            }
        }
    }
    let changes = !alteration.set.is_empty() || !alteration.remove.is_empty();
    Ok((entity, changes.then_some(alteration)))
}

/// Kafka's `ClientQuotaEntity.toString()`.
fn show(entity: &QuotaEntity) -> String {
    let entries: Vec<String> = entity
        .iter()
        .map(|(t, n)| format!("{t}={}", n.as_deref().unwrap_or("null")))
        .collect();
    format!("ClientQuotaEntity(entries={{{}}})", entries.join(", "))
}

fn result(entry: &EntryData, outcome: &Outcome) -> ResultData {
    let entity = entry
        .entity
        .iter()
        .map(|e| {
            EntityData::default()
                .with_entity_type(e.entity_type.clone())
                .with_entity_name(e.entity_name.clone())
        })
        .collect();
    let (code, message) = match outcome {
        Ok(()) => (0, None),
        Err((code, message)) => (code.code(), Some(StrBytes::from_string(message.clone()))),
    };
    ResultData::default()
        .with_error_code(code)
        .with_error_message(message)
        .with_entity(entity)
}
