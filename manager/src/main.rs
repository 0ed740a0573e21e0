//! `loopgate-manager`: parse config, start logging, connect, spawn the HTTP API and the results
//! loop, shut down on SIGTERM/SIGINT.

use loopgate_common::redact::redact_url;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use loopgate_manager::config::{self, EnvOverrides};
use loopgate_manager::run_store::{RunStore, StoreError};
use loopgate_manager::Engine;
use loopgate_manager::ResultsLoop;
use loopgate_manager::SnapshotGc;
use loopgate_manager::{log_report_trust, run_gauges};
use loopgate_manager::{router, ApiState};
use loopgate_manager::{DeadLetterLoop, DeadlineSweeper};
use loopgate_manager::{OutboxRelay, RunAdmission, RELAY_EVERY};
use loopgate_manager::{OverdueResults, OVERDUE_EVERY};
use loopgate_models::{process_env, ChatClient};
use loopgate_snapshot::SnapshotStore;
use loopgate_telemetry::metrics::Metrics;
use loopgate_telemetry::otel::start_from_env;
use loopgate_transport::runtime::{
    retry_with_patience, shutdown_on_signals, FinishedClaims, CONNECT_PATIENCE,
};
use loopgate_transport::{Bus, BusError, BusOptions, ConsumerOptions};
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

/// Waits for `attempt` with the runtime's start-up patience; `None` when shut down first.
async fn with_patience<T, E, F, Fut>(
    what: &str,
    cancel: &CancellationToken,
    retryable: impl Fn(&E) -> bool,
    attempt: F,
) -> anyhow::Result<Option<T>>
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    retry_with_patience(what, CONNECT_PATIENCE, cancel, retryable, attempt)
        .await
        .map_err(|e| anyhow::anyhow!("{what} unreachable after {CONNECT_PATIENCE:?}: {e}"))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let overrides = EnvOverrides {
        nats_url: process_env("LOOPGATE_NATS_URL"),
        redis_url: process_env("LOOPGATE_REDIS_URL"),
        redis_sentinels: process_env("LOOPGATE_REDIS_SENTINELS"),
        redis_master_name: process_env("LOOPGATE_REDIS_MASTER_NAME"),
        http_addr: args
            .http_addr
            .clone()
            .or_else(|| process_env("LOOPGATE_HTTP_ADDR")),
    };
    let settings = config::load(args.config.as_deref(), overrides, &process_env)?;
    let telemetry = Arc::new(start_from_env("loopgate-manager", &process_env)?);
    let metrics = Metrics::new();
    metrics.worker_up.record(
        1,
        &[opentelemetry::KeyValue::new("loopgate.role", "manager")],
    );
    tracing::info!(nats = %redact_url(&settings.nats.url), redis = %settings.redis.describe(), http = %settings.http_addr, "starting");

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
    let cancel = shutdown_on_signals();
    let nats = &settings.nats;
    let Some(bus) = with_patience("NATS", &cancel, BusError::is_retryable, || {
        Bus::connect(&nats.url, &nats.prefix, bus_options.clone())
    })
    .await?
    else {
        return Ok(());
    };
    // [jetstream]: replicas and byte caps of what ensure_topology creates and keeps.
    let bus = bus.with_topology(settings.topology);
    if with_patience(
        "JetStream topology",
        &cancel,
        BusError::is_retryable,
        || bus.ensure_topology(),
    )
    .await?
    .is_none()
    {
        return Ok(());
    }
    let Some(store) = with_patience("Redis", &cancel, StoreError::is_retryable, || {
        RunStore::connect_to(settings.redis.target.clone(), Duration::from_secs(5))
    })
    .await?
    else {
        return Ok(());
    };
    let store = store
        .with_log_limits(settings.run_log_max_entries, Some(settings.retention))
        .with_replica_acks(settings.redis.replica_acks);
    let snapshots = SnapshotStore::from_jetstream(bus.jetstream(), bus.request_timeout())
        .await
        .context("snapshot store")?
        .with_limits(settings.snapshot);
    let evidence = SnapshotStore::evidence_from_jetstream(bus.jetstream(), bus.request_timeout())
        .await
        .context("evidence store")?;
    let engine = Engine::new(bus.clone(), store, settings.retention, metrics)
        .with_admission(settings.max_active_runs.is_some());
    let capabilities = loopgate_transport::runtime::CapabilityBoard::listen(&bus, cancel.clone())
        .await
        .context("capability heartbeats")?;

    log_report_trust(&settings.auditor_keys);
    let results = ResultsLoop {
        engine: engine.clone(),
        models: models.clone(),
        char_budget: settings.prompt_char_budget,
        gui_configured: settings.gui_offered,
        capabilities: capabilities.clone(),
        concurrency: settings.concurrency,
        consumer_options: ConsumerOptions {
            ack_wait: settings.ack_wait,
            max_deliver: settings.max_deliver,
            max_ack_pending: (settings.concurrency as i64) * 4,
        },
        auditor_keys: settings.auditor_keys.clone(),
    };
    let results_task = tokio::spawn(results.run(cancel.clone()));
    let dead_letters = DeadLetterLoop {
        engine: engine.clone(),
        ack_wait: settings.ack_wait,
    };
    let dead_task = tokio::spawn(dead_letters.run(cancel.clone()));
    let sweeper = DeadlineSweeper {
        engine: engine.clone(),
        interval: settings.sweep_interval,
        batch: 100,
        capabilities: Some(loopgate_manager::Serving::new(capabilities.clone())),
    };
    let sweeper_task = tokio::spawn(sweeper.run(cancel.clone()));
    let relay = OutboxRelay {
        engine: engine.clone(),
        every: RELAY_EVERY.min(settings.outbox_republish_after),
        after: settings.outbox_republish_after,
    };
    let relay_task = tokio::spawn(relay.run(cancel.clone()));
    let overdue = OverdueResults {
        engine: engine.clone(),
        claims: FinishedClaims::open(&bus)
            .await
            .context("episode claims bucket")?,
        auditor_keys: settings.auditor_keys.clone(),
        every: (settings.overdue_after / 2).clamp(Duration::from_secs(1), OVERDUE_EVERY),
        quiet_for: settings.overdue_after,
        next_offset: Default::default(),
    };
    let overdue_task = tokio::spawn(overdue.run(cancel.clone()));
    let admission_task = settings.max_active_runs.map(|max_active| {
        let admission = RunAdmission {
            engine: engine.clone(),
            max_active,
            every: settings.sweep_interval,
        };
        tokio::spawn(admission.run(cancel.clone()))
    });
    let gauges_task = tokio::spawn(run_gauges(
        engine.clone(),
        Duration::from_secs(10),
        cancel.clone(),
    ));
    if settings.gc_grace < loopgate_snapshot::MIN_SAFE_GC_GRACE {
        tracing::warn!(grace_secs = settings.gc_grace.as_secs(),
            safe_secs = loopgate_snapshot::MIN_SAFE_GC_GRACE.as_secs(),
            "gc_grace_secs is below the safe minimum: a collection may sweep a blob that a freeze in progress reuses");
    }
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
        allowed_hosts: settings.allowed_hosts.clone(),
        telemetry: telemetry.clone(),
        auditor_keys: settings.auditor_keys.clone(),
        capabilities,
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

    cancel.cancelled().await;
    tracing::info!("shutting down: no new work, draining in-flight handlers");
    let _ = tokio::time::timeout(Duration::from_secs(15), results_task).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), dead_task).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), sweeper_task).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), relay_task).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), overdue_task).await;
    if let Some(task) = admission_task {
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), http_task).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), gauges_task).await;
    gc_task.abort();
    let _ = tokio::time::timeout(Duration::from_secs(5), bus.flush()).await;
    tracing::info!("stopped");
    telemetry.shutdown();
    Ok(())
}
