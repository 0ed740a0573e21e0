//! Process start-up: probe the agent sandbox (bubblewrap is required for agents unless
//! `sandbox = "off"`), which self-checks share (a self-check sees exactly what the agent's
//! `shell` sees), connect the bus (retrying while the server comes up, so `loopgate up` can
//! start everything at once), create the topology, and build the worker context; then one
//! worker loop per capability.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use loopgate_checks::{hidden_paths, probe_agent_sandbox, AgentSandbox, SandboxError};
use loopgate_snapshot::{SnapshotError, SnapshotStore, WorkspaceCache};
use loopgate_transport::runtime::{
    await_topology, connect_bus, EpisodeCancels, EpisodeClaims, EpisodeWorker, TopologyWait,
    CONNECT_PATIENCE,
};
use loopgate_transport::{Bus, BusError, BusOptions, ConsumerOptions, TopologyRole};
use tokio_util::sync::CancellationToken;

use crate::config::Settings;
use crate::episode::EpisodeEnv;
use crate::isolation::AgentIsolationEnv;
use crate::self_check::runner::SelfCheckEnv;
use crate::worker::delivery::{run_worker_loop, WorkerContext};
use crate::worker::work_dir_space::WorkDirSpace;

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
    #[error("agent sandbox: {0}")]
    AgentSandbox(SandboxError),
    #[error("model profile '{name}': {source}")]
    Model {
        name: String,
        #[source]
        source: loopgate_models::ModelError,
    },
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
    // One client per profile for the worker's life: building one loads the system's root
    // certificates, which cost more CPU than a whole round with a local model.
    let models = settings
        .models
        .iter()
        .map(|(name, profile)| {
            loopgate_models::ChatClient::from_profile(profile)
                .map(|client| (name.clone(), client))
                .map_err(|source| StartupError::Model {
                    name: name.clone(),
                    source,
                })
        })
        .collect::<Result<_, _>>()?;
    let work_dir_error = |source| StartupError::WorkDir {
        path: settings.work_dir.display().to_string(),
        source,
    };
    std::fs::create_dir_all(&settings.work_dir).map_err(work_dir_error)?;
    // Absolute from here on: the agent sandbox binds episode dirs by path.
    let work_dir = settings.work_dir.canonicalize().map_err(work_dir_error)?;
    let agent = AgentIsolationEnv {
        sandbox: Arc::new(agent_sandbox(settings, &work_dir).await?),
        network: settings.agent_network,
    };
    let self_check =
        SelfCheckEnv::in_agent_sandbox(agent.clone(), &work_dir, &settings.check_path).await;
    let checks = self_check.sandbox();
    tracing::info!(bubblewrap = ?checks.bwrap, run_as = ?checks.run_as, required = checks.required,
        network = checks.network, layered_copies = checks.overlay.is_some(),
        limitations = ?checks.limitations, "self-check sandbox");
    let nats = &settings.nats;
    let options = bus_options(settings);
    let Some(bus) =
        connect_bus(&nats.url, &nats.prefix, &options, CONNECT_PATIENCE, cancel).await?
    else {
        return Ok(None);
    };
    // Any start order: with restricted credentials, wait for the manager to create the topology.
    if await_topology(&bus, TopologyRole::Executor, cancel, |_| {}).await == TopologyWait::Cancelled
    {
        return Ok(None);
    }
    let store = SnapshotStore::from_jetstream(bus.jetstream(), bus.request_timeout())
        .await?
        .with_limits(settings.snapshot);
    // Episode overlays a killed earlier process of this worker left mounted over its cache.
    let cache_root = WorkspaceCache::worker_root(&work_dir, &settings.worker_id);
    let (dir, root) = (work_dir.clone(), cache_root.clone());
    let stale =
        tokio::task::spawn_blocking(move || loopgate_snapshot::overlay::unmount_stale(&dir, &root))
            .await
            .unwrap_or(0);
    if stale > 0 {
        tracing::warn!(stale, cache = %cache_root.display(), "detached episode overlays a killed earlier process left mounted");
    }
    // On the absolute work dir: overlays name their lower tree by its path.
    let workspaces =
        WorkspaceCache::open_for_worker(&work_dir, &settings.worker_id, settings.cache_bytes);
    let overlays = workspace_overlays(&work_dir, workspaces.is_some(), &agent).await;
    Ok(Some(Arc::new(WorkerContext {
        worker: EpisodeWorker {
            bus: bus.clone(),
            worker_id: settings.worker_id.clone(),
            cancels: EpisodeCancels::new(),
            claims: EpisodeClaims::new(bus.clone(), &settings.worker_id, settings.ack_wait),
            shutdown_grace: settings.shutdown_grace,
        },
        episode: EpisodeEnv {
            store,
            work_dir,
            tools: settings.tools.clone(),
            models,
            agents: settings.agents.clone(),
            self_check,
            agent,
            workspaces,
            overlays: overlays.is_ok(),
        },
        consumer: ConsumerOptions {
            ack_wait: settings.ack_wait,
            max_deliver: settings.max_deliver,
            ..ConsumerOptions::default()
        },
        concurrency: settings.concurrency,
        evidence: open_evidence(&bus).await,
        secrets: Arc::new(known_secrets(settings)),
        space: WorkDirSpace::new(&settings.work_dir, settings.work_dir_min_free_bytes),
        readiness_notes: vec![match overlays {
            Ok(()) => "workspace overlays: on".to_string(),
            Err(why) => format!("workspace overlays: off ({why}); episodes copy their base"),
        }],
    })))
}

/// The evidence bucket (the manager creates it), where episode transcripts go; `None` (logged)
/// when it cannot be opened: episodes then run without a stored transcript.
async fn open_evidence(bus: &Bus) -> Option<SnapshotStore> {
    match SnapshotStore::evidence_from_jetstream(bus.jetstream(), bus.request_timeout()).await {
        Ok(store) => Some(store),
        Err(err) => {
            tracing::warn!(error = %err, "no evidence bucket: episode transcripts will not be stored");
            None
        }
    }
}

/// The secret values this worker holds (model API keys, the values it passes through to CLI
/// agents, its NATS password), to redact from what it writes down.
fn known_secrets(settings: &Settings) -> Vec<String> {
    let keys = settings
        .models
        .values()
        .filter_map(|profile| profile.api_key.as_ref())
        .map(|key| key.expose().to_string());
    let passed = settings
        .agents
        .values()
        .flat_map(|agent| agent.env.iter().map(|(_, value)| value.clone()));
    keys.chain(passed)
        .chain(settings.nats.password.iter().cloned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Can episodes run on overlays here? Needs the warm cache (the lower trees live there), a
/// sandboxed agent (one outside bubblewrap could write the cache's trees) and a working
/// overlay mount under the work dir ([`loopgate_snapshot::overlay::probe`]). `Err`: why not,
/// logged; episodes then copy their base as before.
async fn workspace_overlays(
    work_dir: &Path,
    cache: bool,
    agent: &AgentIsolationEnv,
) -> Result<(), String> {
    let probed = if !cache {
        Err("no warm workspace cache (`[executor] cache_bytes = 0`)".to_string())
    } else if !agent.sandbox.is_sandboxed() {
        Err("agents run unsandboxed".to_string())
    } else {
        let dir = work_dir.to_path_buf();
        tokio::task::spawn_blocking(move || loopgate_snapshot::overlay::probe(&dir))
            .await
            .unwrap_or_else(|err| Err(err.to_string()))
    };
    let available = u64::from(probed.is_ok());
    loopgate_telemetry::metrics::Metrics::new()
        .workspace_overlay_available
        .record(
            available,
            &[opentelemetry::KeyValue::new("loopgate.role", "executor")],
        );
    match &probed {
        Ok(()) => tracing::info!(
            "workspace overlays: on (episodes mount their base, freeze the upper layer)"
        ),
        Err(why) => {
            tracing::warn!(reason = %why, "workspace overlays: off; episodes copy their base")
        }
    }
    probed
}

/// Probe the agent sandbox; `sandbox = "off"` is logged as a warning (every episode's record
/// says so too), a missing or broken bubblewrap otherwise stops start-up.
async fn agent_sandbox(settings: &Settings, work_dir: &Path) -> Result<AgentSandbox, StartupError> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let hidden = hidden_paths(&settings.agent_hidden, &cwd);
    let agent = probe_agent_sandbox(&settings.sandbox, work_dir, hidden)
        .await
        .map_err(StartupError::AgentSandbox)?;
    if agent.is_sandboxed() {
        tracing::info!(bubblewrap = ?agent.bwrap, run_as = ?agent.run_as,
            shell_network = settings.agent_network.shell,
            cli_agent_network = settings.agent_network.cli_agents,
            hidden = ?agent.hidden.iter().map(|h| h.path().display().to_string()).collect::<Vec<_>>(),
            limitations = ?agent.limitations, "agent sandbox");
    } else {
        tracing::warn!(limitations = ?agent.limitations,
            "agents run WITHOUT a sandbox: they can read this worker's environment and files");
    }
    Ok(agent)
}

/// Run one loop per capability until `cancel` fires and every loop has wound down. Control
/// notices are subscribed to first, so none is missed once work is taken.
pub async fn run_workers(ctx: Arc<WorkerContext>, settings: &Settings, cancel: CancellationToken) {
    let listener = match ctx
        .worker
        .cancels
        .listen(&ctx.worker.bus, cancel.clone())
        .await
    {
        Ok(listener) => Some(listener),
        Err(err) => {
            tracing::error!(error = %err, "cannot subscribe to control notices; episodes cannot be cancelled");
            None
        }
    };
    let announcer = tokio::spawn(loopgate_transport::runtime::announce_capabilities(
        ctx.worker.bus.clone(),
        loopgate_transport::runtime::Announcement {
            worker_id: settings.worker_id.clone(),
            role: loopgate_protocol::wire::EpisodeRole::Executor,
            capabilities: settings.capabilities.clone(),
            profiles: settings.profile_names(),
            gui_backends: served_gui_backends(&settings.gui_backends),
        },
        settings.capability_ttl,
        cancel.clone(),
    ));
    // Steps a killed earlier process of this worker held come back to it first (one wait for
    // every capability's loop: the claims do not say which loop took them).
    ctx.worker.claims.wait_for_earlier_claims(&cancel).await;
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
    let _ = announcer.await;
    if let Err(err) = ctx.worker.bus.flush().await {
        tracing::warn!(error = %err, "final flush failed");
    }
}

/// The configured gui backends this host can run: `desktop` only with its programs installed
/// (otherwise it is not announced, and the manager does not offer desktop tasks the route).
fn served_gui_backends(
    configured: &[loopgate_protocol::gui::GuiBackend],
) -> Vec<loopgate_protocol::gui::GuiBackend> {
    use loopgate_protocol::gui::GuiBackend;
    configured
        .iter()
        .copied()
        .filter(|b| match b {
            GuiBackend::Browser => true,
            GuiBackend::Desktop => match loopgate_desktop::missing_tools() {
                None => true,
                Some(missing) => {
                    tracing::warn!(%missing, "gui backend desktop configured but its programs are missing; not announced (scripts/install-deps.sh desktop)");
                    false
                }
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config::{ExecutorFile, ExternalInputs};

    /// Overlays need the warm cache and a sandboxed agent before the mount is even tried;
    /// the reason is what the readiness output says.
    #[tokio::test]
    async fn overlays_are_off_with_the_reason_without_cache_or_sandbox() {
        let dir = tempfile::tempdir().unwrap();
        let unsandboxed = AgentIsolationEnv::unsandboxed("test");
        for (cache, want) in [
            (
                false,
                "no warm workspace cache (`[executor] cache_bytes = 0`)",
            ),
            (true, "agents run unsandboxed"),
        ] {
            let got = workspace_overlays(dir.path(), cache, &unsandboxed).await;
            assert_eq!(got, Err(want.to_string()), "cache {cache}");
        }
    }

    /// What a transcript is redacted with: the model API keys, the values passed through to CLI
    /// agents and the NATS password; an unset variable adds nothing.
    #[test]
    fn known_secrets_are_what_the_worker_was_given() {
        let file = r#"
[nats]
url = "nats://127.0.0.1:14222"
user = "executor"
password_env = "NATS_PW"
[models.local]
provider = "openai"
base_url = "http://127.0.0.1:8080/v1"
model = "qwen"
api_key_env = "MODEL_KEY"
[agents.codex]
kind = "codex"
command = "/opt/bin/codex"
env = ["CODEX_KEY", "UNSET_VAR"]
"#;
        let mut inputs = ExternalInputs {
            hostname: Some("box".into()),
            temp_dir: PathBuf::from("/tmp"),
            ..Default::default()
        };
        for (k, v) in [
            ("NATS_PW", "nats-secret-1"),
            ("MODEL_KEY", "sk-model-2"),
            ("CODEX_KEY", "ck-agent-3"),
        ] {
            inputs.env.insert(k.into(), v.into());
        }
        let settings = ExecutorFile::parse(file, "x")
            .unwrap()
            .resolve(&inputs)
            .unwrap();
        let mut secrets = known_secrets(&settings);
        secrets.sort();
        assert_eq!(secrets, ["ck-agent-3", "nats-secret-1", "sk-model-2"]);
    }
}
