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
mod tests {
    use super::JetStreamSection;

    #[test]
    fn jetstream_keys_are_checked() {
        let ok = |replicas, bytes| JetStreamSection {
            replicas,
            stream_max_bytes: bytes,
            ..Default::default()
        };
        // (replicas, stream_max_bytes) -> accepted
        for (replicas, bytes, accepted) in [
            (None, None, true),
            (Some(1), None, true),
            (Some(3), Some(10 << 30), true),
            (Some(5), Some(1 << 20), true),
            (Some(2), None, false),
            (Some(0), None, false),
            (Some(3), Some(1024), false),
            (None, Some(-1), false),
        ] {
            let got = ok(replicas, bytes).resolve();
            assert_eq!(got.is_ok(), accepted, "{replicas:?} {bytes:?}: {got:?}");
        }
        let topology = ok(Some(3), Some(2 << 30)).resolve();
        assert_eq!(topology.as_ref().map(|t| t.replicas), Ok(Some(3)));
        assert_eq!(topology.map(|t| t.stream_max_bytes), Ok(Some(2 << 30)));
        // Unset: streams get the documented default cap, buckets none.
        let defaults = ok(None, None).resolve();
        assert_eq!(
            defaults.as_ref().map(|t| t.stream_max_bytes),
            Ok(Some(DEFAULT_STREAM_MAX_BYTES))
        );
        assert_eq!(defaults.map(|t| t.snapshot_max_bytes), Ok(None));
        // audit_ack_wait_secs -> the durable's ack_wait, or refused.
        for (secs, want) in [
            (None, Ok(None)),
            (Some(3), Ok(Some(Duration::from_secs(3)))),
            (Some(3600), Ok(Some(Duration::from_secs(3600)))),
            (Some(2), Err(())),
            (Some(3601), Err(())),
        ] {
            let got = JetStreamSection {
                audit_ack_wait_secs: secs,
                ..Default::default()
            }
            .resolve()
            .map(|t| t.audit_ack_wait)
            .map_err(|_| ());
            assert_eq!(got, want, "{secs:?}");
        }
    }

    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn precedence_and_errors() {
        let file = parse_file(
            "[redis]\nurl = \"redis://file:1\"\n[http]\naddr = \"127.0.0.1:9\"",
            "x",
        )
        .unwrap_or_default();
        let s = resolve(
            file,
            EnvOverrides {
                redis_url: Some("redis://env:2".into()),
                ..Default::default()
            },
            &no_env,
        );
        let s = s.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.redis.target, RedisTarget::Url("redis://env:2".into()));
        assert_eq!(s.http_addr.port(), 9);
        assert!(matches!(
            parse_file("[bogus]\nx=1", "x"),
            Err(ManagerConfigError::Parse { .. })
        ));
        let bad = parse_file("[http]\naddr = \"nope\"", "x").unwrap_or_default();
        assert!(matches!(
            resolve(bad, EnvOverrides::default(), &no_env),
            Err(ManagerConfigError::Invalid(_))
        ));
        // A public address without a token is refused; with one it is accepted.
        let public = || parse_file("[http]\naddr = \"0.0.0.0:7600\"", "x").unwrap_or_default();
        assert!(matches!(
            resolve(public(), EnvOverrides::default(), &no_env),
            Err(ManagerConfigError::Invalid(_))
        ));
        let with_token = parse_file("[http]\naddr = \"0.0.0.0:7600\"\ntoken_env = \"T\"", "x")
            .unwrap_or_default();
        let env = |k: &str| (k == "T").then(|| "secret".to_string());
        let s =
            resolve(with_token, EnvOverrides::default(), &env).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.token.as_deref(), Some("secret"));
        assert!(s.auditor_keys.is_empty());
    }

    #[test]
    fn redis_url_or_sentinels() {
        let resolve_text = |text: &str, overrides: EnvOverrides| {
            resolve(
                parse_file(text, "x").unwrap_or_default(),
                overrides,
                &no_env,
            )
            .map(|s| s.redis)
        };
        let sentinel = |names: &[&str], master: &str| RedisTarget::Sentinel {
            sentinels: names.iter().map(|s| s.to_string()).collect(),
            master_name: master.into(),
            password: None,
            sentinel_password: None,
        };
        // Accepted: (file, env) -> target.
        let good: Vec<(&str, EnvOverrides, RedisTarget)> = vec![
            (
                "",
                EnvOverrides::default(),
                RedisTarget::Url(DEFAULT_REDIS_URL.into()),
            ),
            (
                "[redis]\nsentinels = [\"a:26379\", \"b:26379\"]\nmaster_name = \"lg\"",
                EnvOverrides::default(),
                sentinel(&["a:26379", "b:26379"], "lg"),
            ),
            (
                "",
                EnvOverrides {
                    redis_sentinels: Some("s1:1, s2:2,".into()),
                    redis_master_name: Some("m".into()),
                    ..Default::default()
                },
                sentinel(&["s1:1", "s2:2"], "m"),
            ),
        ];
        for (text, overrides, target) in good {
            let got = resolve_text(text, overrides).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(got.target, target, "{text}");
            assert_eq!(got.replica_acks, None);
        }
        // Refused: (file, env) -> the key named.
        let bad: Vec<(&str, EnvOverrides, &str)> = vec![
            (
                "[redis]\nurl = \"redis://x:1\"\nsentinels = [\"a:1\"]\nmaster_name = \"m\"",
                EnvOverrides::default(),
                "redis.sentinels",
            ),
            (
                "[redis]\nsentinels = [\"a:1\"]\nmaster_name = \"m\"",
                EnvOverrides {
                    redis_url: Some("redis://env:2".into()),
                    ..Default::default()
                },
                "redis.sentinels",
            ),
            (
                "[redis]\nsentinels = [\"a:1\"]",
                EnvOverrides::default(),
                "redis.master_name",
            ),
            (
                "[redis]\nsentinels = []\nmaster_name = \"m\"",
                EnvOverrides::default(),
                "redis.sentinels",
            ),
            (
                "[redis]\nsentinels = [\"nohost\"]\nmaster_name = \"m\"",
                EnvOverrides::default(),
                "redis.sentinels",
            ),
            (
                "[redis]\nmaster_name = \"m\"",
                EnvOverrides::default(),
                "redis.master_name",
            ),
            (
                "[redis]\nurl = \"http://x\"",
                EnvOverrides::default(),
                "redis.url",
            ),
            (
                "[redis]\nmin_replicas_acked = 17",
                EnvOverrides::default(),
                "redis.min_replicas_acked",
            ),
            (
                "[redis]\nmin_replicas_acked = 1\nreplica_ack_timeout_ms = 5",
                EnvOverrides::default(),
                "redis.replica_ack_timeout_ms",
            ),
        ];
        for (text, overrides, key) in bad {
            let err = resolve_text(text, overrides).err();
            assert!(
                err.as_ref().is_some_and(|e| e.to_string().contains(key)),
                "{text}: {err:?}"
            );
        }
        let acks = resolve_text(
            "[redis]\nmin_replicas_acked = 1\nreplica_ack_timeout_ms = 250",
            EnvOverrides::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            acks.replica_acks,
            Some(ReplicaAcks {
                replicas: 1,
                timeout: Duration::from_millis(250)
            })
        );
        // The data nodes' password comes from the variable `password_env` names.
        let text = "[redis]\nsentinels = [\"a:1\"]\nmaster_name = \"m\"\npassword_env = \"LG_RPW\"";
        let env = |k: &str| (k == "LG_RPW").then(|| "pw".to_string());
        let with_password = resolve(
            parse_file(text, "x").unwrap_or_default(),
            EnvOverrides::default(),
            &env,
        )
        .map(|s| s.redis.target);
        assert_eq!(
            with_password.as_ref().ok(),
            Some(&RedisTarget::Sentinel {
                sentinels: vec!["a:1".into()],
                master_name: "m".into(),
                password: Some("pw".into()),
                sentinel_password: None,
            })
        );
        assert!(
            !format!("{with_password:?}").contains("pw\""),
            "{with_password:?}"
        );
        // The sentinels' own password comes from `sentinel_password_env`.
        let both = "[redis]\nsentinels = [\"a:1\"]\nmaster_name = \"m\"\n\
                    password_env = \"LG_RPW\"\nsentinel_password_env = \"LG_SPW\"";
        let env2 = |k: &str| match k {
            "LG_RPW" => Some("pw".to_string()),
            "LG_SPW" => Some("spw".to_string()),
            _ => None,
        };
        let with_both = resolve(
            parse_file(both, "x").unwrap_or_default(),
            EnvOverrides::default(),
            &env2,
        )
        .map(|s| s.redis.target);
        assert_eq!(
            with_both.as_ref().ok(),
            Some(&RedisTarget::Sentinel {
                sentinels: vec!["a:1".into()],
                master_name: "m".into(),
                password: Some("pw".into()),
                sentinel_password: Some("spw".into()),
            })
        );
        assert!(!format!("{with_both:?}").contains("spw"), "{with_both:?}");
        let sentinel_pw_unset = resolve(
            parse_file(both, "x").unwrap_or_default(),
            EnvOverrides::default(),
            &env,
        )
        .err();
        assert!(
            sentinel_pw_unset
                .as_ref()
                .is_some_and(|e| e.to_string().contains("redis.sentinel_password_env")),
            "{sentinel_pw_unset:?}"
        );
        for (text, key) in [
            (text, "redis.password_env"),
            ("[redis]\npassword_env = \"LG_RPW\"", "redis.password_env"),
            (
                "[redis]\nsentinel_password_env = \"LG_SPW\"",
                "redis.sentinel_password_env",
            ),
        ] {
            let err = resolve_text(text, EnvOverrides::default()).err();
            assert!(
                err.as_ref().is_some_and(|e| e.to_string().contains(key)),
                "{text}: {err:?}"
            );
        }
        let off = resolve_text("[redis]\nmin_replicas_acked = 0", EnvOverrides::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(off.replica_acks, None);
    }

    fn public_hex(seed: u8) -> String {
        loopgate_protocol::report::signing::ReportSigningKey::from_seed(&[seed; 32])
            .public_key()
            .to_hex()
    }

    #[test]
    fn auditor_keys_from_the_file_and_the_environment() {
        let (a, b) = (public_hex(7), public_hex(9));
        let text = format!("[manager]\nauditor_keys = [\"{a}\"]\nauditor_keys_env = \"LG_KEYS\"");
        let env = |k: &str| (k == "LG_KEYS").then(|| format!("# pool 2\n{b}\n{a}\n"));
        let s = resolve(
            parse_file(&text, "x").unwrap_or_default(),
            EnvOverrides::default(),
            &env,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let listed: Vec<String> = s.auditor_keys.keys().iter().map(|k| k.to_hex()).collect();
        assert_eq!(listed, vec![a.clone(), b.clone()]);

        let cases: Vec<(String, &str)> = vec![
            (
                "[manager]\nauditor_keys = [\"abc\"]".into(),
                "manager.auditor_keys",
            ),
            (
                "[manager]\nauditor_keys_env = \"UNSET\"".into(),
                "manager.auditor_keys_env",
            ),
            (
                "[manager]\nauditor_keys_env = \"LG_BAD\"".into(),
                "manager.auditor_keys_env",
            ),
        ];
        let env = |k: &str| (k == "LG_BAD").then(|| "not-a-key".to_string());
        for (text, key) in cases {
            let file = parse_file(&text, "x").unwrap_or_default();
            let err = resolve(file, EnvOverrides::default(), &env)
                .err()
                .unwrap_or_else(|| panic!("{text} resolved"));
            assert!(err.to_string().contains(key), "{text}: {err}");
        }
        assert!(matches!(
            parse_file("[manager]\nauditor_key = []", "x"),
            Err(ManagerConfigError::Parse { .. })
        ));
    }

    #[test]
    fn structured_output_key() {
        let profile = |provider: &str, value: &str| {
            format!(
                "[models.mgr]\nprovider = \"{provider}\"\nbase_url = \"http://127.0.0.1:8080/v1\"\n\
                 model = \"m\"\nstructured_output = {value}\n"
            )
        };
        let settings = |text: &str| {
            parse_file(text, "manager.toml")
                .and_then(|file| resolve(file, EnvOverrides::default(), &no_env))
        };
        let on = settings(&profile("openai", "\"json_schema\"")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            on.models["mgr"].structured_output,
            loopgate_models::StructuredOutput::JsonSchema
        );
        let absent =
            settings("[models.mgr]\nbase_url = \"http://127.0.0.1:8080/v1\"\nmodel = \"m\"\n")
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            absent.models["mgr"].structured_output,
            loopgate_models::StructuredOutput::Off
        );
        // Unknown values and Anthropic profiles are refused with an error naming the key.
        for text in [
            profile("openai", "\"json\""),
            profile("openai", "true"),
            profile("anthropic", "\"json_schema\""),
        ] {
            match settings(&text) {
                Err(e) => assert!(e.to_string().contains("structured_output"), "{text}: {e}"),
                Ok(_) => panic!("accepted: {text}"),
            }
        }
    }

    /// Without a token `Host` is always checked (loopback names plus `allowed_hosts`); with one
    /// only when `allowed_hosts` is set; a name with a scheme, port or path is refused.
    #[test]
    fn allowed_hosts_follow_the_token() {
        let no_env = |_: &str| -> Option<String> { None };
        let env = |k: &str| (k == "TOKEN").then(|| "t".to_string());
        let settings = |http: &str, env: &dyn Fn(&str) -> Option<String>| {
            let text = format!("[http]\n{http}\n");
            super::parse_file(&text, "manager.toml").and_then(|file| {
                super::resolve(file, super::EnvOverrides::default(), env).map(|s| s.allowed_hosts)
            })
        };
        let ok = |http: &str, env: &dyn Fn(&str) -> Option<String>| {
            settings(http, env).unwrap_or_else(|e| panic!("{http}: {e}"))
        };
        assert_eq!(ok("", &no_env), Some(vec![]));
        let names = "allowed_hosts = [\"Loopgate.Internal.\", \"[::2]\"]";
        let want = Some(vec!["loopgate.internal".to_string(), "[::2]".to_string()]);
        assert_eq!(ok(names, &no_env), want);
        assert_eq!(ok("token_env = \"TOKEN\"", &env), None);
        assert_eq!(ok(&format!("token_env = \"TOKEN\"\n{names}"), &env), want);
        for bad in ["http://a", "a:8080", "a/b", ""] {
            let http = format!("allowed_hosts = [\"{bad}\"]");
            match settings(&http, &no_env) {
                Err(e) => assert!(e.to_string().contains("http.allowed_hosts"), "{bad}: {e}"),
                Ok(hosts) => panic!("{bad}: accepted as {hosts:?}"),
            }
        }
    }
}
