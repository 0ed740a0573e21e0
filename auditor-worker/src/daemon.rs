//! Start-up and the life of the daemon: connect to NATS (retrying for a while), make sure the
//! topology exists, open the snapshot store, build the judge clients, run the worker loop until
//! cancelled, then drain.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use loopgate_models::{ChatClient, ModelError};
use loopgate_transport::{Bus, BusError, BusOptions, SnapshotError, SnapshotStore};
use tokio_util::sync::CancellationToken;

use crate::audit::Auditor;
use crate::config::AuditorSettings;
use crate::worker::{run_worker, WorkerError, WorkerOptions};

/// How long start-up keeps retrying to reach NATS.
pub const CONNECT_BUDGET: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("NATS unreachable after {secs}s: {source}")]
    Connect {
        secs: u64,
        #[source]
        source: BusError,
    },
    #[error("opening the snapshot store: {0}")]
    Store(#[from] SnapshotError),
    #[error("auditor model '{name}': {source}")]
    Model {
        name: String,
        #[source]
        source: ModelError,
    },
    #[error(transparent)]
    Worker(#[from] WorkerError),
}

/// Connect, retrying with backoff until `budget` is spent; `Ok(None)` when cancelled first.
pub async fn connect_with_retry(
    settings: &AuditorSettings,
    budget: Duration,
    cancel: &CancellationToken,
) -> Result<Option<Bus>, DaemonError> {
    let options = BusOptions {
        name: Some(format!("loopgate-auditor/{}", settings.worker_id)),
        user: settings.nats.user.clone(),
        password: settings.nats.password.clone(),
        ..BusOptions::default()
    };
    let started = Instant::now();
    let mut delay = Duration::from_millis(250);
    loop {
        match Bus::connect(&settings.nats.url, &settings.nats.prefix, options.clone()).await {
            Ok(bus) => return Ok(Some(bus)),
            Err(err) if started.elapsed() + delay < budget => {
                tracing::warn!(url = %settings.nats.url, error = %err, "NATS not reachable yet; retrying");
            }
            Err(source) => {
                return Err(DaemonError::Connect {
                    secs: budget.as_secs(),
                    source,
                })
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => return Ok(None),
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(4));
    }
}

pub fn judge_clients(
    settings: &AuditorSettings,
) -> Result<BTreeMap<String, ChatClient>, DaemonError> {
    settings
        .models
        .iter()
        .map(|(name, profile)| {
            ChatClient::from_profile(profile)
                .map(|client| (name.clone(), client))
                .map_err(|source| DaemonError::Model {
                    name: name.clone(),
                    source,
                })
        })
        .collect()
}

/// Run the auditor until `cancel` fires.
pub async fn run_daemon(
    settings: AuditorSettings,
    cancel: CancellationToken,
) -> Result<(), DaemonError> {
    let judges = judge_clients(&settings)?;
    let Some(bus) = connect_with_retry(&settings, CONNECT_BUDGET, &cancel).await? else {
        return Ok(());
    };
    // Restricted auditor credentials may not be allowed to create streams; the manager's
    // ensure_topology then has done it, and the consumer set-up below says so if not.
    if let Err(err) = bus.ensure_topology().await {
        tracing::warn!(error = %err, "could not ensure the NATS topology; assuming it exists");
    }
    let store = SnapshotStore::new(&bus).await?;
    let auditor = Arc::new(Auditor {
        store,
        work_dir: settings.work_dir.clone(),
        worker_id: settings.worker_id.clone(),
        check_path: settings.check_path.clone(),
        judges,
    });
    let options = WorkerOptions {
        ack_wait: settings.ack_wait,
        shutdown_grace: settings.shutdown_grace,
    };
    let result = run_worker(&bus, auditor, options, cancel).await;
    if let Err(err) = bus.flush().await {
        tracing::warn!(error = %err, "flushing NATS on shutdown");
    }
    Ok(result?)
}
