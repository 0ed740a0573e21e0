//! Start-up and the life of the daemon: connect to NATS (retrying for a while), open the
//! snapshot bucket (read only) and the evidence bucket, probe the check sandbox (the auditor's
//! config, key files and work dir hidden from every check), refuse to sign reports when checks
//! would run outside it unless the config allows it, build the judge clients, run the worker
//! loop until cancelled, then drain.
//!
//! The auditor never creates or changes topology: with its restricted NATS user (see
//! deploy/nats/) it may only look up the snapshot and evidence buckets and bind the `audit`
//! durable the manager created. With an all-powerful user (tests, development) it creates
//! the evidence bucket and the durable itself when they are missing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use loopgate_checks::{hidden_paths, probe_hiding, Sandbox, SandboxError};
use loopgate_models::{ChatClient, ModelError};
use loopgate_snapshot::{SnapshotError, SnapshotStore, WorkspaceCache};
use loopgate_telemetry::health::Health;
use loopgate_transport::runtime::{await_topology, connect_bus, TopologyWait};
use loopgate_transport::{Bus, BusError, BusOptions, TopologyRole};
use tokio_util::sync::CancellationToken;

use crate::audit::{Auditor, AuditorParts};
use crate::config::AuditorSettings;
use crate::worker::delivery::{run_worker, WorkerError, WorkerOptions};

/// How long start-up keeps retrying to reach NATS.
pub(crate) const CONNECT_BUDGET: Duration = Duration::from_secs(30);

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
    #[error("acceptance check sandbox: {0}")]
    Sandbox(#[from] SandboxError),
    #[error("auditor model '{name}': {source}")]
    Model {
        name: String,
        #[source]
        source: ModelError,
    },
    #[error("refusing to sign audit reports: {0}")]
    UnsandboxedSigning(String),
    #[error(transparent)]
    Worker(#[from] WorkerError),
}

/// The note every report's gaps carry when reports are signed although checks run outside
/// bubblewrap.
pub(crate) const UNSANDBOXED_SIGNING_GAP: &str = "reports are signed although acceptance checks \
     ran without the bubblewrap sandbox: allow_unsandboxed_signing = true in the auditor config";

/// Can a check running outside bubblewrap as `run_as` (`None`: the auditor's own user, who
/// read the key) read `path`? Judged by its mode bits; when in doubt, yes.
fn readable_by_checks(path: &Path, run_as: Option<(u32, u32)>) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (Some((uid, gid)), Ok(meta)) = (run_as, std::fs::metadata(path)) else {
        return true;
    };
    let mode = meta.mode();
    (meta.uid() == uid && mode & 0o400 != 0)
        || (meta.gid() == gid && mode & 0o040 != 0)
        || mode & 0o004 != 0
}

/// May this auditor sign reports with checks running as `sandbox` says? Always when checks run
/// in bubblewrap (the key file and the config are hidden there) or not at all (`required`).
/// Outside it a check is a plain child process of the auditor: never with a key file the
/// check's user can read; otherwise only with `allow_unsandboxed_signing`, and then every
/// report's gaps say so.
pub(crate) fn check_signing_isolation(
    settings: &AuditorSettings,
    sandbox: &mut Sandbox,
) -> Result<(), DaemonError> {
    if settings.signing_key.is_none() || !sandbox.runs_unsandboxed() {
        return Ok(());
    }
    let why = sandbox.limitations.join("; ");
    if let Some(file) = &settings.signing_key_file {
        if readable_by_checks(file, sandbox.run_as) {
            return Err(DaemonError::UnsandboxedSigning(format!(
                "acceptance checks run outside bubblewrap ({why}) and could read the signing \
                 key file {}; give the key through signing_key_env, or make bubblewrap work here",
                file.display()
            )));
        }
    }
    if !settings.allow_unsandboxed_signing {
        return Err(DaemonError::UnsandboxedSigning(format!(
            "acceptance checks would run outside bubblewrap ({why}), next to what the auditor \
             holds; make bubblewrap work here, set `sandbox = \"required\"`, or set \
             `[auditor] allow_unsandboxed_signing = true` to sign anyway (every report says so)"
        )));
    }
    tracing::warn!(reason = "unsandboxed_signing", limitations = ?sandbox.limitations,
        "reports are signed although acceptance checks run WITHOUT the bubblewrap sandbox \
         (allow_unsandboxed_signing = true)");
    sandbox
        .limitations
        .push(UNSANDBOXED_SIGNING_GAP.to_string());
    Ok(())
}

fn bus_options(settings: &AuditorSettings) -> BusOptions {
    BusOptions {
        name: Some(format!("loopgate-auditor/{}", settings.worker_id)),
        user: settings.nats.user.clone(),
        password: settings.nats.password.clone(),
        ..BusOptions::default()
    }
}

pub(crate) fn judge_clients(
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

/// The evidence bucket: opened, or created when these credentials may (development), else
/// `None` and reports carry only output digests' absence and excerpts.
async fn open_evidence(bus: &Bus) -> Option<SnapshotStore> {
    if let Ok(store) =
        SnapshotStore::evidence_from_jetstream(bus.jetstream(), bus.request_timeout()).await
    {
        return Some(store);
    }
    if let Err(err) = bus.ensure_evidence_bucket().await {
        tracing::warn!(error = %err, "no evidence bucket: check outputs will not be stored");
        return None;
    }
    match SnapshotStore::evidence_from_jetstream(bus.jetstream(), bus.request_timeout()).await {
        Ok(store) => Some(store),
        Err(err) => {
            tracing::warn!(error = %err, "no evidence bucket: check outputs will not be stored");
            None
        }
    }
}

/// Run the auditor until `cancel` fires.
/// `health` turns ready once NATS is connected and the work loop runs; it fails liveness if
/// the loop ends before `cancel`.
pub async fn run_daemon(
    settings: AuditorSettings,
    cancel: CancellationToken,
    health: Health,
) -> Result<(), DaemonError> {
    let judges = judge_clients(&settings)?;
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let hidden = hidden_paths(&settings.check_hidden, &cwd);
    let mut sandbox =
        probe_hiding(&settings.sandbox, &settings.work_dir, "auditor", hidden).await?;
    check_signing_isolation(&settings, &mut sandbox)?;
    tracing::info!(bubblewrap = ?sandbox.bwrap, run_as = ?sandbox.run_as, required = sandbox.required,
        hidden = ?sandbox.hidden.iter().map(|h| h.path().display().to_string()).collect::<Vec<_>>(),
        limitations = ?sandbox.limitations, "acceptance check sandbox");
    if !sandbox.isolates() {
        // Never silent: every evidence item says `isolated: false` and every report's gaps say why.
        tracing::warn!(limitations = ?sandbox.limitations, required = sandbox.required,
            "acceptance checks will run WITHOUT the bubblewrap sandbox");
    }
    let nats = &settings.nats;
    let options = bus_options(&settings);
    let connected = connect_bus(&nats.url, &nats.prefix, &options, CONNECT_BUDGET, &cancel).await;
    let Some(bus) = connected.map_err(|source| DaemonError::Connect {
        secs: CONNECT_BUDGET.as_secs(),
        source,
    })?
    else {
        return Ok(());
    };
    // Any start order: the manager creates the buckets and the `audit` durable; wait for them
    // (no deadline: in Kubernetes the manager may come up long after the auditors).
    if await_topology(&bus, TopologyRole::Auditor, &cancel, |_| {}).await == TopologyWait::Cancelled
    {
        return Ok(());
    }
    let store = SnapshotStore::from_jetstream(bus.jetstream(), bus.request_timeout())
        .await?
        .with_limits(settings.snapshot);
    let evidence = open_evidence(&bus).await;
    match &settings.signing_key {
        Some(key) => tracing::info!(key_id = key.key_id(), public_key = %key.public_key(),
            "audit reports are signed with this key (managers list it in [manager] auditor_keys)"),
        None => tracing::warn!(
            "no [auditor] signing_key_env / signing_key_file: audit reports go out unsigned, \
             and managers that trust auditor keys refuse them"
        ),
    }
    let auditor = Arc::new(Auditor::new(AuditorParts {
        store,
        evidence,
        work_dir: settings.work_dir.clone(),
        worker_id: settings.worker_id.clone(),
        check_path: loopgate_checks::with_loopgate_dir(&settings.check_path, &sandbox),
        sandbox,
        strict_scope: settings.strict_scope,
        judges,
        signing_key: settings.signing_key.clone(),
        workspaces: WorkspaceCache::open_for_worker(
            &settings.work_dir,
            &settings.worker_id,
            settings.cache_bytes,
        ),
    }));
    let options = WorkerOptions {
        ack_wait: settings.ack_wait,
        shutdown_grace: settings.shutdown_grace,
        concurrency: settings.concurrency,
    };
    let connection = bus.clone();
    health.add_ready_check("nats connection", move || connection.is_connected());
    health.add_ready_check("work loop", || true);
    let publishes = bus.clone();
    health.add_ready_reason("jetstream publish", move || publishes.publish_stall());
    // The model profile names this auditor serves, announced until the loop ends (names only).
    let stop_announcing = cancel.child_token();
    let announcer = tokio::spawn(loopgate_transport::runtime::announce_capabilities(
        bus.clone(),
        loopgate_transport::runtime::Announcement {
            worker_id: settings.worker_id.clone(),
            role: loopgate_protocol::wire::EpisodeRole::Auditor,
            capabilities: Vec::new(),
            profiles: settings.profile_names(),
            gui_backends: Vec::new(),
        },
        Duration::from_secs(loopgate_protocol::capabilities::DEFAULT_CAPABILITY_TTL_SECS),
        stop_announcing.clone(),
    ));
    let stopped = cancel.clone();
    let result = run_worker(&bus, auditor, options, cancel).await;
    stop_announcing.cancel();
    let _ = announcer.await;
    if !stopped.is_cancelled() {
        health.fail("the work loop ended");
    }
    if let Err(err) = bus.flush().await {
        tracing::warn!(error = %err, "flushing NATS on shutdown");
    }
    Ok(result?)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::config::{parse_config, HostFacts};
    use std::os::unix::fs::PermissionsExt;

    const SEED: &str = "0707070707070707070707070707070707070707070707070707070707070707";

    fn settings(signing: &str, allow: bool) -> AuditorSettings {
        let text = format!("[auditor]\n{signing}allow_unsandboxed_signing = {allow}\n");
        let host = HostFacts {
            hostname: "box".into(),
            pid: 1,
            temp_dir: "/tmp".into(),
        };
        parse_config(&text)
            .unwrap()
            .resolve(&|name| (name == "LG_SIGN").then(|| SEED.to_string()), &host)
            .unwrap()
    }

    #[test]
    fn signing_with_unsandboxed_checks_table() {
        let dir = tempfile::tempdir().unwrap();
        let key = |mode: u32| {
            let path = dir.path().join(format!("key-{mode:o}"));
            std::fs::write(&path, SEED).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            format!("signing_key_file = {:?}\n", path.display().to_string())
        };
        let (env, private, public) = (
            "signing_key_env = \"LG_SIGN\"\n".to_string(),
            key(0o600),
            key(0o644),
        );
        let isolated = Sandbox {
            bwrap: Some("/usr/bin/bwrap".into()),
            ..Sandbox::unisolated("test")
        };
        let as_own_user = Sandbox::unisolated("no bwrap");
        let as_other_user = Sandbox {
            run_as: Some((65534, 65534)),
            ..Sandbox::unisolated("no bwrap")
        };
        let required = Sandbox {
            required: true,
            ..Sandbox::unisolated("no bwrap")
        };
        // (signing lines, allow, sandbox, Ok(gap added) or Err(the refusal names this))
        let cases: Vec<(&str, bool, &Sandbox, Result<bool, &str>)> = vec![
            ("", false, &as_own_user, Ok(false)),
            (&env, false, &isolated, Ok(false)),
            (&public, false, &isolated, Ok(false)),
            (&env, false, &required, Ok(false)),
            (
                &env,
                false,
                &as_own_user,
                Err("allow_unsandboxed_signing = true"),
            ),
            (&env, true, &as_own_user, Ok(true)),
            (&private, true, &as_other_user, Ok(true)),
            (
                &public,
                true,
                &as_other_user,
                Err("could read the signing key file"),
            ),
            (
                &private,
                true,
                &as_own_user,
                Err("could read the signing key file"),
            ),
        ];
        for (signing, allow, sandbox, want) in cases {
            let mut sandbox = sandbox.clone();
            let before = sandbox.limitations.len();
            let got = check_signing_isolation(&settings(signing, allow), &mut sandbox);
            let case = format!("{signing:?} allow={allow} {sandbox:?}");
            match (got, want) {
                (Ok(()), Ok(gap)) => {
                    assert_eq!(
                        sandbox.limitations.len(),
                        before + usize::from(gap),
                        "{case}"
                    );
                    if gap {
                        assert_eq!(sandbox.limitations.last().unwrap(), UNSANDBOXED_SIGNING_GAP);
                    }
                }
                (Err(err), Err(names)) => {
                    assert!(matches!(err, DaemonError::UnsandboxedSigning(_)), "{case}");
                    assert!(err.to_string().contains(names), "{case}: {err}");
                    assert!(!err.to_string().contains(SEED), "{err}");
                }
                (got, want) => panic!("{case}: got {got:?}, want {want:?}"),
            }
        }
    }
}
