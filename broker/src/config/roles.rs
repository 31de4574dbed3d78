//! Cross-key rules of a KRaft node's identity, as Kafka's `KafkaConfig` validates them:
//! `process.roles`, `node.id`, `controller.quorum.voters`,
//! `controller.quorum.bootstrap.servers`, `controller.listener.names` and `listeners`.
//! A contradiction stops the node with a message naming every key involved.
//!
//! Brook's one deviation: with no voters and no bootstrap servers, a combined node runs a
//! quorum of one (so a bare `brook` needs no settings). A controller with bootstrap servers
//! and no voters is part of a dynamic quorum (KIP-853, `brook format --standalone` etc.).

use super::broker::{BrokerConfig, ProcessRole};
use super::error::ConfigError;
use super::listener::Listener;

/// How this node takes part in the metadata quorum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuorumRole {
    /// A voter, listening for raft peers on `listener` (the controller listener), or on
    /// nothing for a quorum of one.
    Voter { listener: Option<Listener> },
    /// A broker-only node: a learner that follows the metadata log.
    Learner,
}

/// What this process runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterMode {
    pub quorum: QuorumRole,
    /// Serves Kafka clients (`process.roles` has `broker`).
    pub broker: bool,
}

fn contradiction(keys: &[&str], reason: impl Into<String>) -> ConfigError {
    ConfigError::Contradiction {
        keys: keys.join(", "),
        reason: reason.into(),
    }
}

/// The controller listener this node binds, if `controller.listener.names` names one of
/// `listeners`.
fn controller_listener(config: &BrokerConfig) -> Option<&Listener> {
    let first = config.controller_listener_names.first()?;
    config.listeners.iter().find(|l| &l.name == first)
}

/// Checks the cross-key rules; called by `BrokerConfig::build`.
pub fn check(config: &BrokerConfig) -> Result<(), ConfigError> {
    mode(config).map(|_| ())
}

/// The node's mode, or the contradiction that forbids it.
pub fn mode(config: &BrokerConfig) -> Result<ClusterMode, ConfigError> {
    let roles = &config.process_roles;
    if roles.is_empty() {
        return Err(contradiction(
            &["process.roles"],
            "must name 'broker', 'controller' or both",
        ));
    }
    let is_broker = roles.contains(&ProcessRole::Broker);
    let is_controller = roles.contains(&ProcessRole::Controller);
    let voters = &config.controller_quorum_voters;
    let in_voters = voters.iter().any(|v| v.node_id == config.node_id);
    let bootstrap = &config.controller_quorum_bootstrap_servers;
    if let Some(l) = config
        .advertised_listeners
        .iter()
        .find(|l| config.controller_listener_names.contains(&l.name))
    {
        return Err(contradiction(
            &["advertised.listeners", "controller.listener.names"],
            format!(
                "the controller listener {} must not be advertised to clients",
                l.name
            ),
        ));
    }
    if is_broker
        && !config
            .listeners
            .iter()
            .any(|l| !config.controller_listener_names.contains(&l.name))
    {
        return Err(contradiction(
            &["listeners", "controller.listener.names", "process.roles"],
            "a broker needs at least one listener that is not a controller listener",
        ));
    }
    if !is_controller {
        if voters.is_empty() && bootstrap.is_empty() {
            return Err(contradiction(
                &[
                    "process.roles",
                    "controller.quorum.voters",
                    "controller.quorum.bootstrap.servers",
                ],
                "a broker-only node needs controller.quorum.voters or controller.quorum.bootstrap.servers to find the controllers",
            ));
        }
        if in_voters {
            return Err(contradiction(
                &["process.roles", "node.id", "controller.quorum.voters"],
                format!(
                    "node.id {} is a voter in controller.quorum.voters, but process.roles has no 'controller'",
                    config.node_id
                ),
            ));
        }
        if let Some(l) = config
            .listeners
            .iter()
            .find(|l| config.controller_listener_names.contains(&l.name))
        {
            return Err(contradiction(
                &["process.roles", "listeners", "controller.listener.names"],
                format!(
                    "a broker-only node must not bind the controller listener {} (it is not a voter)",
                    l.name
                ),
            ));
        }
        return Ok(ClusterMode {
            quorum: QuorumRole::Learner,
            broker: true,
        });
    }
    // A controller.
    if voters.is_empty() {
        let own = controller_listener(config);
        // With bootstrap servers this is a controller of a dynamic quorum (KIP-853): its
        // voters come from `brook format` or from AddRaftVoter, reached on its listener.
        if !bootstrap.is_empty() && own.is_none() {
            return Err(contradiction(
                &["controller.quorum.bootstrap.servers", "controller.listener.names", "listeners"],
                "a controller of a dynamic quorum needs a controller listener in listeners, named by controller.listener.names",
            ));
        }
        if !is_broker && own.is_none() {
            return Err(contradiction(
                &["process.roles", "controller.listener.names", "listeners"],
                "a controller-only node needs a controller listener in listeners, named by controller.listener.names",
            ));
        }
        return Ok(ClusterMode {
            quorum: QuorumRole::Voter {
                listener: own.cloned(),
            },
            broker: is_broker,
        });
    }
    if !in_voters {
        return Err(contradiction(
            &["node.id", "controller.quorum.voters", "process.roles"],
            format!(
                "node.id {} has the 'controller' role but is not among the voters {}",
                config.node_id,
                voters
                    .iter()
                    .map(|v| format!("{}@{}:{}", v.node_id, v.host, v.port))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        ));
    }
    let Some(listener) = controller_listener(config) else {
        return Err(contradiction(
            &["controller.listener.names", "listeners"],
            "controller.listener.names must name a listener in listeners when controller.quorum.voters is set",
        ));
    };
    if let Some(own) = voters.iter().find(|v| v.node_id == config.node_id) {
        if own.port != listener.port {
            return Err(contradiction(
                &["controller.quorum.voters", "listeners", "node.id"],
                format!(
                    "node {}'s voter entry has port {} but its controller listener {} binds port {}",
                    config.node_id, own.port, listener.name, listener.port
                ),
            ));
        }
    }
    Ok(ClusterMode {
        quorum: QuorumRole::Voter {
            listener: Some(listener.clone()),
        },
        broker: is_broker,
    })
}

impl BrokerConfig {
    /// This node's part in the cluster; valid for every loaded config.
    pub fn cluster_mode(&self) -> ClusterMode {
        mode(self).unwrap_or(ClusterMode {
            quorum: QuorumRole::Voter { listener: None },
            broker: true,
        })
    }

    /// Whether `name` is a controller listener (served by the raft transport, not Kafka).
    pub fn is_controller_listener(&self, name: &str) -> bool {
        self.controller_listener_names.iter().any(|n| n == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(args: &[&str]) -> Result<BrokerConfig, ConfigError> {
        let overrides: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        BrokerConfig::load(None, Vec::<(String, String)>::new(), &overrides).map(|(c, _)| c)
    }

    const NODE_2: &[&str] = &[
        "node.id=2",
        "controller.quorum.voters=1@127.0.0.1:19091,2@127.0.0.1:19092,3@127.0.0.1:19093",
        "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:19092",
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    ];

    fn with(extra: &[&'static str]) -> Vec<&'static str> {
        NODE_2.iter().chain(extra).copied().collect()
    }

    fn refused_keys(args: &[&str]) -> String {
        match load(args) {
            Ok(_) => panic!("accepted: {args:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn defaults_run_a_one_node_quorum_and_a_voter_listens_on_its_controller_listener() {
        let single = load(&[]).map(|c| c.cluster_mode()).ok();
        assert_eq!(
            single,
            Some(ClusterMode {
                quorum: QuorumRole::Voter { listener: None },
                broker: true
            })
        );
        let mode = load(NODE_2).map(|c| c.cluster_mode()).ok();
        let listener = match mode.map(|m| m.quorum) {
            Some(QuorumRole::Voter { listener: Some(l) }) => l,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            (listener.name.as_str(), listener.port),
            ("CONTROLLER", 19092)
        );
    }

    #[test]
    fn a_controller_missing_from_the_voters_is_refused_naming_the_keys() {
        let message = refused_keys(&with(&["node.id=4"]));
        assert!(
            message.contains("node.id") && message.contains("controller.quorum.voters"),
            "{message}"
        );
    }

    #[test]
    fn a_broker_only_node_must_not_be_a_voter_and_needs_the_controllers() {
        let message = refused_keys(&with(&["process.roles=broker"]));
        assert!(
            message.contains("process.roles") && message.contains("node.id"),
            "{message}"
        );
        let message = refused_keys(&["process.roles=broker"]);
        assert!(message.contains("controller.quorum.voters"), "{message}");
        let message = refused_keys(&with(&["process.roles=broker", "node.id=5"]));
        assert!(message.contains("listeners"), "{message}");
        let learner = load(&[
            "process.roles=broker",
            "node.id=5",
            "controller.quorum.voters=1@127.0.0.1:19091",
            "controller.listener.names=CONTROLLER",
        ])
        .map(|c| c.cluster_mode());
        assert_eq!(
            learner.ok(),
            Some(ClusterMode {
                quorum: QuorumRole::Learner,
                broker: true
            })
        );
    }

    #[test]
    fn voters_need_a_controller_listener_on_the_voter_port() {
        let message = refused_keys(&[
            "node.id=1",
            "controller.quorum.voters=1@127.0.0.1:19091,2@127.0.0.1:19092",
        ]);
        assert!(message.contains("controller.listener.names"), "{message}");
        let message = refused_keys(&[
            "node.id=2",
            "controller.quorum.voters=1@127.0.0.1:19091,2@127.0.0.1:29092",
            "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:19092",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        ]);
        assert!(
            message.contains("29092") && message.contains("19092"),
            "{message}"
        );
    }

    #[test]
    fn duplicate_voter_ids_and_an_advertised_controller_listener_are_refused() {
        let message =
            refused_keys(&["controller.quorum.voters=1@127.0.0.1:19091,1@127.0.0.1:19092"]);
        assert!(message.contains("controller.quorum.voters"), "{message}");
        let message = refused_keys(&with(&[
            "advertised.listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:19092",
        ]));
        assert!(message.contains("advertised.listeners"), "{message}");
    }

    #[test]
    fn a_controller_only_node_serves_no_clients() {
        let mode = load(&with(&[
            "process.roles=controller",
            "listeners=CONTROLLER://127.0.0.1:19092",
        ]))
        .map(|c| c.cluster_mode());
        assert_eq!(mode.map(|m| m.broker).ok(), Some(false));
    }
}
