//! The manager's own tables in `manager.toml`: `[redis]`, `[http]`, `[manager]`, as written
//! (raw, `deny_unknown_fields`). The manager resolves them (`manager/src/config.rs`); `loopgate
//! up` writes them. `[nats]` is the shared [`NatsSection`](crate::config::NatsSection); the
//! manager's `[jetstream]` and `[models.*]` are its own.

use serde::{Deserialize, Serialize};

/// `[redis]`: the run store. Either `url`, or `sentinels` with `master_name`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Redis Sentinel addresses (`host:port`), asked for the primary of `master_name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sentinels: Option<Vec<String>>,
    /// The name the sentinels monitor the primary under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_name: Option<String>,
    /// With sentinels: the env var holding the data nodes' password (a URL carries its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_env: Option<String>,
    /// With sentinels: the env var holding the sentinels' own password (their `requirepass`);
    /// unset: the sentinels take none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sentinel_password_env: Option<String>,
    /// Replicas that must hold a transition before it is acknowledged (Redis `WAIT`); 0 or
    /// unset: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas_acked: Option<u64>,
    /// How long a transition waits for those replicas, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_ack_timeout_ms: Option<u64>,
}

/// `[http]`: the API.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addr: Option<String>,
    /// Largest accepted `POST /v1/runs` body (the starting workspace rides in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_body_bytes: Option<usize>,
    /// Env var holding the API bearer token. Required when `addr` is not loopback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
    /// Host names (any port) the API answers besides `localhost`, `127.0.0.1` and `[::1]`.
    /// Without a token every request's `Host` must be one of them (and a browser's `Origin`
    /// the API's own); with a token, only when this is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_hosts: Option<Vec<String>>,
}

/// `[manager]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManagerSection {
    /// Upper bound on the manager prompt, in characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_char_budget: Option<usize>,
    /// Results/decisions handled at once by this replica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_wait_secs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_deliver: Option<i64>,
    /// How long terminal runs are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_days: Option<u64>,
    /// How often this replica sweeps `lg:deadlines`, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep_interval_ms: Option<u64>,
    /// How long a run waits without a change before the claim of its episode in flight is
    /// read for a result that never reached it, in seconds (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overdue_after_secs: Option<u64>,
    /// How often unreferenced snapshot blobs are collected (default 3600 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gc_interval_secs: Option<u64>,
    /// Objects younger than this are never collected (default 86400 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gc_grace_secs: Option<u64>,
    /// The routes this deployment may offer (default `["cli", "gui"]`): an upper bound. `gui`
    /// is offered only while a live executor announces it (capability heartbeats with a TTL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<String>>,
    /// Trusted auditor public keys (64 hex digits each). When any are configured (here or
    /// through `auditor_keys_env`), unsigned or badly signed audit reports are refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auditor_keys: Option<Vec<String>>,
    /// Env var holding more trusted auditor public keys (one per line or comma-separated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auditor_keys_env: Option<String>,
    /// Cap on each run's log, in entries (default 10000; trimmed approximately on append).
    /// Live runs also drop entries older than `retention_days`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_log_max_entries: Option<u64>,
    /// Effects of a transition still unpublished after this long are published again by any
    /// replica's outbox relay (default 3000 ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outbox_republish_after_ms: Option<u64>,
    /// Runs allowed to be active (admitted and not terminal) at once; further new runs wait
    /// in `queued`, admitted first come first served as runs end (default: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_active_runs: Option<u64>,
}
