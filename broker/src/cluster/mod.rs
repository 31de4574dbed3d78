//! This broker's life in the cluster, KRaft's `BrokerLifecycleManager`: register with the
//! quorum (refusing to take over a node id another live process holds), heartbeat the
//! controller, wait to be unfenced before serving, re-register if the controller forgot
//! this incarnation, fence itself on SIGTERM (controlled shutdown), and report the replicas
//! of a failed log directory offline (`offline_replicas`). Plus the pure
//! replica placement (`placement`) and the quorum settings derived from the config
//! (`quorum_config`), with the raft transport's TLS (`quorum_tls`) and SASL (`quorum_sasl`).

pub mod attachment;
pub mod controller_api;
pub mod heartbeat;
pub mod offline_replicas;
pub mod placement;
pub mod quorum_config;
pub mod quorum_sasl;
pub mod quorum_tls;
pub mod registration;
