//! Helpers shared by the auditor's integration tests: a real nats-server (open, or with the
//! per-role users of deploy/nats/), frozen candidates, audit requests and reports.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use loopgate_auditor::Sandbox;
use loopgate_auditor::{run_worker, Auditor, AuditorParts, WorkerOptions};
use loopgate_models::{ChatClient, ModelProfileConfig, Provider};
use loopgate_protocol::contract::Contract;
use loopgate_protocol::contract::Criterion;
use loopgate_protocol::wire::{decode, encode, AuditPurpose, AuditReport, AuditRequest, Message};
use loopgate_snapshot::{FreezeRules, SnapshotStore};
use loopgate_test_support::NatsServer;
use loopgate_test_support::StandInModel;
use loopgate_transport::{Bus, BusOptions, ConsumerOptions, Work, WorkConsumer};
use tokio_util::sync::CancellationToken;

pub const REPORT_WAIT: Duration = Duration::from_secs(60);
pub const HELLO: &[u8] = b"print('hello')\n";
/// The per-role users and their permissions: the one source, shared with `loopgate up`.
pub const USERS_CONF: &str = include_str!("../../../deploy/nats/loopgate-users.conf");

pub struct Env {
    pub nats: NatsServer,
    pub url: String,
    /// Connected with full rights (no users) or as the manager (with users).
    pub bus: Bus,
    pub store: SnapshotStore,
    pub evidence: SnapshotStore,
    pub results: WorkConsumer,
    pub passwords: Option<Passwords>,
}

/// Passwords of the three roles when the server runs with deploy/nats/ users.
#[derive(Debug, Clone)]
pub struct Passwords {
    pub manager: String,
    pub executor: String,
    pub auditor: String,
}

impl Passwords {
    pub fn random() -> Passwords {
        let word = || uuid::Uuid::new_v4().simple().to_string();
        Passwords {
            manager: word(),
            executor: word(),
            auditor: word(),
        }
    }

    pub fn of(&self, user: &str) -> &str {
        match user {
            "manager" => &self.manager,
            "executor" => &self.executor,
            _ => &self.auditor,
        }
    }
}

/// deploy/nats/loopgate-users.conf with its password variables defined.
pub fn secured_conf(passwords: &Passwords) -> String {
    format!(
        "LOOPGATE_NATS_MANAGER_PASSWORD: \"{}\"\nLOOPGATE_NATS_EXECUTOR_PASSWORD: \"{}\"\n\
         LOOPGATE_NATS_AUDITOR_PASSWORD: \"{}\"\n{USERS_CONF}",
        passwords.manager, passwords.executor, passwords.auditor
    )
}

pub fn options_for(user: Option<(&str, &str)>) -> BusOptions {
    BusOptions {
        request_timeout: Duration::from_secs(5),
        user: user.map(|(u, _)| u.to_string()),
        password: user.map(|(_, p)| p.to_string()),
        ..BusOptions::default()
    }
}

pub async fn connect_as(url: &str, user: &str, password: &str) -> anyhow::Result<Bus> {
    Ok(Bus::connect(url, "loopgate", options_for(Some((user, password)))).await?)
}

/// Topology, the audit durable (the manager's job) and a results consumer, on `nats`.
async fn finish_env(
    nats: NatsServer,
    bus: Bus,
    passwords: Option<Passwords>,
) -> anyhow::Result<Env> {
    // Streams, buckets and the `audit` durable, as the manager sets them up.
    bus.ensure_topology().await?;
    let store = SnapshotStore::from_jetstream(bus.jetstream(), bus.request_timeout()).await?;
    let evidence =
        SnapshotStore::evidence_from_jetstream(bus.jetstream(), bus.request_timeout()).await?;
    let results = bus
        .work_consumer(Work::Results, ConsumerOptions::default())
        .await?;
    Ok(Env {
        url: nats.url(),
        nats,
        bus,
        store,
        evidence,
        results,
        passwords,
    })
}

/// An open server; `bus` has every right.
pub async fn env() -> anyhow::Result<Env> {
    let nats = NatsServer::start().await?;
    let bus = Bus::connect(&nats.url(), "loopgate", options_for(None)).await?;
    finish_env(nats, bus, None).await
}

/// A server with the per-role users; `bus` is the manager.
pub async fn secured_env(all_interfaces: bool) -> anyhow::Result<Env> {
    let passwords = Passwords::random();
    let conf = secured_conf(&passwords);
    let nats = if all_interfaces {
        NatsServer::start_with_config_on_all_interfaces(&conf).await?
    } else {
        NatsServer::start_with_config(&conf).await?
    };
    let bus = connect_as(&nats.url(), "manager", &passwords.manager).await?;
    finish_env(nats, bus, Some(passwords)).await
}

pub fn criterion(id: &str, check: &str, timeout_secs: u64) -> Criterion {
    Criterion {
        id: id.into(),
        description: format!("{id} holds"),
        check: Some(check.into()),
        blocking: true,
        timeout_secs,
        source: Default::default(),
        clause: None,
    }
}

pub fn contract(criteria: Vec<Criterion>) -> Contract {
    contract_protecting(criteria, vec![])
}

pub fn contract_protecting(criteria: Vec<Criterion>, protected_paths: Vec<String>) -> Contract {
    let mut contract = Contract {
        goal: "Write hello.py that prints hello".into(),
        criteria,
        protected_paths,
        rubric: None,
        writable_paths: Vec::new(),
        spec_hash: String::new(),
    };
    contract.spec_hash = contract.compute_hash();
    contract
}

/// One judge client, profile `name`, asking `model` on the stand-in.
pub fn standin_judges(
    standin: &StandInModel,
    name: &str,
    model: &str,
) -> anyhow::Result<BTreeMap<String, ChatClient>> {
    let profile = ModelProfileConfig {
        provider: Provider::OpenAi,
        base_url: standin.base_url(),
        model: model.into(),
        timeout_secs: 20,
        ..ModelProfileConfig::default()
    }
    .resolve(name, &|_| None)?;
    Ok(BTreeMap::from([(
        name.to_string(),
        ChatClient::from_profile(&profile)?,
    )]))
}

/// Freeze `files` (path, content) as a snapshot; returns its id.
pub async fn freeze(store: &SnapshotStore, files: &[(&str, &[u8])]) -> anyhow::Result<String> {
    let dir = tempfile::tempdir()?;
    for (path, content) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap())?;
        std::fs::write(path, content)?;
    }
    Ok(store.freeze(dir.path(), &FreezeRules::default()).await?.id)
}

/// (base = empty snapshot, candidate = a workspace holding `hello.py`).
pub async fn freeze_hello(store: &SnapshotStore) -> anyhow::Result<(String, String)> {
    let candidate = freeze(store, &[("hello.py", HELLO)]).await?;
    let base = store.freeze_empty().await?;
    Ok((base.id, candidate))
}

/// Overwrite the stored `hello.py` blob with same-length, different bytes: every snapshot that
/// holds it now fails verification.
pub async fn tamper_hello_blob(bus: &Bus) -> anyhow::Result<()> {
    let object_store = bus
        .jetstream()
        .get_object_store(loopgate_protocol::subjects::SNAPSHOT_BUCKET)
        .await?;
    let mut tampered: &[u8] = b"print('HELLO')\n";
    let key = format!("blob/{}", loopgate_protocol::snapshot::sha256_hex(HELLO));
    object_store.put(key.as_str(), &mut tampered).await?;
    Ok(())
}

pub fn request(run_id: &str, contract: Contract, base: &str, candidate: &str) -> AuditRequest {
    AuditRequest {
        mechanical_only: false,
        run_id: run_id.into(),
        generation: 1,
        round: 1,
        purpose: AuditPurpose::Round,
        contract,
        objective: "create hello.py".into(),
        write_scope: vec![],
        base_snapshot: base.into(),
        candidate_snapshot: candidate.into(),
        auditor_profile: None,
        episode_secs: 60,
        gui: None,
        completes_run: false,
        unquoted_met: false,
    }
}

pub async fn publish_raw(bus: &Bus, payload: &[u8], msg_id: &str) -> anyhow::Result<()> {
    let value: serde_json::Value = serde_json::from_slice(payload)?;
    bus.publish_json(&bus.subjects().audit_request(), &value, msg_id, &[])
        .await?;
    Ok(())
}

pub async fn publish_request(bus: &Bus, req: &AuditRequest) -> anyhow::Result<()> {
    let bytes = encode(&Message::AuditRequest(req.clone()));
    publish_raw(bus, &bytes, &format!("{}:1:1:audit:round:1", req.run_id)).await
}

pub async fn next_report(results: &mut WorkConsumer) -> anyhow::Result<AuditReport> {
    let deadline = Instant::now() + REPORT_WAIT;
    while Instant::now() < deadline {
        if let Some(delivery) = results.next(Duration::from_secs(2)).await? {
            delivery.ack().await?;
            match decode(delivery.payload())? {
                Message::AuditReport(report) => return Ok(report),
                // Auditors announce each audit they start and report its progress; reports are
                // what these tests read.
                Message::EpisodeStarted(_) | Message::AuditProgress(_) => {}
                other => bail!("unexpected {} on the results stream", other.kind()),
            }
        }
    }
    bail!("no audit report within {REPORT_WAIT:?}")
}

pub fn worker_options() -> WorkerOptions {
    WorkerOptions {
        ack_wait: Duration::from_secs(30),
        shutdown_grace: Duration::from_secs(5),
        concurrency: 1,
    }
}

/// An in-process auditor built from `parts` on `bus`; stop it by cancelling the token, then
/// await the task.
pub fn spawn_auditor(
    bus: &Bus,
    parts: AuditorParts,
    options: WorkerOptions,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let cancel = CancellationToken::new();
    let bus = bus.clone();
    let token = cancel.clone();
    let auditor = Arc::new(Auditor::new(parts));
    let task = tokio::spawn(async move {
        run_worker(&bus, auditor, options, token).await.unwrap();
    });
    (cancel, task)
}

/// The parts of an in-process auditor with unisolated checks, evidence stored.
pub fn auditor_on(
    env: &Env,
    work_dir: &Path,
    judges: BTreeMap<String, ChatClient>,
) -> AuditorParts {
    AuditorParts {
        store: env.store.clone(),
        evidence: Some(env.evidence.clone()),
        work_dir: work_dir.to_path_buf(),
        worker_id: "audit-in-process".into(),
        check_path: loopgate_auditor::DEFAULT_CHECK_PATH.into(),
        sandbox: Sandbox::unisolated("in-process test"),
        strict_scope: false,
        judges,
        signing_key: None,
        workspaces: None,
    }
}

pub fn spawn_worker(
    env: &Env,
    work_dir: &Path,
    judges: BTreeMap<String, ChatClient>,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    spawn_auditor(
        &env.bus,
        auditor_on(env, work_dir, judges),
        worker_options(),
    )
}

pub fn spawn_worker_with(
    env: &Env,
    work_dir: &Path,
    judges: BTreeMap<String, ChatClient>,
    options: WorkerOptions,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    spawn_auditor(&env.bus, auditor_on(env, work_dir, judges), options)
}

pub fn auditor_command(config: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_loopgate-auditor"));
    command
        .arg("--config")
        .arg(config)
        .env_remove("LOOPGATE_REDIS_URL")
        .env_remove("LOOPGATE_NATS_URL")
        .env("LOOPGATE_LOG", "info");
    command
}

/// No entries besides the worker's warm-workspace cache (`.cache-<worker>`), which outlives
/// audits on purpose.
pub fn dir_is_empty(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .all(|e| e.file_name().to_string_lossy().starts_with(".cache-"))
        })
        .unwrap_or(true)
}

/// A temp dir any user may traverse (a sandboxed check runs as `nobody`).
pub fn open_tempdir() -> anyhow::Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
    Ok(dir)
}

pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// The next message on the results stream within `wait` that is not an audit's progress
/// notice (those are acked and skipped).
pub async fn next_besides_progress(
    results: &mut WorkConsumer,
    wait: Duration,
) -> anyhow::Result<Option<Message>> {
    let deadline = Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        let Some(delivery) = results.next(left).await? else {
            return Ok(None);
        };
        delivery.ack().await?;
        match decode(delivery.payload())? {
            Message::AuditProgress(_) => {}
            other => return Ok(Some(other)),
        }
    }
}
