//! Manager configuration: the raw file (`deny_unknown_fields`) + env + flags, resolved once.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use loopgate_common::config::{ConfigError, NatsSection, NatsSettings};
use loopgate_models::{resolve_profiles, ModelConfigError, ModelProfile, ModelProfiles};
use serde::Deserialize;

pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";
pub const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:7600";

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
    pub models: ModelProfiles,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisSection {
    pub url: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSection {
    pub addr: Option<String>,
    /// Largest accepted `POST /v1/runs` body (the starting workspace rides in it).
    pub max_body_bytes: Option<usize>,
    /// Env var holding the API bearer token. Required when `addr` is not loopback.
    pub token_env: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManagerSection {
    /// Upper bound on the manager prompt, in characters.
    pub prompt_char_budget: Option<usize>,
    /// Results/decisions handled at once by this replica.
    pub concurrency: Option<usize>,
    pub ack_wait_secs: Option<u64>,
    pub max_deliver: Option<i64>,
    /// How long terminal runs are kept.
    pub retention_days: Option<u64>,
    /// How often this replica sweeps `lg:deadlines`, in milliseconds.
    pub sweep_interval_ms: Option<u64>,
    /// How often unreferenced snapshot blobs are collected (default 3600 s).
    pub gc_interval_secs: Option<u64>,
    /// Objects younger than this are never collected (default 86400 s).
    pub gc_grace_secs: Option<u64>,
    /// Executor capabilities this deployment runs (default `["cli", "gui"]`); the manager model
    /// is never offered a route no worker serves.
    pub capabilities: Option<Vec<String>>,
}

/// Values read from the environment once in `main`.
#[derive(Debug, Default, Clone)]
pub struct EnvOverrides {
    pub nats_url: Option<String>,
    pub redis_url: Option<String>,
    pub http_addr: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub nats: NatsSettings,
    pub redis_url: String,
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
    pub models: BTreeMap<String, ModelProfile>,
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
    let redis_url = overrides
        .redis_url
        .or(file.redis.url)
        .unwrap_or_else(|| DEFAULT_REDIS_URL.to_string());
    if !(redis_url.starts_with("redis://") || redis_url.starts_with("rediss://")) {
        return Err(ConfigError::invalid(
            "redis.url",
            format!("'{redis_url}' is not a redis:// URL"),
        )
        .into());
    }
    let addr_text = overrides
        .http_addr
        .or(file.http.addr)
        .unwrap_or_else(|| DEFAULT_HTTP_ADDR.to_string());
    let http_addr: SocketAddr = addr_text.parse().map_err(|_| {
        ConfigError::invalid("http.addr", format!("'{addr_text}' is not host:port"))
    })?;
    let m = file.manager;
    let prompt_char_budget = m
        .prompt_char_budget
        .unwrap_or(loopgate_common::prompts::manager::DEFAULT_CHAR_BUDGET);
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
    Ok(Settings {
        nats,
        redis_url,
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
        models: resolve_profiles(&file.models, env)?,
    })
}

#[cfg(test)]
mod tests {
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
        assert_eq!(s.redis_url, "redis://env:2");
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
}
