//! `auditor.toml`: the raw file (unknown keys are errors, so a `[redis]` table is rejected by
//! name) and its resolution, with env values passed in, into validated settings.
//!
//! ```toml
//! [nats]
//! url = "nats://127.0.0.1:4222"
//! [auditor]
//! worker_id = "audit-1"          # optional, default "<hostname>-<pid>"
//! work_dir = ".loopgate/audit"   # optional, default <system temp>/loopgate-audit
//! ack_wait_secs = 30             # optional
//! shutdown_grace_secs = 20       # optional
//! sandbox = "auto"               # optional: auto | required | off (see loopgate_checks)
//! check_user = "nobody"          # optional: user (or uid:gid) for checks when run as root
//! bwrap = "/usr/bin/bwrap"       # optional: bubblewrap binary (default: bwrap on PATH)
//! strict_scope = false           # optional: a change outside write_scope is a violation
//! signing_key_env = "LOOPGATE_AUDITOR_SIGNING_KEY"  # optional: the pool's Ed25519 key
//! # signing_key_file = "/path/key" # or from a file (64 hex digits); not both
//! # allow_unsandboxed_signing = false  # sign although checks run outside bubblewrap
//! cache_bytes = 1073741824       # optional: warm-workspace cache (kept trees, blobs); 0 = off
//! concurrency = 1                # optional: audits at once (1..=64; an autoscaler's per-pod target)
//! [snapshot]                     # optional: the largest candidate read (defaults shown)
//! max_manifest_entries = 1000000 # more entries: the candidate is untrustworthy, unread
//! max_tree_bytes = 8589934592    # files adding up to more: untrustworthy, nothing written
//! [models.local]                 # optional: LLM judgment when a request names it
//! provider = "openai"
//! base_url = "http://127.0.0.1:8080/v1"
//! model = "qwen2.5-coder-0.5b"
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use loopgate_common::config::{
    AuditorSection, NatsSection, NatsSettings, SnapshotLimits, SnapshotSection,
};
use loopgate_models::{ModelConfigError, ModelProfile, ModelProfiles};
use loopgate_protocol::report::signing::ReportSigningKey;
use loopgate_transport::runtime::EPISODES_PER_LOOP;
use serde::Deserialize;

use loopgate_checks::SandboxSettings;

/// The auditor must never reach Redis; this env var being set means a mis-deployment.
pub(crate) const REDIS_URL_ENV: &str = "LOOPGATE_REDIS_URL";
pub(crate) const NATS_URL_ENV: &str = "LOOPGATE_NATS_URL";
pub(crate) const DEFAULT_ACK_WAIT_SECS: u64 = 30;
pub(crate) const DEFAULT_SHUTDOWN_GRACE_SECS: u64 = 20;
/// Total deliveries of one audit request before JetStream gives up on it.
pub(crate) const MAX_DELIVER: i64 = 5;
/// `[auditor] cache_bytes` default.
pub(crate) const DEFAULT_CACHE_BYTES: u64 = 1024 * 1024 * 1024;
/// `[auditor] concurrency` upper bound.
pub(crate) const MAX_CONCURRENCY: usize = 64;

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    #[serde(default)]
    pub nats: NatsSection,
    #[serde(default)]
    pub auditor: AuditorSection,
    /// `[snapshot]`: the largest candidate this auditor reads (shared with the other daemons).
    #[serde(default)]
    pub snapshot: SnapshotSection,
    #[serde(default)]
    pub models: ModelProfiles,
    /// `[metrics] addr`: Prometheus `/metrics` and `/healthz`.
    #[serde(default)]
    pub metrics: loopgate_common::config::MetricsSection,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading config file {path:?}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config file: {0}")]
    Parse(#[from] toml::de::Error),
    #[error(
        "{REDIS_URL_ENV} is set, but the auditor must never reach Redis; unset it for this process"
    )]
    RedisConfigured,
    #[error(transparent)]
    Nats(#[from] loopgate_common::config::ConfigError),
    #[error(transparent)]
    Model(#[from] ModelConfigError),
    #[error("config `{key}`: {problem}")]
    Invalid { key: &'static str, problem: String },
}

/// Validated settings the worker runs with.
#[derive(Debug, Clone)]
pub struct AuditorSettings {
    pub worker_id: String,
    pub work_dir: PathBuf,
    pub nats: NatsSettings,
    /// Resolved model profiles (keys read once), by name.
    pub models: BTreeMap<String, ModelProfile>,
    pub ack_wait: Duration,
    pub shutdown_grace: Duration,
    /// `PATH` handed to acceptance checks.
    pub check_path: String,
    /// How checks should be isolated (probed at start-up).
    pub sandbox: SandboxSettings,
    /// A change outside the increment's write_scope is a violation, not just suspect.
    pub strict_scope: bool,
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// The key every report is signed with; `None`: reports go out unsigned (a manager that
    /// trusts any auditor key refuses them).
    pub signing_key: Option<Arc<ReportSigningKey>>,
    /// Where the signing key was read from, when from a file (hidden from every check).
    pub signing_key_file: Option<PathBuf>,
    /// Sign reports although checks run outside bubblewrap (`allow_unsandboxed_signing`).
    pub allow_unsandboxed_signing: bool,
    /// Host paths checks must not see, before start-up checks which exist: the config file,
    /// the signing key file, model key files, the platform's secret mounts and credentials
    /// under the auditor's home (`loopgate_checks::secret_paths`). The work dir and the host's
    /// sockets are hidden too (by the probe).
    pub check_hidden: Vec<PathBuf>,
    /// The environment variables secrets were read from (the NATS password and URL, the
    /// signing key, model API keys): `main` removes them from the process's environment before
    /// anything starts (`loopgate_checks::seal_process`).
    pub secret_vars: Vec<String>,
    /// Warm-workspace cache budget (0: off).
    pub cache_bytes: u64,
    /// Audits at once.
    pub concurrency: usize,
    /// `[snapshot]`: caps on the candidates and bases this auditor reads.
    pub snapshot: SnapshotLimits,
}

pub fn parse_config(text: &str) -> Result<RawConfig, ConfigError> {
    Ok(toml::from_str(text)?)
}

pub fn load_config(path: &Path) -> Result<RawConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_config(&text)
}

/// What resolution needs from the process besides env lookups.
#[derive(Debug, Clone)]
pub struct HostFacts {
    pub hostname: String,
    pub pid: u32,
    pub temp_dir: PathBuf,
}

impl AuditorSettings {
    /// The model profile names a task's `roles.auditor` may give this worker, sorted: what
    /// its heartbeat announces (names only, no keys).
    pub fn profile_names(&self) -> Vec<String> {
        self.models.keys().cloned().collect()
    }
}

impl HostFacts {
    pub fn current() -> Self {
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "auditor".to_string());
        HostFacts {
            hostname,
            pid: std::process::id(),
            temp_dir: std::env::temp_dir(),
        }
    }
}

impl RawConfig {
    /// Resolve with env lookups from `env` (binaries pass the process env, read once).
    pub fn resolve(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
        host: &HostFacts,
    ) -> Result<AuditorSettings, ConfigError> {
        self.resolve_at(env, host, None)
    }

    /// [`RawConfig::resolve`] of the file at `config_path` (`--config`), which checks must
    /// not see either.
    pub fn resolve_at(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
        host: &HostFacts,
        config_path: Option<&Path>,
    ) -> Result<AuditorSettings, ConfigError> {
        if env(REDIS_URL_ENV).is_some() {
            return Err(ConfigError::RedisConfigured);
        }
        let nats = self.nats.resolve(env(NATS_URL_ENV), env)?;
        let worker_id = match &self.auditor.worker_id {
            Some(id) if id.trim().is_empty() || id.contains(char::is_whitespace) => {
                return Err(ConfigError::Invalid {
                    key: "auditor.worker_id",
                    problem: "must be a non-empty word without spaces".into(),
                })
            }
            Some(id) => id.clone(),
            None => format!("{}-{}", host.hostname, host.pid),
        };
        let work_dir = self
            .auditor
            .work_dir
            .clone()
            .unwrap_or_else(|| host.temp_dir.join("loopgate-audit"));
        let ack_wait_secs = self.auditor.ack_wait_secs.unwrap_or(DEFAULT_ACK_WAIT_SECS);
        if !(3..=3600).contains(&ack_wait_secs) {
            return Err(ConfigError::Invalid {
                key: "auditor.ack_wait_secs",
                problem: "must be between 3 and 3600".into(),
            });
        }
        let grace_secs = self
            .auditor
            .shutdown_grace_secs
            .unwrap_or(DEFAULT_SHUTDOWN_GRACE_SECS);
        if grace_secs > 3600 {
            return Err(ConfigError::Invalid {
                key: "auditor.shutdown_grace_secs",
                problem: "must be at most 3600".into(),
            });
        }
        let models = loopgate_models::resolve_profiles(&self.models, env)?;
        let check_path = loopgate_checks::check_path(env("PATH"));
        if let Some(user) = &self.auditor.check_user {
            if !loopgate_checks::is_valid_check_user(user) {
                return Err(ConfigError::Invalid {
                    key: "auditor.check_user",
                    problem: "must be a user name or uid:gid".into(),
                });
            }
        }
        let concurrency = self.auditor.concurrency.unwrap_or(EPISODES_PER_LOOP);
        if !(1..=MAX_CONCURRENCY).contains(&concurrency) {
            return Err(ConfigError::Invalid {
                key: "auditor.concurrency",
                problem: format!("must be between 1 and {MAX_CONCURRENCY}"),
            });
        }
        let sandbox = SandboxSettings {
            mode: self.auditor.sandbox.unwrap_or_default(),
            check_user: self.auditor.check_user.clone(),
            bwrap: self.auditor.bwrap.clone(),
        };
        let mut key_files: Vec<PathBuf> = self
            .models
            .values()
            .filter_map(|m| m.api_key_file.clone())
            .collect();
        key_files.extend(self.auditor.signing_key_file.iter().cloned());
        let check_hidden =
            loopgate_checks::secret_paths(config_path, env("HOME").as_deref(), &key_files, &[]);
        Ok(AuditorSettings {
            worker_id,
            work_dir,
            nats,
            models,
            ack_wait: Duration::from_secs(ack_wait_secs),
            shutdown_grace: Duration::from_secs(grace_secs),
            check_path,
            sandbox,
            strict_scope: self.auditor.strict_scope.unwrap_or(false),
            metrics_addr: self.metrics.resolve()?,
            signing_key: self.signing_key(env)?.map(Arc::new),
            signing_key_file: self.auditor.signing_key_file.clone(),
            allow_unsandboxed_signing: self.auditor.allow_unsandboxed_signing.unwrap_or(false),
            check_hidden,
            secret_vars: self.secret_vars(),
            cache_bytes: self.auditor.cache_bytes.unwrap_or(DEFAULT_CACHE_BYTES),
            concurrency,
            snapshot: self.snapshot.resolve()?,
        })
    }

    /// The variables this file reads secrets from (see [`AuditorSettings::secret_vars`]), and
    /// `LOOPGATE_NATS_URL`, which may carry a password.
    fn secret_vars(&self) -> Vec<String> {
        let mut vars = vec![NATS_URL_ENV.to_string()];
        vars.extend(self.nats.password_env.iter().cloned());
        vars.extend(self.auditor.signing_key_env.iter().cloned());
        vars.extend(self.models.values().filter_map(|m| m.api_key_env.clone()));
        vars.sort();
        vars.dedup();
        vars
    }

    /// The signing key from `signing_key_env` or `signing_key_file` (never both), read once.
    /// Errors name the key and the problem, never the key's text.
    fn signing_key(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<ReportSigningKey>, ConfigError> {
        let a = &self.auditor;
        let (text, key) = match (&a.signing_key_env, &a.signing_key_file) {
            (None, None) => return Ok(None),
            (Some(_), Some(_)) => {
                return Err(ConfigError::Invalid {
                    key: "auditor.signing_key_env",
                    problem: "set signing_key_env or signing_key_file, not both".into(),
                })
            }
            (Some(var), None) => {
                let text = env(var).filter(|t| !t.trim().is_empty()).ok_or_else(|| {
                    ConfigError::Invalid {
                        key: "auditor.signing_key_env",
                        problem: format!("env var {var} is unset or empty"),
                    }
                })?;
                (text, "auditor.signing_key_env")
            }
            (None, Some(path)) => {
                let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Invalid {
                    key: "auditor.signing_key_file",
                    problem: format!("cannot read {}: {e}", path.display()),
                })?;
                (text, "auditor.signing_key_file")
            }
        };
        ReportSigningKey::parse(&text)
            .map(Some)
            .map_err(|e| ConfigError::Invalid {
                key,
                problem: e.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use loopgate_checks::SandboxMode;

    fn host() -> HostFacts {
        HostFacts {
            hostname: "box".into(),
            pid: 7,
            temp_dir: PathBuf::from("/tmp"),
        }
    }

    fn env_of(pairs: EnvPairs) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn redis_section_is_rejected_by_name() {
        let text =
            "[nats]\nurl = \"nats://127.0.0.1:4222\"\n[redis]\nurl = \"redis://127.0.0.1:6379\"\n";
        let err = parse_config(text).unwrap_err();
        assert!(matches!(err, ConfigError::Parse(_)), "{err:?}");
        assert!(err.to_string().contains("redis"), "{err}");
    }

    #[test]
    fn unknown_keys_are_rejected_everywhere() {
        let cases = [
            "[auditor]\nworkers = 3\n",
            "[auditor]\nsandbox = \"maybe\"\n",
            "[nats]\nhost = \"x\"\n",
            "[models.local]\nbase_url = \"http://x/v1\"\nmodel = \"m\"\nkey = \"secret\"\n",
            "top_level = 1\n",
        ];
        for text in cases {
            assert!(
                matches!(parse_config(text), Err(ConfigError::Parse(_))),
                "{text}"
            );
        }
    }

    #[test]
    fn resolve_table() {
        let full = "[nats]\nurl = \"nats://file:4222\"\nprefix = \"lg\"\n\
                    [auditor]\nworker_id = \"audit-1\"\nwork_dir = \"/var/audit\"\nack_wait_secs = 10\n\
                    cache_bytes = 5000\nconcurrency = 4\n\
                    [models.judge]\nbase_url = \"http://127.0.0.1:8080/v1\"\nmodel = \"m\"\n";
        let raw = parse_config(full).unwrap();
        let settings = raw.resolve(&env_of(&[("PATH", "/bin")]), &host()).unwrap();
        assert_eq!(settings.worker_id, "audit-1");
        assert_eq!(settings.work_dir, PathBuf::from("/var/audit"));
        assert_eq!(settings.nats.url, "nats://file:4222");
        assert_eq!(settings.nats.prefix, "lg");
        assert_eq!(settings.ack_wait, Duration::from_secs(10));
        assert_eq!(settings.check_path, "/bin");
        assert!(settings.models.contains_key("judge"));
        assert_eq!(settings.sandbox, SandboxSettings::default());
        assert!(!settings.strict_scope);
        assert_eq!((settings.cache_bytes, settings.concurrency), (5000, 4));

        let strict = parse_config(
            "[auditor]\nsandbox = \"required\"\ncheck_user = \"65534:65534\"\nstrict_scope = true\n",
        )
        .unwrap()
        .resolve(&env_of(&[]), &host())
        .unwrap();
        assert_eq!(strict.sandbox.mode, SandboxMode::Required);
        assert_eq!(strict.sandbox.check_user.as_deref(), Some("65534:65534"));
        assert!(strict.strict_scope);

        let defaults = parse_config("")
            .unwrap()
            .resolve(&env_of(&[]), &host())
            .unwrap();
        assert_eq!(defaults.worker_id, "box-7");
        assert_eq!(defaults.work_dir, PathBuf::from("/tmp/loopgate-audit"));
        assert_eq!(
            defaults.ack_wait,
            Duration::from_secs(DEFAULT_ACK_WAIT_SECS)
        );
        assert_eq!(defaults.check_path, loopgate_checks::DEFAULT_CHECK_PATH);
        assert_eq!(
            (defaults.cache_bytes, defaults.concurrency),
            (DEFAULT_CACHE_BYTES, EPISODES_PER_LOOP)
        );

        let env_url = parse_config(full)
            .unwrap()
            .resolve(&env_of(&[(NATS_URL_ENV, "nats://env:1")]), &host())
            .unwrap();
        assert_eq!(env_url.nats.url, "nats://env:1");
    }

    const SEED_HEX: &str = "0707070707070707070707070707070707070707070707070707070707070707";

    #[test]
    fn signing_key_from_env_or_file() {
        let from_env = parse_config("[auditor]\nsigning_key_env = \"LG_SIGN\"\n")
            .unwrap()
            .resolve(&env_of(&[("LG_SIGN", SEED_HEX)]), &host())
            .unwrap();
        let key = from_env.signing_key.clone().expect("a key");
        assert_eq!(
            key.key_id(),
            ReportSigningKey::from_seed(&[7u8; 32]).key_id()
        );
        assert!(!format!("{from_env:?}").contains(SEED_HEX));

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("auditor.key");
        std::fs::write(&file, format!("{SEED_HEX}\n")).unwrap();
        let text = format!(
            "[auditor]\nsigning_key_file = {:?}\n",
            file.display().to_string()
        );
        let from_file = parse_config(&text)
            .unwrap()
            .resolve(&env_of(&[]), &host())
            .unwrap();
        assert_eq!(from_file.signing_key.unwrap().key_id(), key.key_id());

        let none = parse_config("")
            .unwrap()
            .resolve(&env_of(&[]), &host())
            .unwrap();
        assert!(none.signing_key.is_none());

        let bad: Vec<(String, EnvPairs, &str)> = vec![
            (
                "[auditor]\nsigning_key_env = \"LG_SIGN\"\n".into(),
                &[],
                "auditor.signing_key_env",
            ),
            (
                "[auditor]\nsigning_key_env = \"LG_SIGN\"\n".into(),
                &[("LG_SIGN", "0707")],
                "auditor.signing_key_env",
            ),
            (
                format!("{text}signing_key_env = \"LG_SIGN\"\n"),
                &[("LG_SIGN", SEED_HEX)],
                "auditor.signing_key_env",
            ),
            (
                "[auditor]\nsigning_key_file = \"/nonexistent/key\"\n".into(),
                &[],
                "auditor.signing_key_file",
            ),
        ];
        for (text, env, want) in bad {
            let err = parse_config(&text)
                .unwrap()
                .resolve(&env_of(env), &host())
                .unwrap_err();
            assert!(
                matches!(&err, ConfigError::Invalid { key, .. } if *key == want),
                "{text}: {err:?}"
            );
            assert!(!err.to_string().contains(SEED_HEX), "{err}");
        }
    }

    #[test]
    fn secrets_checks_must_not_reach_table() {
        let text = "[nats]\npassword_env = \"LG_NATS\"\n\
                    [auditor]\nsigning_key_file = \"/keys/auditor.key\"\nallow_unsandboxed_signing = true\n\
                    [models.judge]\nbase_url = \"http://x/v1\"\nmodel = \"m\"\napi_key_env = \"LG_JUDGE\"\n";
        let mut raw = parse_config(text).unwrap();
        // The key file is read at resolve: point it at a real one.
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("auditor.key");
        std::fs::write(&key, SEED_HEX).unwrap();
        raw.auditor.signing_key_file = Some(key.clone());
        let env = env_of(&[("LG_NATS", "pw"), ("LG_JUDGE", "sk"), ("HOME", "/home/a")]);
        let settings = raw
            .resolve_at(&env, &host(), Some(Path::new("/etc/lg/auditor.toml")))
            .unwrap();
        assert!(settings.allow_unsandboxed_signing);
        assert_eq!(settings.signing_key_file.as_deref(), Some(key.as_path()));
        for hidden in [
            key.as_path(),
            Path::new("/etc/lg/auditor.toml"),
            Path::new("/run/secrets"),
            Path::new("/home/a/.ssh"),
        ] {
            assert!(
                settings.check_hidden.iter().any(|h| h == hidden),
                "{hidden:?} not in {:?}",
                settings.check_hidden
            );
        }
        assert_eq!(
            settings.secret_vars,
            ["LG_JUDGE", "LG_NATS", NATS_URL_ENV].map(String::from)
        );
        let env_key = parse_config("[auditor]\nsigning_key_env = \"LG_SIGN\"\n")
            .unwrap()
            .resolve(&env_of(&[("LG_SIGN", SEED_HEX)]), &host())
            .unwrap();
        assert!(env_key.secret_vars.contains(&"LG_SIGN".to_string()));
        assert!(!env_key.allow_unsandboxed_signing);
    }

    type EnvPairs = &'static [(&'static str, &'static str)];
    type ErrorCase = (&'static str, EnvPairs, fn(&ConfigError) -> bool);

    #[test]
    fn resolve_errors_by_kind() {
        let cases: Vec<ErrorCase> =
            vec![
            ("", &[(REDIS_URL_ENV, "redis://x")], |e| matches!(e, ConfigError::RedisConfigured)),
            ("[nats]\nurl = \"http://x\"\n", &[], |e| matches!(e, ConfigError::Nats(_))),
            ("[auditor]\nworker_id = \"a b\"\n", &[], |e| {
                matches!(e, ConfigError::Invalid { key: "auditor.worker_id", .. })
            }),
            ("[auditor]\nack_wait_secs = 0\n", &[], |e| {
                matches!(e, ConfigError::Invalid { key: "auditor.ack_wait_secs", .. })
            }),
            ("[auditor]\nconcurrency = 0\n", &[], |e| {
                matches!(e, ConfigError::Invalid { key: "auditor.concurrency", .. })
            }),
            ("[auditor]\ncheck_user = \" \"\n", &[], |e| {
                matches!(e, ConfigError::Invalid { key: "auditor.check_user", .. })
            }),
            (
                "[models.j]\nbase_url = \"http://x/v1\"\nmodel = \"m\"\napi_key_env = \"NOPE\"\n",
                &[],
                |e| matches!(e, ConfigError::Model(ModelConfigError::MissingKeyEnv { .. })),
            ),
        ];
        for (text, env, check) in cases {
            let err = parse_config(text)
                .unwrap()
                .resolve(&env_of(env), &host())
                .unwrap_err();
            assert!(check(&err), "{text}: {err:?}");
        }
    }
}
