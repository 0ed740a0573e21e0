//! Process start-up: probe the self-check sandbox (as the auditor probes its own), connect the
//! bus (retrying while the server comes up, so `loopgate up` can start everything at once),
//! create the topology, and build the worker context; then one worker loop per capability.

use std::sync::Arc;

use loopgate_checks::{probe_for, SandboxError};
use loopgate_snapshot::{SnapshotError, SnapshotStore, WorkspaceCache};
use loopgate_transport::runtime::{connect_bus, EpisodeCancels, CONNECT_PATIENCE};
use loopgate_transport::{BusError, BusOptions, ConsumerOptions};
use tokio_util::sync::CancellationToken;

use crate::config::Settings;
use crate::episode::EpisodeEnv;
use crate::self_check::runner::SelfCheckEnv;
use crate::worker::delivery::{run_worker_loop, WorkerContext};

#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error(transparent)]
    Bus(#[from] BusError),
    #[error("opening the snapshot store: {0}")]
    Snapshots(#[from] SnapshotError),
    #[error("creating work dir {path}: {source}")]
    WorkDir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("self-check sandbox: {0}")]
    Sandbox(#[from] SandboxError),
}

pub(crate) fn bus_options(settings: &Settings) -> BusOptions {
    BusOptions {
        name: Some(format!("loopgate-executor {}", settings.worker_id)),
        user: settings.nats.user.clone(),
        password: settings.nats.password.clone(),
        ..BusOptions::default()
    }
}

/// Connect (retrying while NATS comes up), ensure the topology and the work dir, and build the
/// shared worker context; `Ok(None)` when `cancel` fires first.
pub async fn prepare(
    settings: &Settings,
    cancel: &CancellationToken,
) -> Result<Option<Arc<WorkerContext>>, StartupError> {
    std::fs::create_dir_all(&settings.work_dir).map_err(|source| StartupError::WorkDir {
        path: settings.work_dir.display().to_string(),
        source,
    })?;
    let sandbox = probe_for(&settings.sandbox, &settings.work_dir, "executor").await?;
    tracing::info!(bubblewrap = ?sandbox.bwrap, run_as = ?sandbox.run_as, required = sandbox.required,
        limitations = ?sandbox.limitations, "self-check sandbox");
    let nats = &settings.nats;
    let options = bus_options(settings);
    let Some(bus) =
        connect_bus(&nats.url, &nats.prefix, &options, CONNECT_PATIENCE, cancel).await?
    else {
        return Ok(None);
    };
    bus.ensure_topology().await?;
    let store = SnapshotStore::new(&bus).await?;
    let workspaces = open_workspaces(settings);
    Ok(Some(Arc::new(WorkerContext {
        bus,
        episode: EpisodeEnv {
            store,
            work_dir: settings.work_dir.clone(),
            tools: settings.tools.clone(),
            models: settings.models.clone(),
            agents: settings.agents.clone(),
            self_check: SelfCheckEnv {
                sandbox,
                check_path: settings.check_path.clone(),
            },
            workspaces,
        },
        worker_id: settings.worker_id.clone(),
        consumer: ConsumerOptions {
            ack_wait: settings.ack_wait,
            max_deliver: settings.max_deliver,
            ..ConsumerOptions::default()
        },
        shutdown_grace: settings.shutdown_grace,
        cancels: EpisodeCancels::new(),
        concurrency: settings.concurrency,
    })))
}

/// The warm-workspace cache under the work dir (the episode dirs' filesystem: kept trees move
/// by rename), or `None` when `cache_bytes` is 0 or it cannot be set up (logged; episodes then
/// materialize from scratch, as before).
fn open_workspaces(settings: &Settings) -> Option<WorkspaceCache> {
    if settings.cache_bytes == 0 {
        return None;
    }
    let name: String = settings
        .worker_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let root = settings.work_dir.join(format!(".cache-{name}"));
    match WorkspaceCache::open(&root, settings.cache_bytes) {
        Ok(cache) => Some(cache),
        Err(err) => {
            tracing::warn!(error = %err, root = %root.display(), "warm workspace cache off");
            None
        }
    }
}

/// Run one loop per capability until `cancel` fires and every loop has wound down. Control
/// notices are subscribed to first, so none is missed once work is taken.
pub async fn run_workers(ctx: Arc<WorkerContext>, settings: &Settings, cancel: CancellationToken) {
    let listener = match ctx.cancels.listen(&ctx.bus, cancel.clone()).await {
        Ok(listener) => Some(listener),
        Err(err) => {
            tracing::error!(error = %err, "cannot subscribe to control notices; episodes cannot be cancelled");
            None
        }
    };
    let loops: Vec<_> = settings
        .capabilities
        .iter()
        .map(|&capability| tokio::spawn(run_worker_loop(ctx.clone(), capability, cancel.clone())))
        .collect();
    for handle in loops {
        if let Err(err) = handle.await {
            tracing::error!(error = %err, "worker loop ended abnormally");
        }
    }
    if let Some(listener) = listener {
        let _ = listener.await;
    }
    if let Err(err) = ctx.bus.flush().await {
        tracing::warn!(error = %err, "final flush failed");
    }
}
