//! AlterConfigs (the legacy, non-incremental API): the given set replaces all dynamic
//! configs of the resource. Validated first with the rules of `config::alter` (Kafka's
//! checks and codes); nothing changes on a refused key or value.

use std::collections::BTreeMap;

use brook_protocol::kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use brook_protocol::kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_raft::Command;

use crate::auth::Access;
use crate::broker::Broker;
use crate::config::group::normalize_group_configs;
use crate::config::{alter::normalize_broker_update, normalize_topic_overrides};
use crate::error::ResourceError;
use crate::handlers::incremental_alter_configs::{
    broker_target, check_min_isr_under_elr, check_tls_stores, propose, Target,
};
use crate::server::session::Session;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: AlterConfigsRequest,
    _version: i16,
) -> AlterConfigsResponse {
    let access = Access::new(broker, session);
    let mut responses = Vec::with_capacity(req.resources.len());
    for resource in req.resources {
        let configs: BTreeMap<String, String> = resource
            .configs
            .iter()
            .filter_map(|c| {
                c.value
                    .as_ref()
                    .map(|v| (c.name.to_string(), v.to_string()))
            })
            .collect();
        let name = resource.resource_name.to_string();
        let outcome = async {
            let command = match broker_target(broker, &access, resource.resource_type, &name)? {
                Target::Topic(topic_id) => Command::ReplaceTopicConfigs {
                    topic_id,
                    configs: normalize_topic_overrides(&configs).map_err(ResourceError::Refused)?,
                },
                Target::Broker(broker_id) => {
                    let configs =
                        normalize_broker_update(&configs, Target::broker_scope(broker_id))
                            .map_err(ResourceError::Refused)?;
                    if broker_id.is_some() {
                        check_tls_stores(broker, &configs)?;
                    }
                    let current = broker
                        .image()
                        .broker_configs(broker_id)
                        .cloned()
                        .unwrap_or_default();
                    let removed: Vec<&String> = current
                        .keys()
                        .filter(|k| !configs.contains_key(*k))
                        .collect();
                    check_min_isr_under_elr(
                        broker,
                        broker_id,
                        configs.keys().chain(removed.iter().copied()),
                        removed.iter().copied(),
                    )?;
                    Command::ReplaceBrokerConfigs { broker_id, configs }
                }
                Target::Group(group_id) => Command::ReplaceGroupConfigs {
                    group_id,
                    configs: normalize_group_configs(&configs, &broker.effective_config())
                        .map_err(ResourceError::Refused)?,
                },
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
    AlterConfigsResponse::default().with_responses(responses)
}
