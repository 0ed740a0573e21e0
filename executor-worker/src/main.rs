//! `loopgate-executor`: flags, config and env resolved once, the process sealed (the
//! variables its secrets came from removed from its environment, non-dumpable: nothing it
//! starts — agents, self-checks — can read them from `/proc/<executor>`), then the worker loops
//! until SIGTERM/SIGINT.

use loopgate_common::redact::redact_url;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use loopgate_executor::{prepare, run_workers};
use loopgate_executor::{ExecutorFile, ExternalInputs, Settings};
use loopgate_protocol::subjects::Capability;
use std::sync::Arc;

use loopgate_telemetry::health::Health;
use loopgate_telemetry::metrics::Metrics;
use loopgate_telemetry::metrics_server::serve_metrics;
use loopgate_telemetry::otel::{start_from_env, Telemetry};
use loopgate_transport::runtime::shutdown_on_signals;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum CapabilityFlag {
    Cli,
    Gui,
}

impl From<CapabilityFlag> for Capability {
    fn from(flag: CapabilityFlag) -> Self {
        match flag {
            CapabilityFlag::Cli => Capability::Cli,
            CapabilityFlag::Gui => Capability::Gui,
        }
    }
}

/// loopgate executor worker: runs agent episodes and freezes their workspaces.
#[derive(Debug, Parser)]
#[command(name = "loopgate-executor", version)]
struct Flags {
    /// executor.toml
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Overrides `[executor].worker_id`.
    #[arg(long)]
    worker_id: Option<String>,
    /// Overrides `[executor].capabilities` (repeatable).
    #[arg(long = "capability", value_enum)]
    capabilities: Vec<CapabilityFlag>,
}

fn hostname(env: &BTreeMap<String, String>) -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| env.get("HOSTNAME").cloned())
}

fn load_settings(flags: Flags) -> Result<Settings, loopgate_executor::SettingsError> {
    let file = match &flags.config {
        Some(path) => ExecutorFile::load(path)?,
        None => ExecutorFile::default(),
    };
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let inputs = ExternalInputs {
        worker_id_flag: flags.worker_id,
        capability_flags: flags
            .capabilities
            .into_iter()
            .map(Capability::from)
            .collect(),
        hostname: hostname(&env),
        pid: std::process::id(),
        temp_dir: std::env::temp_dir(),
        config_path: flags.config.clone(),
        env,
    };
    file.resolve(&inputs)
}

fn main() -> ExitCode {
    let flags = Flags::parse();
    // Still one thread: read the config and the environment, then seal the process before
    // telemetry or the async runtime start any thread.
    let settings = load_settings(flags);
    let sealed = match &settings {
        Ok(settings) => {
            loopgate_checks::seal_process(settings.secret_vars.iter().map(String::as_str))
        }
        Err(_) => Ok(()),
    };
    let telemetry = match start_from_env("loopgate-executor", &|k| std::env::var(k).ok()) {
        Ok(t) => Arc::new(t),
        Err(err) => {
            tracing::error!(error = %err, "invalid telemetry configuration");
            return ExitCode::from(2);
        }
    };
    let settings = match settings {
        Ok(settings) => settings,
        Err(err) => {
            tracing::error!(error = %err, "invalid configuration");
            return ExitCode::from(2);
        }
    };
    if let Err(err) = sealed {
        tracing::error!(error = %err, reason = "seal_failed",
            "cannot keep this worker's secrets from what it starts");
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            tracing::error!(error = %err, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(run(settings, telemetry.clone()));
    drop(runtime);
    telemetry.shutdown();
    code
}

async fn run(settings: Settings, telemetry: Arc<Telemetry>) -> ExitCode {
    tracing::info!(
        worker_id = %settings.worker_id,
        capabilities = ?settings.capabilities,
        work_dir = %settings.work_dir.display(),
        nats = %redact_url(&settings.nats.url),
        models = ?settings.models.keys().collect::<Vec<_>>(),
        agents = ?settings.agents.keys().collect::<Vec<_>>(),
        "starting"
    );

    let cancel = shutdown_on_signals();
    Metrics::new().worker_up.record(
        1,
        &[opentelemetry::KeyValue::new("loopgate.role", "executor")],
    );
    // /healthz and /readyz: ready while NATS is connected and the work loops run; not ready
    // from SIGTERM on. The endpoint itself outlives the shutdown token (metrics during drain).
    let health = Health::default();
    health.stop_on(&cancel);
    if let Some(addr) = settings.metrics_addr {
        match serve_metrics(addr, telemetry, health.clone(), CancellationToken::new()).await {
            Ok(bound) => tracing::info!(%bound, "metrics endpoint listening"),
            Err(err) => {
                tracing::error!(error = %err, %addr, "cannot bind the metrics endpoint");
                return ExitCode::FAILURE;
            }
        }
    }
    let ctx = match prepare(&settings, &cancel).await {
        Ok(Some(ctx)) => ctx,
        Ok(None) => {
            tracing::info!("stopped during start-up");
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            tracing::error!(error = %err, "start-up failed");
            return ExitCode::FAILURE;
        }
    };
    let bus = ctx.worker.bus.clone();
    health.add_ready_check("nats connection", move || bus.is_connected());
    health.add_ready_check("work loops", || true);
    let publishes = ctx.worker.bus.clone();
    health.add_ready_reason("jetstream publish", move || publishes.publish_stall());
    let space = ctx.clone();
    health.add_ready_reason("work dir space", move || space.work_dir_space());
    for note in &ctx.readiness_notes {
        health.add_note(note);
    }
    let stopped = cancel.clone();
    run_workers(ctx, &settings, cancel).await;
    if !stopped.is_cancelled() {
        health.fail("the work loops ended");
    }
    tracing::info!("stopped");
    ExitCode::SUCCESS
}
