//! Manager configuration: the raw file (`deny_unknown_fields`) + env + flags, resolved once.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use loopgate_common::config::{
    ConfigError, HttpSection, ManagerSection, NatsSection, NatsSettings, RedisSection,
    SnapshotLimits, SnapshotSection,
};
use loopgate_models::{resolve_profiles, ModelConfigError, ModelProfile, ModelProfiles};
use loopgate_protocol::report::signing::{AuditorPublicKey, TrustedKeys};
use loopgate_transport::TopologyOptions;
use serde::Deserialize;

use crate::run_store::{RedisTarget, ReplicaAcks};

pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";
pub const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:7600";
/// `[manager] run_log_max_entries` when unset.
pub const DEFAULT_RUN_LOG_MAX_ENTRIES: u64 = 10_000;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub nats: NatsSection,
    #[serde(default)]
    pub redis: RedisSection,
    #[serde(default)]
    pub http: HttpSection,
    #[serde(default)]
    pub manager: ManagerSection,
    #[serde(default)]
    pub jetstream: JetStreamSection,
    /// `[snapshot]`: the largest snapshot the API reads (shared with the workers).
    #[serde(default)]
    pub snapshot: SnapshotSection,
    #[serde(default)]
    pub models: ModelProfiles,
}

/// `[jetstream]`: how the manager sizes the streams and buckets it creates. Unset `replicas`
/// and bucket caps leave the server's defaults (1 replica, no byte cap) and never update what
/// exists; an unset `stream_max_bytes` is [`DEFAULT_STREAM_MAX_BYTES`].
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JetStreamSection {
    /// Replicas of every stream and bucket: 1, 3 or 5 (3 survives one node of a cluster).
    pub replicas: Option<usize>,
    /// Byte cap of each `LG_*` stream (default [`DEFAULT_STREAM_MAX_BYTES`]).
    pub stream_max_bytes: Option<i64>,
    /// Byte cap of the snapshot bucket.
    pub snapshot_max_bytes: Option<i64>,
    /// Byte cap of the evidence bucket.
    pub evidence_max_bytes: Option<i64>,
    /// `ack_wait` of the `audit` durable, in seconds (3-3600): how soon an audit whose auditor
    /// died or was cut off is delivered to another. Unset: 30 s when the durable is created,
    /// an existing one left as it is; set: the durable is updated to it.
    pub audit_ack_wait_secs: Option<u64>,
}

impl JetStreamSection {
    pub fn resolve(&self) -> Result<TopologyOptions, ConfigError> {
        if let Some(r) = self.replicas {
            if ![1, 3, 5].contains(&r) {
                return Err(ConfigError::invalid(
                    "jetstream.replicas",
                    format!("{r}: must be 1, 3 or 5"),
                ));
            }
        }
        for (key, value) in [
            ("jetstream.stream_max_bytes", self.stream_max_bytes),
            ("jetstream.snapshot_max_bytes", self.snapshot_max_bytes),
            ("jetstream.evidence_max_bytes", self.evidence_max_bytes),
        ] {
            if value.is_some_and(|v| v < MIN_MAX_BYTES) {
                return Err(ConfigError::invalid(
                    key,
                    format!("must be at least {MIN_MAX_BYTES} bytes"),
                ));
            }
        }
        if let Some(secs) = self.audit_ack_wait_secs {
            if !(3..=3600).contains(&secs) {
                return Err(ConfigError::invalid(
                    "jetstream.audit_ack_wait_secs",
                    format!("{secs}: must be 3-3600"),
                ));
            }
        }
        Ok(TopologyOptions {
            audit_ack_wait: self.audit_ack_wait_secs.map(Duration::from_secs),
            replicas: self.replicas,
            stream_max_bytes: Some(self.stream_max_bytes.unwrap_or(DEFAULT_STREAM_MAX_BYTES)),
            snapshot_max_bytes: self.snapshot_max_bytes,
            evidence_max_bytes: self.evidence_max_bytes,
        })
    }
}

/// Smallest byte cap accepted (1 MiB): below it a single snapshot chunk would not fit.
const MIN_MAX_BYTES: i64 = 1 << 20;
/// Byte cap of each `LG_*` stream when `[jetstream]
/// stream_max_bytes` is unset: 256 MiB. Requests, results and events are a few KiB each, so
/// this holds tens of thousands of them, and the five streams reserve 1.25 GiB of JetStream's
/// storage (which refuses caps beyond what it may use). A full work stream refuses new
/// publishes (the outbox retries them) instead of filling the volume, and a full event stream
/// drops its oldest.
pub const DEFAULT_STREAM_MAX_BYTES: i64 = 256 << 20;

/// Values read from the environment once in `main`.
#[derive(Debug, Default, Clone)]
pub struct EnvOverrides {
    pub nats_url: Option<String>,
    pub redis_url: Option<String>,
    /// `LOOPGATE_REDIS_SENTINELS`: comma-separated `host:port` list.
    pub redis_sentinels: Option<String>,
    /// `LOOPGATE_REDIS_MASTER_NAME`.
    pub redis_master_name: Option<String>,
    pub http_addr: Option<String>,
}

/// `[redis] replica_ack_timeout_ms` when unset.
pub const DEFAULT_REPLICA_ACK_TIMEOUT: Duration = Duration::from_millis(1000);

/// The run store: where its primary is, and the replicas a write waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisSettings {
    pub target: RedisTarget,
    pub replica_acks: Option<ReplicaAcks>,
}

impl RedisSettings {
    /// For logs, without passwords.
    pub fn describe(&self) -> String {
        self.target.describe()
    }
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub nats: NatsSettings,
    pub redis: RedisSettings,
    pub http_addr: SocketAddr,
    pub max_body_bytes: usize,
    pub prompt_char_budget: usize,
    pub concurrency: usize,
    pub ack_wait: Duration,
    pub max_deliver: i64,
    pub retention: Duration,
    pub sweep_interval: Duration,
    /// `overdue_after_secs`: a run this long without a change has its episode's claim read.
    pub overdue_after: Duration,
    pub gc_interval: Duration,
    pub gc_grace: Duration,
    pub gui_offered: bool,
    /// Bearer token the API requires (always when bound to a non-loopback address).
    pub token: Option<String>,
    /// The `Host` names the API answers besides the loopback ones (lowercase); `None`: `Host`
    /// is not checked (a token is required and `[http] allowed_hosts` is unset).
    pub allowed_hosts: Option<Vec<String>>,
    pub models: BTreeMap<String, ModelProfile>,
    /// Auditor keys whose signatures on audit reports are accepted; empty: reports are not
    /// authenticated (accepted unsigned, as before signing existed).
    pub auditor_keys: TrustedKeys,
    /// `[jetstream]`: replicas and byte caps of the streams and buckets.
    pub topology: TopologyOptions,
    pub run_log_max_entries: u64,
    pub outbox_republish_after: Duration,
    /// None: no admission limit.
    pub max_active_runs: Option<u64>,
    /// `[snapshot]`: caps on the manifests the API and the snapshot GC read.
    pub snapshot: SnapshotLimits,
}

#[derive(Debug, thiserror::Error)]
pub enum ManagerConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {path}: {message}")]
    Parse { path: String, message: String },
    #[error(transparent)]
    Invalid(#[from] ConfigError),
    #[error(transparent)]
    Model(#[from] ModelConfigError),
}

pub fn parse_file(text: &str, path: &str) -> Result<ConfigFile, ManagerConfigError> {
    toml::from_str(text).map_err(|e| ManagerConfigError::Parse {
        path: path.to_string(),
        message: e.to_string().trim().to_string(),
    })
}

pub fn load(
    path: Option<&Path>,
    overrides: EnvOverrides,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Settings, ManagerConfigError> {
    let file = match path {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|source| ManagerConfigError::Read {
                path: p.display().to_string(),
                source,
            })?;
            parse_file(&text, &p.display().to_string())?
        }
        None => ConfigFile::default(),
    };
    resolve(file, overrides, env)
}

pub fn resolve(
    file: ConfigFile,
    overrides: EnvOverrides,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Settings, ManagerConfigError> {
    let nats = file.nats.resolve(overrides.nats_url, env)?;
    let topology = file.jetstream.resolve()?;
    let redis = resolve_redis(
        &file.redis,
        overrides.redis_url,
        overrides.redis_sentinels,
        overrides.redis_master_name,
        env,
    )?;
    let addr_text = overrides
        .http_addr
        .or(file.http.addr.clone())
        .unwrap_or_else(|| DEFAULT_HTTP_ADDR.to_string());
    let http_addr: SocketAddr = addr_text.parse().map_err(|_| {
        ConfigError::invalid("http.addr", format!("'{addr_text}' is not host:port"))
    })?;
    let m = file.manager;
    let prompt_char_budget = m
        .prompt_char_budget
        .unwrap_or(loopgate_common::decide::manager_prompt::DEFAULT_CHAR_BUDGET);
    if prompt_char_budget < 2_000 {
        return Err(
            ConfigError::invalid("manager.prompt_char_budget", "must be at least 2000").into(),
        );
    }
    let concurrency = m.concurrency.unwrap_or(32);
    if concurrency == 0 {
        return Err(ConfigError::invalid("manager.concurrency", "must be positive").into());
    }
    let retention_days = m.retention_days.unwrap_or(7);
    if retention_days == 0 {
        return Err(ConfigError::invalid("manager.retention_days", "must be positive").into());
    }
    let capabilities = m
        .capabilities
        .clone()
        .unwrap_or_else(|| vec!["cli".into(), "gui".into()]);
    if let Some(bad) = capabilities
        .iter()
        .find(|c| !["cli", "gui"].contains(&c.as_str()))
    {
        return Err(ConfigError::invalid(
            "manager.capabilities",
            format!("unknown capability '{bad}' (cli, gui)"),
        )
        .into());
    }
    if !capabilities.iter().any(|c| c == "cli") {
        return Err(ConfigError::invalid("manager.capabilities", "must include cli").into());
    }
    let gui_offered = capabilities.iter().any(|c| c == "gui");
    let token = match &file.http.token_env {
        Some(var) => Some(env(var).filter(|t| !t.trim().is_empty()).ok_or_else(|| {
            ConfigError::invalid("http.token_env", format!("env var {var} is unset or empty"))
        })?),
        None => None,
    };
    if token.is_none() && !http_addr.ip().is_loopback() {
        return Err(ConfigError::invalid(
            "http.token_env",
            format!("the API is bound to non-loopback {http_addr}; set http.token_env to require a bearer token"),
        )
        .into());
    }
    let allowed_hosts = resolve_allowed_hosts(&file.http, token.is_some())?;
    let auditor_keys = resolve_auditor_keys(&m, env)?;
    let run_log_max_entries = m.run_log_max_entries.unwrap_or(DEFAULT_RUN_LOG_MAX_ENTRIES);
    if run_log_max_entries < 100 {
        return Err(
            ConfigError::invalid("manager.run_log_max_entries", "must be at least 100").into(),
        );
    }
    if m.max_active_runs == Some(0) {
        return Err(ConfigError::invalid("manager.max_active_runs", "must be positive").into());
    }
    Ok(Settings {
        run_log_max_entries,
        outbox_republish_after: m
            .outbox_republish_after_ms
            .map(|ms| Duration::from_millis(ms.clamp(200, 600_000)))
            .unwrap_or(crate::outbox::REPUBLISH_AFTER),
        max_active_runs: m.max_active_runs,
        snapshot: file.snapshot.resolve()?,
        topology,
        nats,
        redis,
        http_addr,
        max_body_bytes: file.http.max_body_bytes.unwrap_or(64 * 1024 * 1024),
        prompt_char_budget,
        concurrency,
        ack_wait: Duration::from_secs(m.ack_wait_secs.unwrap_or(30).max(1)),
        max_deliver: m.max_deliver.unwrap_or(10).max(1),
        retention: Duration::from_secs(retention_days * 86_400),
        sweep_interval: Duration::from_millis(
            m.sweep_interval_ms.unwrap_or(1000).clamp(50, 60_000),
        ),
        overdue_after: Duration::from_secs(m.overdue_after_secs.unwrap_or(30).clamp(1, 3600)),
        gc_interval: Duration::from_secs(m.gc_interval_secs.unwrap_or(3600).max(1)),
        gc_grace: Duration::from_secs(m.gc_grace_secs.unwrap_or(86_400)),
        gui_offered,
        token,
        allowed_hosts,
        models: resolve_profiles(&file.models, env)?,
        auditor_keys,
    })
}

/// `[redis]` with the environment's overrides: exactly one of `url` and `sentinels` (neither:
/// [`DEFAULT_REDIS_URL`]); `master_name` and `password_env` with sentinels only; the replica
/// acknowledgements.
fn resolve_redis(
    file: &RedisSection,
    url: Option<String>,
    sentinels: Option<String>,
    master_name: Option<String>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<RedisSettings, ConfigError> {
    let url = url.or(file.url.clone());
    let sentinels: Option<Vec<String>> = match sentinels {
        Some(list) => Some(
            list.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
        ),
        None => file.sentinels.clone(),
    };
    let master_name = master_name.or(file.master_name.clone());
    let target = match (url, sentinels) {
        (Some(_), Some(_)) => {
            return Err(ConfigError::invalid(
                "redis.sentinels",
                "set redis.url or redis.sentinels (with redis.master_name), not both",
            ))
        }
        (url, None) => {
            if master_name.is_some() {
                return Err(ConfigError::invalid(
                    "redis.master_name",
                    "only with redis.sentinels",
                ));
            }
            for (key, set) in [
                ("redis.password_env", file.password_env.is_some()),
                (
                    "redis.sentinel_password_env",
                    file.sentinel_password_env.is_some(),
                ),
            ] {
                if set {
                    return Err(ConfigError::invalid(
                        key,
                        "only with redis.sentinels (a URL carries its own password)",
                    ));
                }
            }
            let url = url.unwrap_or_else(|| DEFAULT_REDIS_URL.to_string());
            if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
                return Err(ConfigError::invalid(
                    "redis.url",
                    format!(
                        "'{}' is not a redis:// URL",
                        loopgate_common::redact::redact_url(&url)
                    ),
                ));
            }
            RedisTarget::Url(url)
        }
        (None, Some(sentinels)) => {
            if sentinels.is_empty() {
                return Err(ConfigError::invalid(
                    "redis.sentinels",
                    "must list at least one host:port",
                ));
            }
            if let Some(bad) = sentinels.iter().find(|s| !is_host_port(s)) {
                return Err(ConfigError::invalid(
                    "redis.sentinels",
                    format!("'{bad}' is not host:port"),
                ));
            }
            let master_name = master_name
                .filter(|n| !n.trim().is_empty() && !n.chars().any(char::is_whitespace))
                .ok_or_else(|| {
                    ConfigError::invalid(
                        "redis.master_name",
                        "required (one word) with redis.sentinels",
                    )
                })?;
            RedisTarget::Sentinel {
                sentinels,
                master_name,
                password: password_from(&file.password_env, "redis.password_env", env)?,
                sentinel_password: password_from(
                    &file.sentinel_password_env,
                    "redis.sentinel_password_env",
                    env,
                )?,
            }
        }
    };
    let replicas = file.min_replicas_acked.unwrap_or(0);
    if replicas > 16 {
        return Err(ConfigError::invalid(
            "redis.min_replicas_acked",
            "at most 16",
        ));
    }
    let timeout = file
        .replica_ack_timeout_ms
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_REPLICA_ACK_TIMEOUT);
    if !(Duration::from_millis(10)..=Duration::from_secs(60)).contains(&timeout) {
        return Err(ConfigError::invalid(
            "redis.replica_ack_timeout_ms",
            "must be between 10 and 60000",
        ));
    }
    Ok(RedisSettings {
        target,
        replica_acks: (replicas > 0).then_some(ReplicaAcks { replicas, timeout }),
    })
}

/// The value of the env var `var` names, when it names one; unset or empty is refused.
fn password_from(
    var: &Option<String>,
    key: &'static str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<String>, ConfigError> {
    match var {
        Some(var) => env(var)
            .filter(|p| !p.is_empty())
            .map(Some)
            .ok_or_else(|| ConfigError::invalid(key, format!("env var {var} is unset or empty"))),
        None => Ok(None),
    }
}

/// `host:port` with a non-empty host and a port number.
fn is_host_port(text: &str) -> bool {
    match text.rsplit_once(':') {
        Some((host, port)) => {
            !host.is_empty()
                && !host.contains('/')
                && !host.chars().any(char::is_whitespace)
                && port.parse::<u16>().is_ok_and(|p| p > 0)
        }
        None => false,
    }
}

/// `[http] allowed_hosts`, lowercase: bare host names or IP literals (`[v6]`), no port,
/// scheme or path. Checked whenever no token guards the API, or when configured.
fn resolve_allowed_hosts(
    http: &HttpSection,
    token: bool,
) -> Result<Option<Vec<String>>, ManagerConfigError> {
    let Some(names) = &http.allowed_hosts else {
        return Ok((!token).then(Vec::new));
    };
    let mut out = Vec::new();
    for name in names {
        let host = name.trim().trim_end_matches('.').to_ascii_lowercase();
        let bad = host.is_empty()
            || host
                .chars()
                .any(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '[' | ']' | ':')))
            || (host.contains(':') && !host.starts_with('['));
        if bad {
            return Err(ConfigError::invalid(
                "http.allowed_hosts",
                format!("'{name}' is not a host name (no scheme, port or path; IPv6 as [::1])"),
            )
            .into());
        }
        out.push(host);
    }
    Ok(Some(out))
}

/// `[manager] auditor_keys` plus the keys in the variable `auditor_keys_env` names (which
/// must then be set and hold at least one key).
fn resolve_auditor_keys(
    m: &ManagerSection,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<TrustedKeys, ManagerConfigError> {
    let mut keys = Vec::new();
    for (i, text) in m.auditor_keys.iter().flatten().enumerate() {
        let key = AuditorPublicKey::parse(text).map_err(|e| {
            ConfigError::invalid("manager.auditor_keys", format!("key #{}: {e}", i + 1))
        })?;
        keys.push(key);
    }
    if let Some(var) = &m.auditor_keys_env {
        let text = env(var).filter(|t| !t.trim().is_empty()).ok_or_else(|| {
            ConfigError::invalid(
                "manager.auditor_keys_env",
                format!("env var {var} is unset or empty"),
            )
        })?;
        let listed = TrustedKeys::parse_list(&text)
            .map_err(|e| ConfigError::invalid("manager.auditor_keys_env", format!("{var}: {e}")))?;
        keys.extend(listed.keys().iter().cloned());
    }
    Ok(TrustedKeys::new(keys))
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
