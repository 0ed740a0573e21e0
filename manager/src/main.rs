//! `loopgate-manager`: parse config, start logging, connect, spawn the HTTP API and the results
//! loop, shut down on SIGTERM/SIGINT.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use loopgate_manager::config::{self, EnvOverrides};
use loopgate_manager::deadline_sweeper::DeadlineSweeper;
use loopgate_manager::engine::Engine;
use loopgate_manager::gauges::run_gauges;
use loopgate_manager::http::{router, ApiState};
use loopgate_manager::results_loop::ResultsLoop;
use loopgate_manager::run_store::RunStore;
use loopgate_manager::snapshot_gc_loop::SnapshotGc;
use loopgate_models::{process_env, ChatClient};
use loopgate_snapshot::SnapshotStore;
use loopgate_telemetry::metrics::Metrics;
use loopgate_telemetry::otel::{init_telemetry, TelemetrySettings};
use loopgate_transport::{Bus, BusOptions, ConsumerOptions};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Parser)]
#[command(name = "loopgate-manager", version, about = "loopgate control plane")]
struct Args {
    /// TOML config file.
    #[arg(long)]
    config: Option<PathBuf>,
    /// HTTP listen address (overrides LOOPGATE_HTTP_ADDR and [http].addr).
    #[arg(long)]
    http_addr: Option<String>,
}

const CONNECT_DEADLINE: Duration = Duration::from_secs(30);

async fn connect_with_retry<T, F, Fut, E>(what: &str, mut f: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
    E: std::fmt::Display,
{
    let deadline = tokio::time::Instant::now() + CONNECT_DEADLINE;
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::warn!(error = %e, "{what} not reachable yet; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => anyhow::bail!("{what} unreachable after {CONNECT_DEADLINE:?}: {e}"),
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let overrides = EnvOverrides {
        nats_url: process_env("LOOPGATE_NATS_URL"),
        redis_url: process_env("LOOPGATE_REDIS_URL"),
        http_addr: args
            .http_addr
            .clone()
            .or_else(|| process_env("LOOPGATE_HTTP_ADDR")),
    };
    let settings = config::load(args.config.as_deref(), overrides, &process_env)?;
    let telemetry = Arc::new(init_telemetry(&TelemetrySettings::from_env(
        "loopgate-manager",
        "info",
        &process_env,
    )?)?);
    let metrics = Metrics::new();
    metrics.worker_up.record(
        1,
        &[opentelemetry::KeyValue::new("loopgate.role", "manager")],
    );
    tracing::info!(nats = %settings.nats.url, redis = %settings.redis_url, http = %settings.http_addr, "starting");

    let mut models = BTreeMap::new();
    for (name, profile) in &settings.models {
        models.insert(
            name.clone(),
            ChatClient::from_profile(profile).with_context(|| format!("model profile {name}"))?,
        );
    }
    let models = Arc::new(models);

    let bus_options = BusOptions {
        user: settings.nats.user.clone(),
        password: settings.nats.password.clone(),
        ..BusOptions::default()
    };
    let bus = connect_with_retry("NATS", || {
        Bus::connect(
            &settings.nats.url,
            &settings.nats.prefix,
            bus_options.clone(),
        )
    })
    .await?;
    connect_with_retry("JetStream topology", || bus.ensure_topology()).await?;
    let store = connect_with_retry("Redis", || {
        RunStore::connect(&settings.redis_url, Duration::from_secs(5))
    })
    .await?;
    let snapshots = SnapshotStore::new(&bus).await.context("snapshot store")?;
    let evidence = SnapshotStore::evidence(&bus)
        .await
        .context("evidence store")?;
    let engine = Engine::new(bus.clone(), store, settings.retention, metrics);

    let cancel = CancellationToken::new();
    let results = ResultsLoop {
        engine: engine.clone(),
        models: models.clone(),
        char_budget: settings.prompt_char_budget,
        gui_offered: settings.gui_offered,
        concurrency: settings.concurrency,
        consumer_options: ConsumerOptions {
            ack_wait: settings.ack_wait,
            max_deliver: settings.max_deliver,
            max_ack_pending: (settings.concurrency as i64) * 4,
        },
    };
    let results_task = tokio::spawn(results.run(cancel.clone()));
    let sweeper = DeadlineSweeper {
        engine: engine.clone(),
        interval: settings.sweep_interval,
        batch: 100,
    };
    let sweeper_task = tokio::spawn(sweeper.run(cancel.clone()));
    let gauges_task = tokio::spawn(run_gauges(
        engine.clone(),
        Duration::from_secs(10),
        cancel.clone(),
    ));
    let gc = SnapshotGc {
        engine: engine.clone(),
        snapshots: snapshots.clone(),
        evidence: evidence.clone(),
        every: settings.gc_interval,
        grace: settings.gc_grace,
    };
    let gc_task = tokio::spawn(gc.run(cancel.clone()));

    let state = Arc::new(ApiState {
        engine,
        snapshots,
        evidence,
        models,
        token: settings.token.clone(),
        telemetry: telemetry.clone(),
    });
    let listener = tokio::net::TcpListener::bind(settings.http_addr)
        .await
        .with_context(|| format!("binding {}", settings.http_addr))?;
    tracing::info!(addr = %settings.http_addr, "http api listening");
    let http_cancel = cancel.clone();
    let http_task = tokio::spawn(async move {
        axum::serve(listener, router(state, settings.max_body_bytes))
            .with_graceful_shutdown(async move { http_cancel.cancelled().await })
            .await
    });

    shutdown_signal().await;
    tracing::info!("shutting down: no new work, draining in-flight handlers");
    cancel.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(15), results_task).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), sweeper_task).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), http_task).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), gauges_task).await;
    gc_task.abort();
    let _ = tokio::time::timeout(Duration::from_secs(5), bus.flush()).await;
    tracing::info!("stopped");
    telemetry.shutdown();
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {},
                    _ = term.recv() => {},
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
