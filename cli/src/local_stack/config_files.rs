//! The daemon config files `loopgate up` writes (`manager.toml`, `executor-N.toml`,
//! `auditor.toml`), rendered from one description of the local stack through the daemons' own
//! table types (`loopgate_common::config`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use loopgate_common::config::{
    AuditorSection, ExecutorSection, HttpSection, ManagerSection, NatsSection, RedisSection,
};
use loopgate_protocol::gui::GuiBackend;
use loopgate_protocol::subjects::Capability;
use serde::Serialize;

use super::nats_users::{Role, NATS_PASSWORD_ENV};
use super::redis_ha::{HaPorts, MASTER_NAME, REDIS_PASSWORD_ENV};

/// The model profile every role uses in the local stack.
pub const LOCAL_PROFILE: &str = "local";
pub const DEFAULT_MODEL_URL: &str = "http://127.0.0.1:8080/v1";
pub const DEFAULT_MODEL: &str = "qwen2.5-coder";
pub const API_KEY_ENV: &str = "LOOPGATE_API_KEY";
/// `structured_output` of the manager's profile (`json_schema` unless this says `off`).
pub const STRUCTURED_OUTPUT_ENV: &str = "LOOPGATE_STRUCTURED_OUTPUT";
/// llama-server, vLLM and OpenAI constrain the manager's reply to its JSON schema.
pub const DEFAULT_STRUCTURED_OUTPUT: &str = "json_schema";
pub const PROMPT_CHAR_BUDGET: usize = 24_000;
/// `max_tokens` of the local profile: a small model caught in a repetition loop otherwise
/// generates until its context is full (minutes on a CPU), holding llama-server's only slot
/// while every other role's request waits and times out. `LOOPGATE_MAX_TOKENS` overrides it.
pub const MAX_TOKENS_ENV: &str = "LOOPGATE_MAX_TOKENS";
pub const DEFAULT_MAX_TOKENS: u32 = 2048;
/// `temperature` of the local profile: low, since a small local model's first step is right
/// more often at 0.2 than at llama-server's own default of 0.8 (docs/benchmarks.md).
/// `LOOPGATE_TEMPERATURE` overrides it.
pub const TEMPERATURE_ENV: &str = "LOOPGATE_TEMPERATURE";
pub const DEFAULT_TEMPERATURE: f64 = 0.2;
/// The variable the auditor reads its signing key from: generated per `loopgate up` and only
/// ever passed in the auditor's environment (a check can read the host's files from the
/// sandbox, not another process's environment).
pub const SIGNING_KEY_ENV: &str = "LOOPGATE_AUDITOR_SIGNING_KEY";
/// Large enough for the biggest workspace `loopgate submit` uploads (256 MiB, base64 in JSON).
pub const MAX_BODY_BYTES: usize = 384 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelProfileToml {
    pub provider: String,
    pub base_url: String,
    pub model: String,
    /// Only written when `LOOPGATE_API_KEY` is set: the daemons refuse a profile whose key
    /// variable is unset, and a local llama-server needs no key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Written into the manager's copy of the profile only (the one role whose requests
    /// declare a reply schema); the manager validates the value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured_output: Option<String>,
    /// The reply cap (`LOOPGATE_MAX_TOKENS`, default 2048).
    pub max_tokens: u32,
    /// Sampling temperature (`LOOPGATE_TEMPERATURE`, default 0.2).
    pub temperature: f64,
}

impl ModelProfileToml {
    /// `LOOPGATE_MODEL_URL` / `LOOPGATE_MODEL`, with local llama-server defaults; the key comes
    /// from `LOOPGATE_API_KEY` when that is set; structured output from
    /// `LOOPGATE_STRUCTURED_OUTPUT` (default `json_schema`).
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> ModelProfileToml {
        let pick = |key: &str, default: &str| {
            env(key)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| default.to_string())
        };
        ModelProfileToml {
            provider: "openai".into(),
            base_url: pick("LOOPGATE_MODEL_URL", DEFAULT_MODEL_URL),
            model: pick("LOOPGATE_MODEL", DEFAULT_MODEL),
            api_key_env: env(API_KEY_ENV)
                .filter(|k| !k.trim().is_empty())
                .map(|_| API_KEY_ENV.to_string()),
            structured_output: Some(pick(STRUCTURED_OUTPUT_ENV, DEFAULT_STRUCTURED_OUTPUT)),
            max_tokens: env(MAX_TOKENS_ENV)
                .and_then(|v| v.trim().parse::<u32>().ok())
                .filter(|n| *n > 0)
                .unwrap_or(DEFAULT_MAX_TOKENS),
            temperature: env(TEMPERATURE_ENV)
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|t| t.is_finite() && (0.0..=2.0).contains(t))
                .unwrap_or(DEFAULT_TEMPERATURE),
        }
    }

    /// The profile as the executors and the auditor get it: without `structured_output`.
    fn for_workers(&self) -> ModelProfileToml {
        ModelProfileToml {
            structured_output: None,
            ..self.clone()
        }
    }
}

/// Everything the config files are derived from.
#[derive(Debug, Clone)]
pub struct LocalStack {
    /// Absolute data directory.
    pub dir: PathBuf,
    pub nats_port: u16,
    pub redis_port: u16,
    pub http_addr: SocketAddr,
    pub executors: u32,
    /// Add one gui executor (`loopgate up --gui`): the browser tools on headless Chromium, and
    /// the desktop tools where Xvfb and AT-SPI are installed.
    pub gui: bool,
    pub model: ModelProfileToml,
    /// Public keys (hex) the manager trusts: every key this stack's auditor has signed with
    /// (`DIR/auditor-keys.pub`), the current one last.
    pub auditor_keys: Vec<String>,
    /// `loopgate up --ha`: the replica's and the sentinels' ports (the primary is on
    /// `redis_port`); the manager finds the primary through the sentinels.
    pub redis_ha: Option<HaPorts>,
}

/// `manager.toml` as `loopgate up` writes it.
#[derive(Serialize)]
struct ManagerToml<'a> {
    nats: NatsSection,
    redis: RedisSection,
    http: HttpSection,
    manager: ManagerSection,
    models: BTreeMap<&'a str, &'a ModelProfileToml>,
}

/// `executor-N.toml` as `loopgate up` writes it.
#[derive(Serialize)]
struct ExecutorToml<'a> {
    nats: NatsSection,
    executor: ExecutorSection,
    models: BTreeMap<&'a str, &'a ModelProfileToml>,
}

/// `auditor.toml` as `loopgate up` writes it.
#[derive(Serialize)]
struct AuditorToml<'a> {
    nats: NatsSection,
    auditor: AuditorSection,
    models: BTreeMap<&'a str, &'a ModelProfileToml>,
}

/// One file to write: its path and TOML text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFile {
    pub path: PathBuf,
    pub text: String,
}

impl LocalStack {
    pub fn nats_url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.nats_port)
    }

    pub fn redis_url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.redis_port)
    }

    pub fn logs_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }

    /// The cli executors, plus the gui one with `--gui` (numbered last).
    pub fn all_executors(&self) -> u32 {
        self.executors + u32::from(self.gui)
    }

    pub fn executor_id(n: u32) -> String {
        format!("exec-{n}")
    }

    pub fn executor_work_dir(&self, n: u32) -> PathBuf {
        self.dir.join("work").join(Self::executor_id(n))
    }

    pub fn auditor_work_dir(&self) -> PathBuf {
        self.dir.join("audit")
    }

    pub fn manager_config_path(&self) -> PathBuf {
        self.dir.join("manager.toml")
    }

    pub fn executor_config_path(&self, n: u32) -> PathBuf {
        self.dir.join(format!("executor-{n}.toml"))
    }

    pub fn auditor_config_path(&self) -> PathBuf {
        self.dir.join("auditor.toml")
    }

    fn models(model: &ModelProfileToml) -> BTreeMap<&str, &ModelProfileToml> {
        BTreeMap::from([(LOCAL_PROFILE, model)])
    }

    /// Every public key this stack's auditor has signed with, one per line.
    pub fn auditor_keys_path(&self) -> PathBuf {
        self.dir.join("auditor-keys.pub")
    }

    pub fn nats_config_path(&self) -> PathBuf {
        self.dir.join("nats.conf")
    }

    /// redis-server's config: this start's password (`redis_auth.rs`), mode 0600.
    pub fn redis_config_path(&self) -> PathBuf {
        self.dir.join("redis.conf")
    }

    /// `[nats]`: the role's own user; the password comes from `LOOPGATE_NATS_PASSWORD`.
    fn nats(&self, role: Role) -> NatsSection {
        NatsSection {
            url: Some(self.nats_url()),
            user: Some(role.user().to_string()),
            password_env: Some(NATS_PASSWORD_ENV.to_string()),
            ..NatsSection::default()
        }
    }

    /// `[redis]`: the primary's URL (its password comes in `LOOPGATE_REDIS_URL`), or with
    /// `--ha` the sentinels, the password's variable and one replica to acknowledge each write.
    fn redis_section(&self) -> RedisSection {
        match &self.redis_ha {
            None => RedisSection {
                url: Some(self.redis_url()),
                ..RedisSection::default()
            },
            Some(ha) => RedisSection {
                sentinels: Some(ha.sentinel_addrs()),
                master_name: Some(MASTER_NAME.to_string()),
                password_env: Some(REDIS_PASSWORD_ENV.to_string()),
                sentinel_password_env: Some(REDIS_PASSWORD_ENV.to_string()),
                min_replicas_acked: Some(1),
                ..RedisSection::default()
            },
        }
    }

    /// Renders every config file of the stack.
    pub fn config_files(&self) -> Result<Vec<ConfigFile>, toml::ser::Error> {
        let mut files = vec![ConfigFile {
            path: self.nats_config_path(),
            text: super::nats_users::nats_conf_text(),
        }];
        let worker_model = self.model.for_workers();
        files.push(ConfigFile {
            path: self.manager_config_path(),
            text: toml::to_string(&ManagerToml {
                nats: self.nats(Role::Manager),
                redis: self.redis_section(),
                http: HttpSection {
                    addr: Some(self.http_addr.to_string()),
                    max_body_bytes: Some(MAX_BODY_BYTES),
                    ..HttpSection::default()
                },
                manager: ManagerSection {
                    prompt_char_budget: Some(PROMPT_CHAR_BUDGET),
                    // gui is offered only while the gui executor's heartbeat is live.
                    capabilities: Some(if self.gui {
                        vec!["cli".into(), "gui".into()]
                    } else {
                        vec!["cli".into()]
                    }),
                    // Reports must be signed by one of these (this and earlier starts' keys).
                    auditor_keys: Some(self.auditor_keys.clone()),
                    ..ManagerSection::default()
                },
                models: Self::models(&self.model),
            })?,
        });
        for n in 1..=self.all_executors() {
            files.push(ConfigFile {
                path: self.executor_config_path(n),
                text: toml::to_string(&ExecutorToml {
                    nats: self.nats(Role::Executor),
                    executor: ExecutorSection {
                        worker_id: Some(Self::executor_id(n)),
                        capabilities: Some(vec![if n > self.executors {
                            Capability::Gui
                        } else {
                            Capability::Cli
                        }]),
                        work_dir: Some(self.executor_work_dir(n)),
                        // The gui executor serves both backends; it announces the desktop
                        // only where its programs are installed.
                        gui_backends: (n > self.executors)
                            .then(|| vec![GuiBackend::Browser, GuiBackend::Desktop]),
                        ..ExecutorSection::default()
                    },
                    models: Self::models(&worker_model),
                })?,
            });
        }
        files.push(ConfigFile {
            path: self.auditor_config_path(),
            text: toml::to_string(&AuditorToml {
                nats: self.nats(Role::Auditor),
                auditor: AuditorSection {
                    worker_id: Some("audit-1".into()),
                    work_dir: Some(self.auditor_work_dir()),
                    // This start's signing key, generated by `loopgate up`.
                    signing_key_env: Some(SIGNING_KEY_ENV.to_string()),
                    ..AuditorSection::default()
                },
                models: Self::models(&worker_model),
            })?,
        });
        Ok(files)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn stack() -> LocalStack {
        LocalStack {
            dir: PathBuf::from("/data/my \"stack\""),
            nats_port: 14222,
            redis_port: 16379,
            http_addr: "127.0.0.1:7600".parse().unwrap(),
            executors: 2,
            gui: false,
            model: ModelProfileToml::from_env(&|_| None),
            auditor_keys: vec!["ab".repeat(32), "cd".repeat(32)],
            redis_ha: None,
        }
    }

    #[test]
    fn with_ha_the_manager_finds_redis_through_the_sentinels() {
        let ha = LocalStack {
            redis_ha: Some(HaPorts {
                replica: 16380,
                sentinels: vec![26379, 26380, 26381],
            }),
            ..stack()
        };
        let files = ha.config_files().unwrap();
        let manager = table(&files[1].text);
        let redis = get(&manager, "redis").as_table().unwrap();
        assert!(redis.get("url").is_none(), "{redis:?}");
        let sentinels: Vec<&str> = get(&manager, "redis.sentinels")
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(
            sentinels,
            ["127.0.0.1:26379", "127.0.0.1:26380", "127.0.0.1:26381"]
        );
        for (key, value) in [
            ("redis.master_name", "loopgate"),
            ("redis.password_env", "LOOPGATE_REDIS_PASSWORD"),
            ("redis.sentinel_password_env", "LOOPGATE_REDIS_PASSWORD"),
        ] {
            assert_eq!(get(&manager, key).as_str(), Some(value), "{key}");
        }
        assert_eq!(
            get(&manager, "redis.min_replicas_acked").as_integer(),
            Some(1)
        );
    }

    fn table(text: &str) -> toml::Table {
        toml::from_str(text).unwrap()
    }

    fn get<'a>(t: &'a toml::Table, dotted: &str) -> &'a toml::Value {
        let mut parts = dotted.split('.');
        let first = parts.next().unwrap();
        let mut value = t.get(first).unwrap_or_else(|| panic!("{dotted}"));
        for part in parts {
            value = value.get(part).unwrap_or_else(|| panic!("{dotted}"));
        }
        value
    }

    #[test]
    fn renders_manager_executors_and_auditor() {
        let files = stack().config_files().unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|f| f.path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "nats.conf",
                "manager.toml",
                "executor-1.toml",
                "executor-2.toml",
                "auditor.toml"
            ]
        );
        assert!(files[0].text.contains("user: auditor"));
        let manager = table(&files[1].text);
        let expect: &[(&str, &str)] = &[
            ("nats.url", "nats://127.0.0.1:14222"),
            ("redis.url", "redis://127.0.0.1:16379"),
            ("http.addr", "127.0.0.1:7600"),
            ("models.local.provider", "openai"),
            ("models.local.base_url", DEFAULT_MODEL_URL),
            ("models.local.model", DEFAULT_MODEL),
        ];
        for (key, value) in expect {
            assert_eq!(get(&manager, key).as_str(), Some(*value), "{key}");
        }
        assert_eq!(
            get(&manager, "manager.prompt_char_budget").as_integer(),
            Some(24_000)
        );
        assert_eq!(get(&manager, "nats.user").as_str(), Some("manager"));
        assert_eq!(
            get(&manager, "nats.password_env").as_str(),
            Some("LOOPGATE_NATS_PASSWORD")
        );
        let exec2 = table(&files[3].text);
        assert_eq!(get(&exec2, "nats.user").as_str(), Some("executor"));
        assert_eq!(get(&exec2, "executor.worker_id").as_str(), Some("exec-2"));
        assert_eq!(
            get(&exec2, "executor.work_dir").as_str(),
            Some("/data/my \"stack\"/work/exec-2")
        );
        assert!(exec2.get("redis").is_none());
        let auditor = table(&files[4].text);
        assert_eq!(get(&auditor, "nats.user").as_str(), Some("auditor"));
        assert!(
            auditor.get("redis").is_none(),
            "the auditor must not get a [redis] table"
        );
        assert_eq!(
            get(&auditor, "models.local.model").as_str(),
            Some(DEFAULT_MODEL)
        );
        let top: Vec<&str> = auditor.keys().map(String::as_str).collect();
        assert_eq!(top, ["auditor", "models", "nats"]);
        // Reports are signed and checked: the key travels in the auditor's environment only.
        assert_eq!(
            get(&auditor, "auditor.signing_key_env").as_str(),
            Some(SIGNING_KEY_ENV)
        );
        let keys = get(&manager, "manager.auditor_keys").as_array().unwrap();
        assert_eq!(keys.len(), 2);
        assert!(!files.iter().any(|f| f.text.contains("signing_key_file")));
    }

    #[test]
    fn model_profile_comes_from_env() {
        let env = |k: &str| match k {
            "LOOPGATE_MODEL_URL" => Some("http://gpu:9000/v1".to_string()),
            "LOOPGATE_MODEL" => Some("  ".to_string()),
            "LOOPGATE_API_KEY" => Some("sk-local".to_string()),
            _ => None,
        };
        let profile = ModelProfileToml::from_env(&env);
        assert_eq!(profile.base_url, "http://gpu:9000/v1");
        assert_eq!(profile.model, DEFAULT_MODEL);
        assert_eq!(profile.api_key_env.as_deref(), Some("LOOPGATE_API_KEY"));
        let text = toml::to_string(&profile).unwrap();
        assert!(
            text.contains("api_key_env = \"LOOPGATE_API_KEY\""),
            "{text}"
        );
    }

    #[test]
    fn structured_output_is_set_for_the_manager_only() {
        let files = stack().config_files().unwrap();
        let manager = table(&files[1].text);
        assert_eq!(
            get(&manager, "models.local.structured_output").as_str(),
            Some("json_schema")
        );
        for worker in &files[2..] {
            let worker = table(&worker.text);
            assert!(
                worker["models"]["local"].get("structured_output").is_none(),
                "{worker}"
            );
        }
        let env = |k: &str| (k == STRUCTURED_OUTPUT_ENV).then(|| " off ".to_string());
        let off = ModelProfileToml::from_env(&env);
        assert_eq!(off.structured_output.as_deref(), Some("off"));
        assert!(toml::to_string(&off)
            .unwrap()
            .contains("structured_output = \"off\""));
    }

    #[test]
    fn temperature_comes_from_env_within_range() {
        // (LOOPGATE_TEMPERATURE, the profile's temperature)
        let cases = [
            (None, DEFAULT_TEMPERATURE),
            (Some("0.7"), 0.7),
            (Some(" 0 "), 0.0),
            (Some("2.5"), DEFAULT_TEMPERATURE),
            (Some("-1"), DEFAULT_TEMPERATURE),
            (Some("NaN"), DEFAULT_TEMPERATURE),
            (Some("warm"), DEFAULT_TEMPERATURE),
        ];
        for (value, want) in cases {
            let env = |k: &str| {
                (k == TEMPERATURE_ENV)
                    .then(|| value.map(str::to_string))
                    .flatten()
            };
            let profile = ModelProfileToml::from_env(&env);
            assert_eq!(profile.temperature, want, "{value:?}");
        }
        let files = stack().config_files().unwrap();
        for file in &files[1..] {
            let t = table(&file.text);
            assert_eq!(
                get(&t, "models.local.temperature").as_float(),
                Some(DEFAULT_TEMPERATURE),
                "{}",
                file.text
            );
        }
    }
}
