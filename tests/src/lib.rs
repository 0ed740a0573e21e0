//! Cross-binary test harness: a whole loopgate stack (real nats-server, redis-server, the
//! manager, executor and auditor binaries as separate processes) on free loopback ports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use base64::Engine as _;
use loopgate_protocol::report::signing::ReportSigningKey;
use loopgate_test_support::{
    free_port, ChildGuard, FaultProxy, NatsCluster, NatsServer, RedisHa, RedisServer,
};
use serde_json::Value;

pub mod chaos;
mod control_plane;
mod daemons;
pub mod episode_faults;
mod episode_ledger;
mod restarts;
mod role_bus;
mod run_checks;
mod secrets;
mod stack_logs;
mod stack_options;

pub use control_plane::ControlPlane;
use daemons::{start_manager, DaemonSpec};
pub use daemons::{Profile, Worker, LOCAL_MAX_TOKENS, LOCAL_TEMPERATURE};
pub use episode_ledger::{
    attempt_of, check_secs_for, tagged_task, tagged_task_checking_for, Episode, EpisodeLedger,
    Latency, TAGGED_TASK,
};
pub use run_checks::{findings, RunFindings, TimelineEntry, TERMINAL};
pub use secrets::{StackSecrets, MODEL_KEY_ENV};
use stack_options::random_hex;
pub use stack_options::{RolePasswords, StackOptions, USERS_CONF};

/// The env var the daemons of a secured stack read their NATS password from.
const NATS_PASSWORD_ENV: &str = "LG_TEST_NATS_PASSWORD";
/// The env var the managers read their API token from (stacks with `StackOptions::token`).
const API_TOKEN_ENV: &str = "LG_TEST_API_TOKEN";
/// The env var the auditor of a signed stack reads its signing key from.
const SIGNING_KEY_ENV: &str = "LG_TEST_AUDITOR_SIGNING_KEY";

/// What one daemon's config and environment get for NATS (and, for the auditor, signing).
struct Identity {
    nats_toml: String,
    env: Vec<(String, String)>,
}

/// One manager replica.
pub struct ManagerProc {
    pub child: ChildGuard,
    pub http: String,
    /// Between this replica and NATS (`StackOptions::manager_nats_proxy`).
    pub nats_proxy: Option<FaultProxy>,
}

pub struct Stack {
    /// The nats-server (the first node of a cluster).
    pub nats: NatsServer,
    /// The other nodes of a cluster (`StackOptions::nats_nodes`), in order.
    pub nats_peers: Vec<NatsServer>,
    pub redis: RedisServer,
    /// Between the managers and `redis` (`StackOptions::redis_proxy`).
    pub redis_proxy: Option<FaultProxy>,
    /// The managers' Redis when `StackOptions::redis_ha` (then `redis` is unused).
    pub redis_ha: Option<RedisHa>,
    /// The managers' `[redis]` table.
    manager_redis: String,
    /// Between each executor and NATS (`StackOptions::executor_nats_proxy`).
    pub executor_nats_proxies: Vec<FaultProxy>,
    /// Between each auditor and NATS (`StackOptions::auditor_nats_proxy`).
    pub auditor_nats_proxies: Vec<FaultProxy>,
    pub managers: Vec<ManagerProc>,
    pub executors: Vec<ChildGuard>,
    pub auditor: ChildGuard,
    /// Auditors after the first (`StackOptions::auditors`).
    pub more_auditors: Vec<ChildGuard>,
    /// How each executor, then each auditor, was started (for `restart_worker`).
    worker_specs: Vec<DaemonSpec>,
    /// `http://addr` of each worker's metrics endpoint, when `worker_metrics` was set.
    pub worker_metrics: Vec<String>,
    /// The first manager's base URL (tests that use one manager).
    pub http: String,
    pub dir: tempfile::TempDir,
    /// Where the executors' work dirs are when not under `dir` (`StackOptions::executor_work_root`).
    executor_work_root: Option<PathBuf>,
    /// The NATS users' passwords (secured stacks only).
    pub passwords: Option<RolePasswords>,
    /// `DIR/auditor-keys.pub`, the trusted public key (signed stacks only), for
    /// `loopgate verify --key`.
    pub auditor_keys_file: Option<PathBuf>,
    signing_seed: Option<String>,
    /// The bearer token the managers require, if any.
    pub token: Option<String>,
    models: String,
    /// The managers' `[nats]` table.
    manager_nats: String,
    /// Each replica gets its own NATS proxy (`StackOptions::manager_nats_proxy`).
    manager_nats_proxy: bool,
    manager_extra: String,
    env: Vec<(String, String)>,
    spawned_managers: usize,
    /// Managers `kill_manager` took out, kept so their logs outlive them (`copy_logs`).
    retired_managers: Vec<ChildGuard>,
    client: reqwest::Client,
}

/// An executor a test killed mid-episode leaves its episode's overlay mounted under the
/// stack's dir (a worker detaches only its own leftovers, at its next start): detach them, so a
/// test run leaves no mount behind.
impl Drop for Stack {
    fn drop(&mut self) {
        // The executors first: one still running could mount another episode after the sweep.
        for executor in &mut self.executors {
            executor.kill();
        }
        let dir = self.dir.path();
        loopgate_snapshot::overlay::unmount_stale(dir, dir);
        if let Some(root) = &self.executor_work_root {
            loopgate_snapshot::overlay::unmount_stale(root, root);
        }
    }
}

impl Stack {
    pub async fn start(opts: StackOptions) -> anyhow::Result<Stack> {
        let passwords = match &opts.secrets {
            Some(s) => Some(RolePasswords {
                manager: s.nats_manager.clone(),
                executor: s.nats_executor.clone(),
                auditor: s.nats_auditor.clone(),
            }),
            None => opts.secured.then(RolePasswords::random),
        };
        let (nats, nats_peers) = if opts.nats_nodes > 1 {
            anyhow::ensure!(
                passwords.is_none(),
                "a secured stack runs on one nats-server"
            );
            let mut nodes = NatsCluster::start(opts.nats_nodes).await?.into_nodes();
            let first = nodes.remove(0);
            (first, nodes)
        } else {
            let nats = match (&passwords, &opts.nats_store) {
                (Some(_), Some(_)) => bail!("a stack with its own NATS store has no NATS users"),
                (Some(p), None) => NatsServer::start_with_config(&p.server_conf()).await?,
                (None, Some(store)) => NatsServer::start_with_store(store).await?,
                (None, None) => NatsServer::start().await?,
            };
            (nats, Vec::new())
        };
        let nats_url = std::iter::once(&nats)
            .chain(&nats_peers)
            .map(NatsServer::url)
            .collect::<Vec<_>>()
            .join(",");
        if let Some(p) = &passwords {
            // Workers may not create streams: the topology is the manager's, set up before
            // any worker starts (as `loopgate up` starts the manager first).
            let options = loopgate_transport::BusOptions {
                user: Some("manager".into()),
                password: Some(p.manager.clone()),
                ..Default::default()
            };
            let bus = loopgate_transport::Bus::connect(&nats.url(), "loopgate", options).await?;
            bus.ensure_topology().await?;
        }
        let redis = match &opts.secrets {
            Some(s) => RedisServer::start_with_password(&s.redis).await?,
            None if opts.persistent_redis => RedisServer::start_persistent().await?,
            None => RedisServer::start().await?,
        };
        let redis_proxy = if opts.redis_proxy {
            anyhow::ensure!(
                opts.secrets.is_none(),
                "the Redis proxy runs without a password"
            );
            Some(FaultProxy::to_port(redis.port()).await?)
        } else {
            None
        };
        let redis_ha = if opts.redis_ha {
            Some(RedisHa::start().await?)
        } else {
            None
        };
        let manager_redis = match (&redis_ha, &redis_proxy) {
            (Some(ha), _) => format!(
                "[redis]\nsentinels = {}\nmaster_name = \"{}\"\nmin_replicas_acked = 1\n",
                serde_json::to_string(&ha.sentinel_addrs())?,
                ha.master_name()
            ),
            (None, Some(proxy)) => {
                format!("[redis]\nurl = \"redis://127.0.0.1:{}\"\n", proxy.port())
            }
            (None, None) => format!("[redis]\nurl = \"{}\"\n", redis.url()),
        };

        let dir = tempfile::tempdir()?;
        let signing_key = opts.signed.then(|| {
            let seed = random_hex(32);
            let key = ReportSigningKey::parse(&seed).expect("a fresh seed");
            (seed, key)
        });
        let auditor_keys_file = match &signing_key {
            Some((_, key)) => {
                let path = dir.path().join("auditor-keys.pub");
                std::fs::write(&path, format!("{}\n", key.public_key()))?;
                Some(path)
            }
            None => None,
        };
        let identity = |role: &str| -> Identity {
            let mut env = Vec::new();
            let mut nats_toml = format!("[nats]\nurl = \"{nats_url}\"\n");
            if let Some(p) = &passwords {
                nats_toml.push_str(&format!(
                    "user = \"{role}\"\npassword_env = \"{NATS_PASSWORD_ENV}\"\n"
                ));
                env.push((NATS_PASSWORD_ENV.to_string(), p.of(role).to_string()));
            }
            if let (Some((seed, _)), "auditor") = (&signing_key, role) {
                env.push((SIGNING_KEY_ENV.to_string(), seed.clone()));
            }
            if let Some(secrets) = &opts.secrets {
                env.push((MODEL_KEY_ENV.to_string(), secrets.model_key.clone()));
            }
            env.extend(opts.env.iter().cloned());
            Identity { nats_toml, env }
        };
        let models: String = opts
            .profiles
            .iter()
            .map(|p| p.toml(opts.secrets.as_ref().map(|_| MODEL_KEY_ENV)))
            .collect::<Vec<_>>()
            .join("\n");
        let mut worker_metrics = Vec::new();
        let mut metrics_table = || -> anyhow::Result<String> {
            if !opts.worker_metrics {
                return Ok(String::new());
            }
            let port = free_port()?;
            worker_metrics.push(format!("http://127.0.0.1:{port}"));
            Ok(format!("[metrics]\naddr = \"127.0.0.1:{port}\"\n"))
        };
        let mut executors = Vec::new();
        let mut worker_specs = Vec::new();
        let executor = identity("executor");
        let mut executor_nats_proxies = Vec::new();
        for i in 1..=opts.executors {
            let cfg = dir.path().join(format!("executor-{i}.toml"));
            let work = opts
                .executor_work_root
                .as_deref()
                .unwrap_or(dir.path())
                .join(format!("work-exec-{i}"));
            let nats_toml = if opts.executor_nats_proxy {
                anyhow::ensure!(
                    nats_peers.is_empty(),
                    "executor NATS proxies run with one nats-server"
                );
                let proxy = FaultProxy::to_port(nats.port()).await?;
                let proxied = format!("nats://127.0.0.1:{}", proxy.port());
                executor_nats_proxies.push(proxy);
                executor.nats_toml.replace(&nats_url, &proxied)
            } else {
                executor.nats_toml.clone()
            };
            std::fs::write(
                &cfg,
                format!(
                    "{}{}[executor]\nworker_id = \"exec-{i}\"\ncapabilities = {}\nwork_dir = \"{}\"\n{}\n\n{models}",
                    nats_toml,
                    metrics_table()?,
                    serde_json::to_string(&opts.capabilities)?,
                    work.display(),
                    opts.executor_extra
                ),
            )?;
            let spec = DaemonSpec::new(
                &format!("exec-{i}"),
                "loopgate-executor",
                &cfg,
                &executor.env,
            );
            executors.push(spec.spawn()?);
            worker_specs.push(spec);
        }
        let auditor_identity = identity("auditor");
        let signing = if signing_key.is_some() {
            format!("signing_key_env = \"{SIGNING_KEY_ENV}\"\n")
        } else {
            String::new()
        };
        let mut auditors = Vec::new();
        let mut auditor_nats_proxies = Vec::new();
        for i in 1..=opts.auditors.max(1) {
            // The first keeps its historical names (`auditor`, auditor.toml, work-audit).
            let suffix = if i == 1 {
                String::new()
            } else {
                format!("-{i}")
            };
            let audit_cfg = dir.path().join(format!("auditor{suffix}.toml"));
            let nats_toml = if opts.auditor_nats_proxy {
                anyhow::ensure!(
                    nats_peers.is_empty(),
                    "auditor NATS proxies run with one nats-server"
                );
                let proxy = FaultProxy::to_port(nats.port()).await?;
                let proxied = format!("nats://127.0.0.1:{}", proxy.port());
                auditor_nats_proxies.push(proxy);
                auditor_identity.nats_toml.replace(&nats_url, &proxied)
            } else {
                auditor_identity.nats_toml.clone()
            };
            std::fs::write(
                &audit_cfg,
                format!(
                    "{}{}[auditor]\nworker_id = \"audit-{i}\"\nwork_dir = \"{}\"\n{signing}{}\n\n{models}",
                    nats_toml,
                    metrics_table()?,
                    dir.path().join(format!("work-audit{suffix}")).display(),
                    opts.auditor_extra
                ),
            )?;
            let spec = DaemonSpec::new(
                &format!("auditor{suffix}"),
                "loopgate-auditor",
                &audit_cfg,
                &auditor_identity.env,
            );
            auditors.push(spec.spawn()?);
            worker_specs.push(spec);
        }
        let auditor = auditors.remove(0);
        let manager = identity("manager");
        let mut manager_extra = opts.manager_extra;
        if let Some((_, key)) = &signing_key {
            manager_extra.push_str(&format!("\nauditor_keys = [\"{}\"]\n", key.public_key()));
        }
        if !opts.manager_tables.is_empty() {
            manager_extra.push_str(&format!("\n{}\n", opts.manager_tables));
        }
        let mut headers = reqwest::header::HeaderMap::new();
        let mut env = manager.env;
        if let Some(token) = &opts.token {
            headers.insert(
                reqwest::header::AUTHORIZATION,
                reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))?,
            );
            env.push((API_TOKEN_ENV.to_string(), token.clone()));
        }
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .default_headers(headers)
            .build()?;
        let mut stack = Stack {
            nats,
            nats_peers,
            redis,
            redis_proxy,
            redis_ha,
            manager_redis,
            executor_nats_proxies,
            auditor_nats_proxies,
            managers: Vec::new(),
            executors,
            executor_work_root: opts.executor_work_root.clone(),
            auditor,
            more_auditors: auditors,
            worker_specs,
            worker_metrics,
            http: String::new(),
            dir,
            passwords,
            auditor_keys_file,
            signing_seed: signing_key.map(|(seed, _)| seed),
            token: opts.token.clone(),
            models,
            manager_nats: manager.nats_toml,
            manager_nats_proxy: opts.manager_nats_proxy,
            manager_extra,
            env,
            spawned_managers: 0,
            retired_managers: Vec::new(),
            client,
        };
        for _ in 0..opts.managers.max(1) {
            stack.spawn_manager().await?;
        }
        stack.http = stack.managers[0].http.clone();
        Ok(stack)
    }

    /// Start one more manager replica and wait until it is ready.
    pub async fn spawn_manager(&mut self) -> anyhow::Result<()> {
        self.spawned_managers += 1;
        let n = self.spawned_managers;
        let cfg = self.dir.path().join(format!("manager-{n}.toml"));
        let (nats_toml, nats_proxy) = if self.manager_nats_proxy {
            anyhow::ensure!(
                self.nats_peers.is_empty(),
                "manager NATS proxies run with one nats-server"
            );
            let proxy = FaultProxy::to_port(self.nats.port()).await?;
            let proxied = format!("nats://127.0.0.1:{}", proxy.port());
            (
                self.manager_nats.replace(&self.nats.url(), &proxied),
                Some(proxy),
            )
        } else {
            (self.manager_nats.clone(), None)
        };
        let config = |port: u16| -> anyhow::Result<PathBuf> {
            std::fs::write(
                &cfg,
                format!(
                    "{}{}[http]\naddr = \"127.0.0.1:{port}\"\n{}[manager]\n{}\n\n{}",
                    nats_toml,
                    self.manager_redis,
                    if self.token.is_some() {
                        format!("token_env = \"{API_TOKEN_ENV}\"\n")
                    } else {
                        String::new()
                    },
                    self.manager_extra,
                    self.models
                ),
            )?;
            Ok(cfg.clone())
        };
        let (child, http) =
            start_manager(&format!("manager-{n}"), &self.client, &self.env, config).await?;
        self.managers.push(ManagerProc {
            child,
            http,
            nats_proxy,
        });
        Ok(())
    }

    /// kill -9 manager replica `index` (it is removed from the list).
    pub fn kill_manager(&mut self, index: usize) {
        let mut m = self.managers.remove(index);
        m.child.kill();
        self.retired_managers.push(m.child);
    }

    /// SIGTERM every daemon and wait for them to exit (they drain and flush telemetry).
    pub async fn stop_gracefully(&mut self, grace: Duration) {
        for m in &mut self.managers {
            m.child.terminate(grace).await;
        }
        for e in &mut self.executors {
            e.terminate(grace).await;
        }
        self.auditor.terminate(grace).await;
        for a in &mut self.more_auditors {
            a.terminate(grace).await;
        }
    }

    /// The base URL of some live manager.
    pub fn any_http(&self) -> &str {
        self.managers
            .first()
            .map(|m| m.http.as_str())
            .unwrap_or(&self.http)
    }

    /// Submit a task file (TOML text) with an optional starting workspace.
    pub async fn submit(&self, task_toml: &str, files: &[(&str, &str)]) -> anyhow::Result<Value> {
        let task = loopgate_common::task::parse_task_file_toml(task_toml)?;
        let mut body = serde_json::json!({ "task": task });
        if !files.is_empty() {
            let files: Vec<Value> = files
                .iter()
                .map(|(p, c)| {
                    serde_json::json!({"path": p, "mode": 420,
                        "content_b64": base64::engine::general_purpose::STANDARD.encode(c)})
                })
                .collect();
            body["workspace"] = serde_json::json!({ "files": files });
        }
        let r = self
            .client
            .post(format!("{}/v1/runs", self.any_http()))
            .json(&body)
            .send()
            .await?;
        let status = r.status();
        let v: Value = r.json().await?;
        if !status.is_success() {
            bail!("submit failed: {status} {v}");
        }
        Ok(v)
    }

    /// [`Stack::submit`] with no starting files: the new run's id.
    pub async fn submit_id(&self, task_toml: &str) -> anyhow::Result<String> {
        let run = self.submit(task_toml, &[]).await?;
        run["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| anyhow::anyhow!("no run id in {run}"))
    }

    pub async fn post_raw(&self, path: &str, body: &Value) -> anyhow::Result<(u16, Value)> {
        let r = self
            .client
            .post(format!("{}{path}", self.any_http()))
            .json(body)
            .send()
            .await?;
        let status = r.status().as_u16();
        Ok((status, r.json().await.unwrap_or(Value::Null)))
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        let r = self
            .client
            .get(format!("{}{path}", self.any_http()))
            .send()
            .await?;
        let status = r.status();
        let v: Value = r.json().await?;
        if !status.is_success() {
            bail!("GET {path}: {status} {v}");
        }
        Ok(v)
    }

    /// GET `path`: the status and the JSON body, whatever the status.
    pub async fn get_status(&self, path: &str) -> anyhow::Result<(u16, Value)> {
        let r = self
            .client
            .get(format!("{}{path}", self.any_http()))
            .send()
            .await?;
        let status = r.status().as_u16();
        Ok((status, r.json().await.unwrap_or(Value::Null)))
    }

    /// The auditor's signing key (signed stacks only), to sign reports as the pool would.
    pub fn auditor_signing_key(&self) -> Option<ReportSigningKey> {
        self.signing_seed
            .as_deref()
            .and_then(|seed| ReportSigningKey::parse(seed).ok())
    }

    pub async fn run(&self, id: &str) -> anyhow::Result<Value> {
        self.get(&format!("/v1/runs/{id}")).await
    }

    pub async fn log_types(&self, id: &str) -> anyhow::Result<Vec<String>> {
        let log = self.get(&format!("/v1/runs/{id}/log")).await?;
        Ok(log["entries"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|e| e["type"].as_str().unwrap_or("?").to_string())
            .collect())
    }

    /// The run's log entries of one `type` (e.g. `exec_result`), in order.
    pub async fn log_entries(&self, id: &str, kind: &str) -> anyhow::Result<Vec<Value>> {
        let log = self.get(&format!("/v1/runs/{id}/log")).await?;
        let entries = log["entries"].as_array().cloned().unwrap_or_default();
        Ok(entries.into_iter().filter(|e| e["type"] == kind).collect())
    }

    /// Poll until the run is terminal.
    pub async fn wait_terminal(&self, id: &str, timeout: Duration) -> anyhow::Result<Value> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            // 503: the manager cannot vouch for the run's state now (its Redis node is not the
            // primary, mid-failover); asked again, as `loopgate watch` does.
            let (status, v) = self.get_status(&format!("/v1/runs/{id}")).await?;
            if status == 503 && tokio::time::Instant::now() <= deadline {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            if status != 200 {
                bail!("GET /v1/runs/{id}: {status} {v}");
            }
            let state = v["state"].as_str().unwrap_or("");
            if [
                "completed",
                "blocked",
                "budget_exhausted",
                "cancelled",
                "failed",
            ]
            .contains(&state)
            {
                return Ok(v);
            }
            if tokio::time::Instant::now() > deadline {
                bail!(
                    "run {id} still {state} after {timeout:?}: {v}\n{}",
                    self.logs()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Download and verify a snapshot into `dest` (the same checks `loopgate checkout` makes).
    pub async fn checkout(&self, snapshot: &str, dest: &Path) -> anyhow::Result<Vec<PathBuf>> {
        let manifest = self.get(&format!("/v1/snapshots/{snapshot}")).await?;
        let mut written = Vec::new();
        for e in manifest["entries"].as_array().cloned().unwrap_or_default() {
            let path = e["path"].as_str().context("path")?;
            loopgate_protocol::snapshot::validate_relative_path(path)?;
            let sha = e["sha256"].as_str().context("sha")?;
            let bytes = self
                .client
                .get(format!("{}/v1/blobs/{sha}", self.any_http()))
                .send()
                .await?
                .bytes()
                .await?;
            if loopgate_protocol::snapshot::sha256_hex(&bytes) != sha {
                bail!("blob for {path} does not match its digest");
            }
            let target = dest.join(path);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&target, &bytes)?;
            // Keep the executable bit, as `loopgate checkout` does.
            if let Some(mode) = e["mode"].as_u64() {
                use std::os::unix::fs::PermissionsExt;
                let mode = u32::try_from(mode & 0o777).unwrap_or(0o644);
                std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode))?;
            }
            written.push(target);
        }
        Ok(written)
    }
}
