//! How a test stack is shaped ([`StackOptions`]) and the per-role NATS passwords of a secured
//! one.

use std::path::PathBuf;

use crate::{Profile, StackSecrets};

pub struct StackOptions {
    pub profiles: Vec<Profile>,
    pub executors: usize,
    /// Manager replicas (each with its own HTTP port, all sharing NATS and Redis).
    pub managers: usize,
    /// Extra keys for the managers' `[manager]` table (e.g. `ack_wait_secs = 3`).
    pub manager_extra: String,
    /// Extra keys for the executors' `[executor]` table.
    pub executor_extra: String,
    /// Extra keys for the auditor's `[auditor]` table (e.g. `concurrency = 4`).
    pub auditor_extra: String,
    /// Extra environment for every daemon (e.g. `OTEL_*`).
    pub env: Vec<(String, String)>,
    /// Give every worker a `[metrics] addr` (see `Stack::worker_metrics`).
    pub worker_metrics: bool,
    /// Run nats-server with the project's per-role users (deploy/nats/loopgate-users.conf,
    /// random passwords): every daemon connects as its own role (see `Stack::passwords`).
    pub secured: bool,
    /// Give the auditor a fresh Ed25519 signing key and the managers its public key in
    /// `[manager] auditor_keys` (see `Stack::auditor_keys_file`).
    pub signed: bool,
    /// Per-role NATS users, a Redis password and a model API key, all with these values
    /// (implies `secured`, with these passwords).
    pub secrets: Option<StackSecrets>,
    /// The executors' `capabilities` (default `["cli"]`).
    pub capabilities: Vec<&'static str>,
    /// A bearer token the managers' API requires (`[http] token_env`); the stack's own
    /// requests send it (see `Stack::token`).
    pub token: Option<String>,
    /// Auditor workers (default 1; `audit-1`, `audit-2`, ...).
    pub auditors: usize,
    /// Extra tables for the managers' config after `[manager]` (e.g. `[jetstream]`).
    pub manager_tables: String,
    /// Redis with its append-only file, so a `kill -9` and restart keeps the run store.
    pub persistent_redis: bool,
    /// nats-server nodes: 1 (default) or a JetStream cluster of this many (every daemon gets
    /// every node's URL; `Stack::nats` is the first node, `Stack::nats_peers` the others).
    pub nats_nodes: usize,
    /// The managers reach Redis through a fault proxy (`Stack::redis_proxy`).
    pub redis_proxy: bool,
    /// Redis with failover (`Stack::redis_ha`: a primary, a replica and three sentinels): the
    /// managers find the primary through the sentinels and wait for the replica on every
    /// transition (`min_replicas_acked = 1`).
    pub redis_ha: bool,
    /// Each executor reaches NATS through its own fault proxy (`Stack::executor_nats_proxies`,
    /// in executor order); one nats-server only.
    pub executor_nats_proxy: bool,
    /// Each manager replica reaches NATS through its own fault proxy
    /// (`ManagerProc::nats_proxy`); one nats-server only.
    pub manager_nats_proxy: bool,
    /// Each auditor reaches NATS through its own fault proxy (`Stack::auditor_nats_proxies`,
    /// in auditor order); one nats-server only.
    pub auditor_nats_proxy: bool,
    /// The executors' work dirs under this directory (`work-exec-N`), e.g. a small tmpfs;
    /// default the stack's own directory.
    pub executor_work_root: Option<PathBuf>,
    /// nats-server's JetStream store in this directory (e.g. a small tmpfs); one nats-server,
    /// no per-role users. Default: the server's own temp dir.
    pub nats_store: Option<PathBuf>,
}

impl StackOptions {
    pub fn new(profiles: Vec<Profile>, executors: usize) -> Self {
        StackOptions {
            profiles,
            executors,
            managers: 1,
            manager_extra: String::new(),
            executor_extra: String::new(),
            auditor_extra: String::new(),
            env: Vec::new(),
            worker_metrics: false,
            secured: false,
            signed: false,
            secrets: None,
            capabilities: vec!["cli"],
            token: None,
            auditors: 1,
            manager_tables: String::new(),
            persistent_redis: false,
            nats_nodes: 1,
            redis_proxy: false,
            redis_ha: false,
            executor_nats_proxy: false,
            manager_nats_proxy: false,
            auditor_nats_proxy: false,
            executor_work_root: None,
            nats_store: None,
        }
    }

    /// Per-role NATS users and signed audit reports, as `loopgate up` and the prod overlay run.
    pub fn hardened(mut self) -> Self {
        self.secured = true;
        self.signed = true;
        self
    }
}

/// The per-role users and their permissions: the one source, shared with `loopgate up`.
pub const USERS_CONF: &str = include_str!("../../deploy/nats/loopgate-users.conf");

/// Passwords of the three NATS users when the stack runs with per-role users.
#[derive(Debug, Clone)]
pub struct RolePasswords {
    pub manager: String,
    pub executor: String,
    pub auditor: String,
}

impl RolePasswords {
    pub(crate) fn random() -> RolePasswords {
        RolePasswords {
            manager: random_hex(16),
            executor: random_hex(16),
            auditor: random_hex(16),
        }
    }

    /// The password of `user` (`manager`, `executor` or `auditor`).
    pub fn of(&self, user: &str) -> &str {
        match user {
            "manager" => &self.manager,
            "executor" => &self.executor,
            _ => &self.auditor,
        }
    }

    /// deploy/nats/loopgate-users.conf with its password variables defined.
    pub(crate) fn server_conf(&self) -> String {
        format!(
            "LOOPGATE_NATS_MANAGER_PASSWORD: \"{}\"\nLOOPGATE_NATS_EXECUTOR_PASSWORD: \"{}\"\n\
             LOOPGATE_NATS_AUDITOR_PASSWORD: \"{}\"\n{USERS_CONF}",
            self.manager, self.executor, self.auditor
        )
    }
}

/// `bytes` random bytes (from /dev/urandom) as hex digits.
pub(crate) fn random_hex(bytes: usize) -> String {
    use std::io::Read;
    let mut buf = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .expect("/dev/urandom");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}
