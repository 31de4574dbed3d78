//! What Brook does with a Kafka key it knows but does not act on yet, in words that
//! DescribeConfigs' documentation field and the README share.
//!
//! Every broker and topic key Apache Kafka 4.4 defines is known to Brook (MirrorMaker 2
//! and admin tools send them all): a key Brook implements has no [`Gap`]; any other is
//! accepted, stored and described with Kafka's default, type and flags, and its
//! documentation says which Brook feature it waits for. Kafka's internal keys
//! (`ConfigDef.defineInternal`) are accepted but never described, as in Kafka. Pure data.

/// Why Brook accepts a Kafka key without acting on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Gap {
    Tls,
    Sasl,
    Authorization,
    TieredStorage,
    Quotas,
    ShareGroups,
    ConsumerGroupProtocol,
    StreamsGroups,
    Metrics,
    Threads,
    Connections,
    Compression,
    Plugins,
    Lifecycle,
    Tuning,
    /// One of Kafka's internal keys: Kafka itself does not describe it.
    Internal,
}

impl Gap {
    /// Brook's documentation for every key of this kind (shown by DescribeConfigs when
    /// documentation is asked for).
    pub const fn doc(self) -> &'static str {
        match self {
            Gap::Tls => "Kafka's TLS tuning setting (cipher suites, JSSE provider and algorithms). Brook's TLS is rustls with its own safe choices (TLS 1.2 and 1.3, AES-GCM and ChaCha20-Poly1305): the key is accepted and described and has no effect; of the dynamic TLS updates only a listener's key and trust stores are served.",
            Gap::Sasl => "Kafka's SASL setting for a part of SASL Brook does not have (Kerberos, client-side OAuth logins and assertions, JWKS refresh over http(s), login classes and callbacks): the key is accepted and described and has no effect. Brook serves PLAIN, SCRAM and OAUTHBEARER (unsecured JWS, or signed JWTs verified with a JWKS read from a file: URL at start) on SASL_PLAINTEXT and SASL_SSL listeners, PLAIN or SCRAM between brokers and PLAIN to the controllers; GSSAPI in sasl.enabled.mechanisms stops the node at start; dynamic updates that would change authentication are refused (Kerberos and login-refresh timings are stored, as Kafka does).",
            Gap::Authorization => "Kafka's authorization setting for a part Brook does not have (principal builders, SSL principal mapping, delegation tokens): the key is accepted and described and has no effect. Brook's ACLs follow authorizer.class.name, super.users and allow.everyone.if.no.acl.found.",
            Gap::TieredStorage => "Kafka's tiered-storage setting (KIP-405). Brook keeps every segment on local disk: the key is accepted and described and has no effect; remote.storage.enable=true is refused as on a Kafka broker without tiered storage.",
            Gap::Quotas => "Kafka's quota or replication-throttle setting. Brook enforces no quotas or throttles yet: the key is accepted and described and has no effect.",
            Gap::ShareGroups => "Kafka's share-group setting (KIP-932, and its dead-letter queues). Brook has no share groups yet: the key is accepted and described and has no effect.",
            Gap::ConsumerGroupProtocol => "Kafka's setting for the consumer group protocol of KIP-848. Brook serves consumer groups with its session timeout, heartbeat interval and assignors but not this setting yet: the key is accepted and described and has no effect.",
            Gap::StreamsGroups => "Kafka's streams-group setting (KIP-1071). Brook has no streams groups yet (Kafka Streams runs on the classic protocol): the key is accepted and described and has no effect.",
            Gap::Metrics => "Kafka's JMX / metrics-reporter setting. Brook exports Prometheus metrics at metrics.listener instead: the key is accepted and described and has no effect.",
            Gap::Threads => "Kafka's thread-pool size. Brook sizes its own tasks and blocking pool: the key is accepted and described and has no effect.",
            Gap::Connections => "Kafka's connection-rate, connection-setup or request-queue limit. Brook does not enforce it yet: the key is accepted and described and has no effect.",
            Gap::Compression => "Kafka's compression-level or decompression limit. Brook does not recompress or bound decompression with it yet: the key is accepted and described and has no effect.",
            Gap::Plugins => "Kafka's Java plugin setting (a policy, selector or config-provider class). Brook cannot load Java plugins: the key is accepted and described and has no effect.",
            Gap::Lifecycle => "Kafka's broker lifecycle or listener-role setting that Brook does not read yet: the key is accepted and described and has no effect.",
            Gap::Tuning => "Kafka's tuning setting for a mechanism Brook implements its own way (purgatories, checkpoints, buffers, timeouts, quorum and metadata-log internals): the key is accepted and described and has no effect.",
            Gap::Internal => "Kafka's internal setting (not described by Kafka): accepted, no effect in Brook.",
        }
    }

    /// A short name for warnings and the README.
    pub const fn label(self) -> &'static str {
        match self {
            Gap::Tls => "TLS tuning",
            Gap::Sasl => "SASL",
            Gap::Authorization => "authorization",
            Gap::TieredStorage => "tiered storage",
            Gap::Quotas => "quotas and throttles",
            Gap::ShareGroups => "share groups",
            Gap::ConsumerGroupProtocol => "the KIP-848 consumer group protocol",
            Gap::StreamsGroups => "streams groups",
            Gap::Metrics => "JMX metrics reporters",
            Gap::Threads => "thread-pool sizes",
            Gap::Connections => "connection setup and request-queue limits",
            Gap::Compression => "compression levels",
            Gap::Plugins => "Java plugins",
            Gap::Lifecycle => "this lifecycle setting",
            Gap::Tuning => "this tuning setting",
            Gap::Internal => "Kafka's internal settings",
        }
    }
}
