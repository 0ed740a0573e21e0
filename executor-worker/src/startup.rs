//! Process start-up: connect the bus (retrying while the server comes up, so `loopgate up` can
//! start everything at once), create the topology, and build the worker context.

use std::sync::Arc;
use std::time::{Duration, Instant};

use loopgate_snapshot::{SnapshotError, SnapshotStore};
use loopgate_transport::{Bus, BusError, BusOptions, ConsumerOptions};
use tokio_util::sync::CancellationToken;

use loopgate_transport::control_listener::listen_for_cancels;

use crate::episode::EpisodeEnv;
use crate::episode_cancels::EpisodeCancels;
use crate::settings::Settings;
use crate::worker_loop::{run_worker_loop, WorkerContext};

/// How long start-up keeps retrying the first connection.
pub const CONNECT_PATIENCE: Duration = Duration::from_secs(30);

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
}

pub fn bus_options(settings: &Settings) -> BusOptions {
    BusOptions {
        name: Some(format!("loopgate-executor {}", settings.worker_id)),
        user: settings.nats.user.clone(),
        password: settings.nats.password.clone(),
        ..BusOptions::default()
    }
}

/// Connect, retrying connection failures for up to `patience`. Configuration errors fail at once.
pub async fn connect_with_retry(settings: &Settings, patience: Duration) -> Result<Bus, BusError> {
    let started = Instant::now();
    let mut backoff = Duration::from_millis(250);
    loop {
        match Bus::connect(
            &settings.nats.url,
            &settings.nats.prefix,
            bus_options(settings),
        )
        .await
        {
            Ok(bus) => return Ok(bus),
            Err(err @ BusError::Connect { .. }) if started.elapsed() + backoff < patience => {
                tracing::warn!(error = %err, ?backoff, "NATS not reachable yet; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
            Err(err) => return Err(err),
        }
    }
}

/// Connect, ensure the topology and the work dir, and build the shared worker context.
pub async fn prepare(settings: &Settings) -> Result<Arc<WorkerContext>, StartupError> {
    std::fs::create_dir_all(&settings.work_dir).map_err(|source| StartupError::WorkDir {
        path: settings.work_dir.display().to_string(),
        source,
    })?;
    let bus = connect_with_retry(settings, CONNECT_PATIENCE).await?;
    bus.ensure_topology().await?;
    let store = SnapshotStore::new(&bus).await?;
    Ok(Arc::new(WorkerContext {
        bus,
        episode: EpisodeEnv {
            store,
            work_dir: settings.work_dir.clone(),
            tools: settings.tools.clone(),
            models: settings.models.clone(),
            agents: settings.agents.clone(),
        },
        worker_id: settings.worker_id.clone(),
        consumer: ConsumerOptions {
            ack_wait: settings.ack_wait,
            max_deliver: settings.max_deliver,
            ..ConsumerOptions::default()
        },
        shutdown_grace: settings.shutdown_grace,
        cancels: EpisodeCancels::new(),
    }))
}

/// Run one loop per capability until `cancel` fires and every loop has wound down. Control
/// notices are subscribed to first, so none is missed once work is taken.
pub async fn run_workers(ctx: Arc<WorkerContext>, settings: &Settings, cancel: CancellationToken) {
    let control = ctx.bus.subjects().control_all();
    let listener = match ctx.bus.subscribe_core(&control).await {
        Ok(notices) => {
            let cancels = ctx.cancels.clone();
            Some(tokio::spawn(listen_for_cancels(
                notices,
                cancel.clone(),
                move |n| cancels.cancel(&n.run_id, n.generation),
            )))
        }
        Err(err) => {
            tracing::error!(error = %err, %control, "cannot subscribe to control notices; episodes cannot be cancelled");
            None
        }
    };
    if let Err(err) = ctx.bus.flush().await {
        tracing::warn!(error = %err, "flush after subscribing failed");
    }
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
