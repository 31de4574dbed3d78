//! DescribeConfigs for topics (resource type 2), brokers (4; an empty name is the
//! cluster-wide default) and groups (32, KIP-848 group configs: any group name, existing
//! or not, as Kafka answers), with Kafka's names, values, sources and synonyms.

use std::collections::BTreeMap;

use brook_protocol::kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use brook_protocol::kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use brook_protocol::kafka_protocol::protocol::StrBytes;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::config::{
    describe_broker, describe_broker_defaults, describe_group, describe_topic, DescribeOptions,
    DescribedConfig,
};
use crate::error::{BrokerError, Denied, ResourceError};
use crate::server::session::Session;

pub const TOPIC: i8 = 2;
pub const BROKER: i8 = 4;
pub const BROKER_LOGGER: i8 = 8;
pub const GROUP: i8 = 32;

pub fn handle(
    broker: &Broker,
    session: &Session,
    req: DescribeConfigsRequest,
    _version: i16,
) -> DescribeConfigsResponse {
    // Kafka's ConfigHelper: DESCRIBE_CONFIGS on the topic or the group, or on the cluster
    // for brokers.
    let access = Access::new(broker, session);
    let options = DescribeOptions {
        include_synonyms: req.include_synonyms,
        include_documentation: req.include_documentation,
    };
    let config = broker.effective_config();
    let image = broker.image();
    let results = req
        .resources
        .into_iter()
        .map(|resource| {
            let name = resource.resource_name.to_string();
            let described: Result<Vec<DescribedConfig>, ResourceError> =
                match resource.resource_type {
                    TOPIC if !access.topic(AclOperation::DescribeConfigs, &name) => {
                        Err(BrokerError::NotAuthorized(Denied::Topic).into())
                    }
                    BROKER | BROKER_LOGGER if !access.cluster(AclOperation::DescribeConfigs) => {
                        Err(BrokerError::NotAuthorized(Denied::Cluster).into())
                    }
                    GROUP if !access.group(AclOperation::DescribeConfigs, &name) => {
                        Err(BrokerError::NotAuthorized(Denied::Group).into())
                    }
                    GROUP if name.is_empty() => {
                        Err(ResourceError::InvalidName("Group name must not be empty"))
                    }
                    GROUP => Ok(describe_group(
                        &config,
                        image.group_configs(&name).unwrap_or(&BTreeMap::new()),
                        options,
                    )),
                    TOPIC => match image.topic(&name) {
                        Some(topic) => describe_topic(&config, &topic.configs, options)
                            .map_err(ResourceError::Undescribable),
                        None => Err(BrokerError::UnknownTopic { name }.into()),
                    },
                    BROKER if name.is_empty() => Ok(describe_broker_defaults(&config, options)),
                    BROKER if name == broker.node_id.to_string() => {
                        Ok(describe_broker(&config, options))
                    }
                    BROKER => Err(ResourceError::NotThisBroker(name)),
                    BROKER_LOGGER => Ok(Vec::new()),
                    other => Err(ResourceError::UnsupportedResourceType(other)),
                };
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name);
            match described {
                Ok(configs) => {
                    let wanted = resource
                        .configuration_keys
                        .map(|keys| keys.iter().map(|k| k.to_string()).collect::<Vec<_>>());
                    result.with_configs(
                        configs
                            .into_iter()
                            .filter(|c| wanted.as_ref().is_none_or(|w| w.contains(&c.name)))
                            .map(to_wire)
                            .collect(),
                    )
                }
                Err(e) => result
                    .with_error_code(e.code().code())
                    .with_error_message(Some(StrBytes::from_string(e.to_string()))),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

fn to_wire(c: DescribedConfig) -> DescribeConfigsResourceResult {
    DescribeConfigsResourceResult::default()
        .with_name(StrBytes::from_string(c.name))
        .with_value(c.value.map(StrBytes::from_string))
        .with_read_only(c.read_only)
        .with_config_source(c.source.id())
        .with_is_sensitive(c.is_sensitive)
        .with_config_type(c.config_type.code())
        .with_documentation(c.documentation.map(StrBytes::from_static_str))
        .with_synonyms(
            c.synonyms
                .into_iter()
                .map(|s| {
                    DescribeConfigsSynonym::default()
                        .with_name(StrBytes::from_string(s.name))
                        .with_value(s.value.map(StrBytes::from_string))
                        .with_source(s.source.id())
                })
                .collect(),
        )
}
