//! IncrementalAlterConfigs (KIP-339): SET / DELETE per key (APPEND / SUBTRACT for list
//! keys like `cleanup.policy`) on topics, brokers and groups (KIP-848 group configs). The rules (a DELETE of anything
//! not set is a no-op, Kafka's refusals and their codes) live in `config::alter`; here
//! the request is read, the change proposed to the quorum (unless validate-only), and
//! a refused resource answered with its code, changing nothing. Logs pick up topic
//! changes live through the metadata reconciler; the consumer-group coordinator reads a
//! group's configs from the image at each heartbeat.

use std::collections::{BTreeMap, BTreeSet};

use brook_protocol::kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig;
use brook_protocol::kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use brook_protocol::kafka_protocol::messages::{
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_raft::Command;
use uuid::Uuid;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::config::security::listener_store_key;
use crate::config::{
    incremental_broker, incremental_group, incremental_topic, AlterOp, BrokerScope,
};
use crate::error::{BrokerError, Denied, ResourceError};
use crate::handlers::describe_configs::{BROKER, GROUP, TOPIC};
use crate::server::session::Session;

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

pub enum Target {
    Topic(Uuid),
    /// `None`: the cluster default (empty resource name).
    Broker(Option<i32>),
    /// A group by id; it need not exist.
    Group(String),
}

impl Target {
    pub fn broker_scope(broker_id: Option<i32>) -> BrokerScope {
        match broker_id {
            Some(_) => BrokerScope::PerBroker,
            None => BrokerScope::ClusterDefault,
        }
    }
}

/// The resource to alter, once the session may: ALTER_CONFIGS on the topic or the group,
/// or on the cluster for brokers (Kafka's `ConfigAdminManager` / `ControllerApis` checks).
pub fn broker_target(
    broker: &Broker,
    access: &Access<'_>,
    resource_type: i8,
    name: &str,
) -> Result<Target, ResourceError> {
    let denied = match resource_type {
        TOPIC => (!access.topic(AclOperation::AlterConfigs, name)).then_some(Denied::Topic),
        BROKER => (!access.cluster(AclOperation::AlterConfigs)).then_some(Denied::Cluster),
        GROUP => (!access.group(AclOperation::AlterConfigs, name)).then_some(Denied::Group),
        _ => None,
    };
    if let Some(denied) = denied {
        return Err(ResourceError::Broker(BrokerError::NotAuthorized(denied)));
    }
    match resource_type {
        TOPIC => broker
            .image()
            .topic(name)
            .map(|t| Target::Topic(t.topic_id))
            .ok_or_else(|| {
                ResourceError::Broker(BrokerError::UnknownTopic {
                    name: name.to_string(),
                })
            }),
        BROKER if name.is_empty() => Ok(Target::Broker(None)),
        BROKER => match name.parse::<i32>() {
            Ok(id) if id == broker.node_id => Ok(Target::Broker(Some(id))),
            _ => Err(ResourceError::NotThisBroker(name.to_string())),
        },
        // Kafka's ControllerConfigurationValidator.validateGroupName.
        GROUP if name.is_empty() => Err(ResourceError::InvalidName(
            "Default group resources are not allowed.",
        )),
        GROUP => Ok(Target::Group(name.to_string())),
        other => Err(ResourceError::UnsupportedResourceType(other)),
    }
}

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: IncrementalAlterConfigsRequest,
    _version: i16,
) -> IncrementalAlterConfigsResponse {
    let access = Access::new(broker, session);
    let mut responses = Vec::with_capacity(req.resources.len());
    for resource in req.resources {
        let name = resource.resource_name.to_string();
        let outcome = async {
            let ops = read_ops(&resource.configs)?;
            let target = broker_target(broker, &access, resource.resource_type, &name)?;
            let current = current_configs(broker, &target);
            let command = match target {
                Target::Topic(topic_id) => {
                    let change = incremental_topic(&current, &ops)?;
                    Command::AlterTopicConfigs {
                        topic_id,
                        set: change.set,
                        delete: change.delete,
                    }
                }
                Target::Broker(broker_id) => {
                    let scope = Target::broker_scope(broker_id);
                    let change = incremental_broker(&current, &ops, scope)?;
                    let removed: Vec<&String> = change
                        .delete
                        .iter()
                        .filter(|k| current.contains_key(*k))
                        .collect();
                    check_min_isr_under_elr(
                        broker,
                        broker_id,
                        change.set.keys().chain(removed.iter().copied()),
                        removed.iter().copied(),
                    )?;
                    if broker_id.is_some() {
                        let mut after = current.clone();
                        after.retain(|k, _| !change.delete.contains(k));
                        after.extend(change.set.clone());
                        check_tls_stores(broker, &after)?;
                    }
                    Command::AlterBrokerConfigs {
                        broker_id,
                        set: change.set,
                        delete: change.delete,
                    }
                }
                Target::Group(group_id) => {
                    let change = incremental_group(&current, &ops, &broker.effective_config())?;
                    Command::AlterGroupConfigs {
                        group_id,
                        set: change.set,
                        delete: change.delete,
                    }
                }
            };
            propose(broker, req.validate_only, command).await
        }
        .await;
        let mut response = AlterConfigsResourceResponse::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(resource.resource_name);
        if let Err(e) = outcome {
            response = response
                .with_error_code(e.code().code())
                .with_error_message(Some(StrBytes::from_string(e.to_string())));
        }
        responses.push(response);
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

/// The resource's operations, in request order. A key named twice is refused as Kafka's
/// `ConfigAdminManager` refuses it.
fn read_ops(configs: &[AlterableConfig]) -> Result<Vec<(String, AlterOp)>, ResourceError> {
    let mut seen = BTreeSet::new();
    let mut ops = Vec::with_capacity(configs.len());
    for config in configs {
        let key = config.name.to_string();
        if !seen.insert(key.clone()) {
            return Err(ResourceError::DuplicateConfigKeys);
        }
        let value = config
            .value
            .as_ref()
            .map(|v| v.to_string())
            .unwrap_or_default();
        let op = match config.config_operation {
            SET => AlterOp::Set(value),
            DELETE => AlterOp::Delete,
            APPEND => AlterOp::Append(value),
            SUBTRACT => AlterOp::Subtract(value),
            other => return Err(ResourceError::UnknownOperation(other)),
        };
        ops.push((key, op));
    }
    Ok(ops)
}

/// Kafka 4.4's `isDisallowedBrokerMinIsrTransition` / `isDisallowedClusterMinIsrTransition`:
/// while eligible leader replicas are on, a broker's own `min.insync.replicas` may not be
/// set or removed (`changed`), nor the cluster-wide one removed (`removed`): ELR relies on
/// one min ISR the whole cluster agrees on (KIP-966).
pub fn check_min_isr_under_elr<'a>(
    broker: &Broker,
    broker_id: Option<i32>,
    mut changed: impl Iterator<Item = &'a String>,
    mut removed: impl Iterator<Item = &'a String>,
) -> Result<(), ResourceError> {
    if !brook_raft::elr_enabled(&broker.image()) {
        return Ok(());
    }
    let min_isr = |k: &&String| k.as_str() == brook_raft::MIN_IN_SYNC_REPLICAS;
    match broker_id {
        Some(_) if changed.any(|k| min_isr(&k)) => Err(ResourceError::MinIsrWhileElr(
            "Broker-level min.insync.replicas cannot be altered while ELR is enabled.",
        )),
        None if removed.any(|k| min_isr(&k)) => Err(ResourceError::MinIsrWhileElr(
            "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.",
        )),
        _ => Ok(()),
    }
}

fn current_configs(broker: &Broker, target: &Target) -> BTreeMap<String, String> {
    let image = broker.image();
    match target {
        Target::Topic(id) => image
            .topic_by_id(id)
            .map(|t| t.configs.clone())
            .unwrap_or_default(),
        Target::Broker(id) => image.broker_configs(*id).cloned().unwrap_or_default(),
        Target::Group(group_id) => image.group_configs(group_id).cloned().unwrap_or_default(),
    }
}

/// Checks what a per-broker update (`after`: this broker's dynamic configs once applied)
/// would make the SSL listeners serve, when it changes a listener's stores: Kafka's
/// `SslFactory` checks, answered as Kafka's `ConfigAdminManager` answers them
/// (INVALID_REQUEST, "Invalid dynamic configuration").
pub fn check_tls_stores(
    broker: &Broker,
    after: &BTreeMap<String, String>,
) -> Result<(), ResourceError> {
    let image = broker.image();
    let empty = BTreeMap::new();
    let before = image.broker_configs(Some(broker.node_id)).unwrap_or(&empty);
    let changed: BTreeSet<&String> = before
        .keys()
        .chain(after.keys())
        .filter(|k| listener_store_key(k).is_some() && before.get(*k) != after.get(*k))
        .collect();
    if changed.is_empty() {
        return Ok(());
    }
    // Stores only mean something on a listener that speaks TLS: a key for another one would
    // be stored and never read.
    for key in changed.into_iter().filter(|k| after.contains_key(*k)) {
        let Some((listener, _)) = listener_store_key(key) else {
            continue;
        };
        if !broker
            .tls
            .keys()
            .any(|name| name.eq_ignore_ascii_case(listener))
        {
            return Err(ResourceError::InvalidDynamicConfig(format!(
                "{key}: {} is not an SSL or SASL_SSL listener of this broker",
                listener.to_ascii_uppercase()
            )));
        }
    }
    let config = broker
        .config
        .with_dynamic(image.broker_configs(None).unwrap_or(&empty), after);
    for (name, served) in &broker.tls {
        if let Some(next) = config.listener_tls.get(name) {
            served
                .validate(next)
                .map_err(ResourceError::InvalidDynamicConfig)?;
        }
    }
    Ok(())
}

/// Proposes an already validated change (unless validate-only) and waits until this
/// broker has applied it. A change that changes nothing is not proposed.
pub async fn propose(
    broker: &Broker,
    validate_only: bool,
    command: Command,
) -> Result<(), ResourceError> {
    let nothing = match &command {
        Command::AlterTopicConfigs { set, delete, .. }
        | Command::AlterBrokerConfigs { set, delete, .. }
        | Command::AlterGroupConfigs { set, delete, .. } => set.is_empty() && delete.is_empty(),
        _ => false,
    };
    if validate_only || nothing {
        return Ok(());
    }
    let this_broker = matches!(
        &command,
        Command::AlterBrokerConfigs { broker_id: Some(id), .. }
        | Command::ReplaceBrokerConfigs { broker_id: Some(id), .. } if *id == broker.node_id
    );
    broker
        .quorum
        .propose(command)
        .await
        .map_err(|e| ResourceError::Broker(e.into()))?;
    // A per-broker update re-reads the listeners' store files that changed on disk, as
    // Kafka reloads them whenever this node's configs change.
    broker.reconcile().await;
    if this_broker {
        broker.update_tls(&broker.effective_config(), true);
    }
    Ok(())
}
