//! `brook`: parse arguments, load configuration (`--config` file, `BROOK_*` env,
//! `--override key=value`), install tracing and the Prometheus exporter, start the
//! broker and serve until SIGINT/SIGTERM, then drain and flush.

use std::path::PathBuf;
use std::process::ExitCode;

use brook::broker::Broker;
use brook::config::BrokerConfig;
use brook::server;
use clap::Parser;
use tokio_util::task::TaskTracker;
use tracing::{error, info, warn};

/// See `brook::alloc`: a malformed frame's absurd array count must not abort the process.
#[global_allocator]
static ALLOCATOR: brook::alloc::BrookAllocator = brook::alloc::BrookAllocator;

// No `Debug`: `format --add-scram` arguments hold passwords.
#[derive(Parser)]
#[command(name = "brook", version, about = "A Kafka-compatible message broker")]
struct Args {
    /// A server.properties-style file.
    #[arg(long)]
    config: Option<PathBuf>,
    /// key=value, Kafka property names; beats the environment and the file.
    #[arg(long = "override", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
    /// Without a subcommand, `brook` runs the node.
    #[command(subcommand)]
    command: Option<Subcommand>,
}

#[derive(clap::Subcommand)]
enum Subcommand {
    /// Kafka's `kafka-storage format`: prepare the node's metadata directory before its first
    /// start (cluster id, bootstrap SCRAM credentials). Reads the node's configuration as a
    /// start does (`--config`, BROOK_* variables, `--override`, before or after `format`).
    Format(FormatArgs),
    /// Kafka's `kafka-storage random-uuid`: print a new cluster id.
    RandomUuid,
}

#[derive(clap::Args)]
struct FormatArgs {
    /// A server.properties-style file.
    #[arg(long, short = 'c')]
    config: Option<PathBuf>,
    /// key=value, Kafka property names; beats the environment and the file.
    #[arg(long = "override", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
    /// The cluster id (default: the `cluster.id` setting). May start with '-': one random
    /// id in 64 does (base64url), as `kafka-storage random-uuid` prints them.
    #[arg(long, short = 't', allow_hyphen_values = true)]
    cluster_id: Option<String>,
    /// A SCRAM credential for the metadata log, e.g. 'SCRAM-SHA-512=[name=alice,password=alice-secret]'
    /// or 'SCRAM-SHA-512=[name=alice,iterations=8192,salt="N3E=",saltedpassword="YCE="]'.
    #[arg(long, short = 'S', value_name = "SCRAM_CREDENTIAL")]
    add_scram: Vec<String>,
    /// Skip an already formatted directory instead of failing.
    #[arg(long, short = 'g')]
    ignore_formatted: bool,
    /// The release version for the initial feature levels (3.3-IV3 … 4.4-IV2, the default).
    #[arg(long, short = 'r')]
    release_version: Option<String>,
    /// A feature's initial level, feature=level (e.g. `kraft.version=1`); repeatable.
    #[arg(long = "feature", short = 'f', value_name = "FEATURE")]
    features: Vec<String>,
    /// Initialize this controller as a single-node dynamic quorum (KIP-853).
    #[arg(long, short = 's', conflicts_with_all = ["no_initial_controllers", "initial_controllers"])]
    standalone: bool,
    /// Initialize a node of a dynamic quorum without initial voters: it joins as an observer.
    #[arg(long, short = 'N', conflicts_with = "initial_controllers")]
    no_initial_controllers: bool,
    /// The initial voters of a dynamic quorum, id@host:port:directoryId,… (the same on every node).
    #[arg(long, short = 'I')]
    initial_controllers: Option<String>,
}

fn main() -> ExitCode {
    let mut args = Args::parse();
    // openraft logs every refused vote and unreachable peer at WARN/ERROR while a quorum
    // forms; brook_raft's monitor reports what an operator needs (leader changes,
    // unreachable voters) once. `BROOK_LOG=info,openraft=info` brings them back.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BROOK_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,openraft=off")),
        )
        .with_writer(std::io::stderr)
        // Client-supplied strings reach log lines: written escaped, they cannot forge one.
        .fmt_fields(brook::logging::escaped_fields())
        // Colour codes only for a terminal, never in log files.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let format = match args.command.take() {
        Some(Subcommand::RandomUuid) => {
            println!(
                "{}",
                brook::metadata::meta_properties::uuid_to_kafka_string(uuid::Uuid::new_v4())
            );
            return ExitCode::SUCCESS;
        }
        Some(Subcommand::Format(format)) => {
            if args.config.is_some() && format.config.is_some() {
                error!("invalid configuration: --config is given twice");
                return ExitCode::from(2);
            }
            args.config = args.config.take().or(format.config);
            args.overrides.extend(format.overrides);
            Some(brook::format::FormatRequest {
                cluster_id: format.cluster_id,
                add_scram: format.add_scram,
                ignore_formatted: format.ignore_formatted,
                release_version: format.release_version,
                features: format.features,
                quorum: match (
                    format.standalone,
                    format.no_initial_controllers,
                    format.initial_controllers,
                ) {
                    (true, _, _) => brook::format::QuorumFlag::Standalone,
                    (_, true, _) => brook::format::QuorumFlag::NoInitialControllers,
                    (_, _, Some(list)) => brook::format::QuorumFlag::InitialControllers(list),
                    _ => brook::format::QuorumFlag::None,
                },
            })
        }
        None => None,
    };
    let (config, warnings) =
        match BrokerConfig::load(args.config.as_deref(), std::env::vars(), &args.overrides) {
            Ok(loaded) => loaded,
            Err(e) => {
                error!("invalid configuration: {e}");
                return ExitCode::from(2);
            }
        };
    for warning in warnings {
        warn!("{warning}");
    }
    if let Some(request) = format {
        // As kafka-storage format: the outcome on stdout, a refusal on stderr with exit 1.
        return match brook::format::run(&config, &request) {
            Ok(line) => {
                println!("{line}");
                ExitCode::SUCCESS
            }
            Err(message) => {
                eprintln!("{message}");
                ExitCode::FAILURE
            }
        };
    }
    // Key and trust stores are read before anything starts: bad TLS material stops the
    // node naming the key, like any invalid configuration.
    let tls = match server::tls::build_all(&config) {
        Ok(tls) => tls,
        Err(e) => {
            error!("invalid configuration: {e}");
            return ExitCode::from(2);
        }
    };
    // The quorum's TLS (an SSL controller listener), checked before anything starts too.
    if let Err(e) = brook::cluster::quorum_tls::build(&config) {
        error!("invalid configuration: {e}");
        return ExitCode::from(2);
    }
    // The inter-broker client's trust and key stores, read before anything starts too.
    let peers = match brook::replication::peer_security::PeerSecurity::build(&config) {
        Ok(peers) => peers,
        Err(e) => {
            error!("invalid configuration: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            error!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(run(config, tls, peers));
    // Every task is drained by `run`; a blocking-pool thread still inside a disk call must not
    // keep a stopped node's process alive.
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(
    config: BrokerConfig,
    tls: server::tls::TlsListeners,
    peers: brook::replication::peer_security::PeerSecurity,
) -> anyhow::Result<()> {
    if let Some(addr) = config.metrics_listener {
        // Real histograms (not summaries) so latencies aggregate across brokers.
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .with_http_listener(addr)
            .set_buckets_for_metric(
                metrics_exporter_prometheus::Matcher::Suffix("_seconds".into()),
                &[
                    0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                    2.5, 5.0, 10.0, 30.0,
                ],
            )
            .and_then(|builder| builder.install())
            .map_err(|e| anyhow::anyhow!("cannot start the metrics endpoint on {addr}: {e}"))?;
        brook::metrics::register_broker_series();
        server::closed::register_metrics();
        info!(%addr, "prometheus metrics at /metrics");
    }
    if !config.cluster_mode().broker {
        return run_controller_only(config).await;
    }
    // Start-up may wait for a quorum that cannot form yet; SIGTERM must still stop it.
    let broker = tokio::select! {
        started = async {
            let broker = Broker::open(config, peers, tls).await?;
            brook::cluster::registration::join(&broker).await?;
            anyhow::Ok(broker)
        } => started?,
        _ = wait_for_signal() => {
            info!("stopped before start-up completed");
            return Ok(());
        }
    };
    // Kafka's tools with --bootstrap-controller, on the controller listener from now on.
    brook::cluster::controller_api::install(&broker);
    let shutdown = broker.stopping.clone();
    let tracker = TaskTracker::new();
    tracker.spawn(brook::logging::limit::report_suppressed(
        &brook::logging::sites::ALL,
        shutdown.clone(),
    ));
    tracker.spawn(brook::cluster::heartbeat::run(
        broker.clone(),
        shutdown.clone(),
    ));
    tracker.spawn(brook::cluster::attachment::run(
        broker.clone(),
        shutdown.clone(),
    ));
    {
        let broker = broker.clone();
        let shutdown = shutdown.clone();
        tracker.spawn(async move {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = brook_raft::controller::run(&broker.quorum) => {}
            }
        });
    }
    tracker.spawn(broker.clone().follow_metadata(shutdown.clone()));
    tracker.spawn(brook::replication::fetcher::run(
        broker.clone(),
        shutdown.clone(),
    ));
    tracker.spawn(brook::replication::isr::run(
        broker.clone(),
        shutdown.clone(),
    ));
    tracker.spawn(brook::replication::rebalance::run(
        broker.clone(),
        shutdown.clone(),
    ));
    tracker.spawn(brook::coordinator::txn::run(
        broker.clone(),
        shutdown.clone(),
    ));
    tracker.spawn(brook::coordinator::group_metrics::run(
        broker.clone(),
        shutdown.clone(),
    ));
    tracker.spawn(brook::partition::log_dir_task::run(
        broker.clone(),
        shutdown.clone(),
    ));
    tracker.spawn(brook::partition::retention_task::run(
        broker.clone(),
        shutdown.clone(),
    ));
    tracker.spawn(brook::partition::cleaner_task::run(
        broker.clone(),
        shutdown.clone(),
    ));
    tracker.spawn(brook::metrics::cluster::run(
        broker.clone(),
        shutdown.clone(),
    ));
    // Tokio owns SIGTERM from the first wait on it: a broker the controller never unfences
    // must still stop on it.
    let stopped_early = tokio::select! {
        _ = brook::cluster::registration::wait_unfenced(&broker) => false,
        _ = wait_for_signal() => true,
    };
    if stopped_early {
        info!("stopped before the controller unfenced this broker");
        shutdown.cancel();
        tracker.close();
        tracker.wait().await;
        if broker.replicas.shutdown().await {
            brook::cluster::registration::record_clean_shutdown(&broker).await;
        }
        return Ok(());
    }
    // A listener that cannot bind (port taken) stops the node with that error, after the
    // same orderly stop as a signal: the tasks above would otherwise keep the process alive.
    let served = server::serve(broker.clone(), shutdown.clone(), tracker.clone()).await;
    if served.is_ok() {
        broker.replicas.release_log_creation();
    }
    match &served {
        Ok(_) => tokio::select! {
            _ = wait_for_signal() => {
                info!("shutting down");
                // First: the creation's file system work would slow the metadata log's
                // fsyncs the controlled shutdown waits for.
                broker.replicas.stop_log_creation();
                brook::cluster::registration::controlled_shutdown(&broker).await;
            }
            // The broker stopped itself (another process took its node.id).
            _ = shutdown.cancelled() => info!("stopping"),
        },
        Err(_) => info!("stopping: a listener could not start"),
    }
    shutdown.cancel();
    tracker.close();
    if tokio::time::timeout(std::time::Duration::from_secs(10), tracker.wait())
        .await
        .is_err()
    {
        warn!("connections still open after 10 s; closing anyway");
    }
    if broker.replicas.shutdown().await {
        brook::cluster::registration::record_clean_shutdown(&broker).await;
    }
    // Every task holding the broker has ended, so the quorum can be stopped in order.
    match std::sync::Arc::try_unwrap(broker) {
        Ok(broker) => {
            if let Err(e) = broker.quorum.shutdown().await {
                warn!(error = %e, "metadata quorum did not stop cleanly");
            }
        }
        Err(_) => warn!("broker still in use at shutdown; metadata quorum left to the runtime"),
    }
    info!("stopped");
    served.map(|_| ())
}

/// `process.roles=controller`: a voter of the metadata quorum that serves no clients.
async fn run_controller_only(config: BrokerConfig) -> anyhow::Result<()> {
    let quorum_config = brook::cluster::quorum_config::build(&config)?;
    let quorum = brook_raft::MetadataQuorum::start(quorum_config).await?;
    let node = std::sync::Arc::new(brook::cluster::controller_api::ControllerOnly::new(
        quorum, config,
    ));
    // Served from the start: an observer waiting to be added answers DescribeQuorum too.
    brook::cluster::controller_api::install(&node);
    let ready = tokio::select! {
        ready = node.quorum.wait_ready() => { ready?; true }
        _ = wait_for_signal() => false,
    };
    if ready {
        info!(node_id = node.config.node_id, "controller started");
        tokio::select! {
            _ = wait_for_signal() => {}
            _ = brook_raft::controller::run(&node.quorum) => {}
        }
    }
    info!("shutting down");
    // The listener's handler holds the node weakly; a request in flight may hold it a moment.
    match std::sync::Arc::try_unwrap(node) {
        Ok(node) => {
            if let Err(e) = node.quorum.shutdown().await {
                warn!(error = %e, "metadata quorum did not stop cleanly");
            }
        }
        Err(_) => warn!("controller still in use at shutdown; metadata quorum left to the runtime"),
    }
    info!("stopped");
    Ok(())
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
