//! IncrementalAlterConfigs (KIP-339): SET / DELETE per key (APPEND / SUBTRACT for list
//! keys like `cleanup.policy`) on topics and brokers. Every change is validated before
//! it is proposed; an invalid key or value answers `INVALID_CONFIG` and changes nothing.
//! Logs pick up topic changes live through the metadata reconciler.

use std::collections::BTreeMap;

use brook_protocol::kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use brook_protocol::kafka_protocol::messages::{
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::kafka_protocol::ResponseError;
use brook_raft::Command;
use uuid::Uuid;

use crate::broker::Broker;
use crate::config::{normalize_topic_overrides, validate_broker_dynamic};
use crate::error::BrokerError;
use crate::handlers::describe_configs::{BROKER, TOPIC};

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

pub enum Target {
    Topic(Uuid),
    Broker(Option<i32>),
}

type Failure = (ResponseError, String);

pub fn broker_target(broker: &Broker, resource_type: i8, name: &str) -> Result<Target, Failure> {
    match resource_type {
        TOPIC => broker
            .image()
            .topic(name)
            .map(|t| Target::Topic(t.topic_id))
            .ok_or((
                ResponseError::UnknownTopicOrPartition,
                format!("topic {name} does not exist"),
            )),
        BROKER if name.is_empty() => Ok(Target::Broker(None)),
        BROKER => match name.parse::<i32>() {
            Ok(id) if id == broker.node_id => Ok(Target::Broker(Some(id))),
            _ => Err((
                ResponseError::InvalidRequest,
                format!("broker {name} is not this broker"),
            )),
        },
        other => Err((
            ResponseError::InvalidRequest,
            format!("unsupported resource type {other}"),
        )),
    }
}

pub async fn handle(
    broker: &Broker,
    req: IncrementalAlterConfigsRequest,
    _version: i16,
) -> IncrementalAlterConfigsResponse {
    let mut responses = Vec::with_capacity(req.resources.len());
    for resource in req.resources {
        let name = resource.resource_name.to_string();
        let outcome = match broker_target(broker, resource.resource_type, &name) {
            Err(e) => Err(e),
            Ok(target) => {
                let current = current_configs(broker, &target);
                match changes(&current, &resource.configs) {
                    Err(e) => Err(e),
                    Ok((set, delete)) => {
                        let command = match target {
                            Target::Topic(topic_id) => Command::AlterTopicConfigs {
                                topic_id,
                                set,
                                delete,
                            },
                            Target::Broker(broker_id) => Command::AlterBrokerConfigs {
                                broker_id,
                                set,
                                delete,
                            },
                        };
                        apply(broker, req.validate_only, command).await
                    }
                }
            }
        };
        let mut response = AlterConfigsResourceResponse::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(resource.resource_name);
        if let Err((code, message)) = outcome {
            response = response
                .with_error_code(code.code())
                .with_error_message(Some(StrBytes::from_string(message)));
        }
        responses.push(response);
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

fn current_configs(broker: &Broker, target: &Target) -> BTreeMap<String, String> {
    let image = broker.image();
    match target {
        Target::Topic(id) => image
            .topic_by_id(id)
            .map(|t| t.configs.clone())
            .unwrap_or_default(),
        Target::Broker(id) => image.broker_configs(*id).cloned().unwrap_or_default(),
    }
}

fn changes(
    current: &BTreeMap<String, String>,
    ops: &[brook_protocol::kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig],
) -> Result<(BTreeMap<String, String>, Vec<String>), Failure> {
    let mut set = BTreeMap::new();
    let mut delete = Vec::new();
    for op in ops {
        let key = op.name.to_string();
        let value = op.value.as_ref().map(|v| v.to_string()).unwrap_or_default();
        let list = |s: &str| -> Vec<String> {
            s.split(',')
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(String::from)
                .collect()
        };
        match op.config_operation {
            SET => {
                set.insert(key, value);
            }
            DELETE => delete.push(key),
            APPEND | SUBTRACT => {
                let mut items = list(current.get(&key).map(String::as_str).unwrap_or(""));
                for v in list(&value) {
                    if op.config_operation == APPEND && !items.contains(&v) {
                        items.push(v);
                    } else if op.config_operation == SUBTRACT {
                        items.retain(|i| i != &v);
                    }
                }
                set.insert(key, items.join(","));
            }
            other => {
                return Err((
                    ResponseError::InvalidRequest,
                    format!("unknown config operation {other}"),
                ))
            }
        }
    }
    Ok((set, delete))
}

/// Validates the configs a command would store, then proposes it (unless validate-only).
pub async fn apply(broker: &Broker, validate_only: bool, command: Command) -> Result<(), Failure> {
    let invalid = |e: crate::config::ConfigError| (ResponseError::InvalidConfig, e.to_string());
    match &command {
        Command::AlterTopicConfigs { set, .. }
        | Command::ReplaceTopicConfigs { configs: set, .. } => {
            normalize_topic_overrides(set).map_err(invalid)?;
        }
        Command::AlterBrokerConfigs { set, .. }
        | Command::ReplaceBrokerConfigs { configs: set, .. } => {
            for (k, v) in set {
                validate_broker_dynamic(k, v).map_err(invalid)?;
            }
        }
        _ => {}
    }
    if let Command::AlterTopicConfigs { delete, .. } = &command {
        for key in delete {
            if crate::config::topic::topic_key(key).is_none() {
                return Err((
                    ResponseError::InvalidConfig,
                    format!("unknown topic config {key}"),
                ));
            }
        }
    }
    if validate_only {
        return Ok(());
    }
    broker.quorum.propose(command).await.map_err(|e| {
        let e = BrokerError::from(e);
        (e.code(), e.to_string())
    })?;
    broker.reconcile().await;
    Ok(())
}
