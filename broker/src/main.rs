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

#[derive(Parser, Debug)]
#[command(name = "brook", version, about = "A Kafka-compatible message broker")]
struct Args {
    /// A server.properties-style file.
    #[arg(long)]
    config: Option<PathBuf>,
    /// key=value, Kafka property names; beats the environment and the file.
    #[arg(long = "override", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BROOK_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,openraft=warn")),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal, never in log files.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
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
    match runtime.block_on(run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(config: BrokerConfig) -> anyhow::Result<()> {
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
        info!(%addr, "prometheus metrics at /metrics");
    }
    let broker = Broker::start(config).await?;
    let shutdown = broker.stopping.clone();
    let tracker = TaskTracker::new();
    tracker.spawn(broker.clone().follow_metadata(shutdown.clone()));
    tracker.spawn(brook::coordinator::group_metrics::run(
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
    server::serve(broker.clone(), shutdown.clone(), tracker.clone()).await?;
    wait_for_signal().await;
    info!("shutting down");
    shutdown.cancel();
    tracker.close();
    if tokio::time::timeout(std::time::Duration::from_secs(10), tracker.wait())
        .await
        .is_err()
    {
        warn!("connections still open after 10 s; closing anyway");
    }
    broker.replicas.shutdown().await;
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
