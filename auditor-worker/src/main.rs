//! `loopgate-auditor --config auditor.toml`: the auditor worker daemon.

use loopgate_common::redact::redact_url;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use loopgate_auditor::{load_config, run_daemon, AuditorSettings, HostFacts};
use loopgate_checks::seal_process;
use std::sync::Arc;

use loopgate_telemetry::health::Health;
use loopgate_telemetry::metrics::Metrics;
use loopgate_telemetry::metrics_server::serve_metrics;
use loopgate_telemetry::otel::{start_from_env, Telemetry};
use loopgate_transport::runtime::shutdown_on_signals;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Parser)]
#[command(name = "loopgate-auditor", version, about = "loopgate auditor worker")]
struct Cli {
    /// Path to auditor.toml.
    #[arg(long)]
    config: PathBuf,
}

/// The settings from `--config` and the process environment, read once.
fn load_settings(cli: &Cli) -> anyhow::Result<AuditorSettings> {
    let raw = load_config(&cli.config)?;
    let env: std::collections::HashMap<String, String> = std::env::vars().collect();
    Ok(raw.resolve_at(
        &|name| env.get(name).cloned(),
        &HostFacts::current(),
        Some(&cli.config),
    )?)
}

async fn run(settings: AuditorSettings, telemetry: Arc<Telemetry>) -> anyhow::Result<()> {
    tracing::info!(worker = %settings.worker_id, nats = %redact_url(&settings.nats.url),
        work_dir = %settings.work_dir.display(), models = ?settings.models.keys().collect::<Vec<_>>(),
        "configuration loaded");
    let cancel = shutdown_on_signals();
    Metrics::new().worker_up.record(
        1,
        &[opentelemetry::KeyValue::new("loopgate.role", "auditor")],
    );
    // /healthz and /readyz: ready while NATS is connected and the work loop runs; not ready
    // from SIGTERM on. The endpoint itself outlives the shutdown token (metrics during drain).
    let health = Health::default();
    health.stop_on(&cancel);
    if let Some(addr) = settings.metrics_addr {
        let bound =
            serve_metrics(addr, telemetry, health.clone(), CancellationToken::new()).await?;
        tracing::info!(%bound, "metrics endpoint listening");
    }
    run_daemon(settings, cancel, health).await?;
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Still one thread: read the config, the key and the environment, then seal the process
    // (secret variables removed, non-dumpable: no check can read them from
    // `/proc/<auditor>`) before telemetry or the async runtime start any thread.
    let settings = load_settings(&cli);
    let sealed = match &settings {
        Ok(settings) => seal_process(settings.secret_vars.iter().map(String::as_str)),
        Err(_) => Ok(()),
    };
    let telemetry = match start_from_env("loopgate-auditor", &|k| std::env::var(k).ok()) {
        Ok(t) => Arc::new(t),
        Err(err) => {
            tracing::error!(error = %err, "invalid telemetry configuration");
            return ExitCode::from(2);
        }
    };
    if let Err(err) = sealed {
        tracing::error!(error = %err, reason = "seal_failed",
            "cannot keep this worker's secrets from its checks");
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
    let result = match settings {
        Ok(settings) => runtime.block_on(run(settings, telemetry.clone())),
        Err(err) => Err(err),
    };
    let code = match result {
        Ok(()) => {
            tracing::info!("auditor exited cleanly");
            ExitCode::SUCCESS
        }
        Err(err) => {
            // Every error here already names its cause in its own message.
            tracing::error!(error = %err, "auditor failed");
            ExitCode::FAILURE
        }
    };
    drop(runtime);
    telemetry.shutdown();
    code
}
