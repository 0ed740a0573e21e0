//! Config sections shared by the daemons' config files (raw, `deny_unknown_fields`) and their
//! resolution. Env values are passed in by `main`, never read here.

use serde::{Deserialize, Serialize};

use loopgate_protocol::subjects::DEFAULT_PREFIX;

pub const DEFAULT_NATS_URL: &str = "nats://127.0.0.1:4222";

/// `[nats]` in every daemon's config file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatsSection {
    pub url: Option<String>,
    /// Subject prefix (default `loopgate`).
    pub prefix: Option<String>,
    pub user: Option<String>,
    /// Name of the env var holding the password (never the password itself).
    pub password_env: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatsSettings {
    pub url: String,
    pub prefix: String,
    pub user: Option<String>,
    pub password: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("config `{key}`: {problem}")]
    Invalid { key: String, problem: String },
}

impl ConfigError {
    pub fn invalid(key: impl Into<String>, problem: impl Into<String>) -> Self {
        ConfigError::Invalid {
            key: key.into(),
            problem: problem.into(),
        }
    }
}

impl NatsSection {
    /// Precedence: env (`LOOPGATE_NATS_URL`, passed in) > file > default.
    pub fn resolve(
        &self,
        env_url: Option<String>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<NatsSettings, ConfigError> {
        let url = env_url
            .or_else(|| self.url.clone())
            .unwrap_or_else(|| DEFAULT_NATS_URL.to_string());
        if !(url.starts_with("nats://") || url.starts_with("tls://") || url.starts_with("ws://")) {
            return Err(ConfigError::invalid(
                "nats.url",
                format!("'{url}' is not a nats:// URL"),
            ));
        }
        let prefix = self
            .prefix
            .clone()
            .unwrap_or_else(|| DEFAULT_PREFIX.to_string());
        if prefix.is_empty() || prefix.contains(['*', '>', ' ']) {
            return Err(ConfigError::invalid(
                "nats.prefix",
                "must be a plain subject token",
            ));
        }
        let password = match &self.password_env {
            Some(var) => Some(env(var).ok_or_else(|| {
                ConfigError::invalid("nats.password_env", format!("env var {var} is not set"))
            })?),
            None => None,
        };
        Ok(NatsSettings {
            url,
            prefix,
            user: self.user.clone(),
            password,
        })
    }
}

/// `[metrics]` in the workers' config files: where to serve Prometheus `/metrics` and
/// `/healthz` (the manager serves them on its API address).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsSection {
    /// `host:port`; absent = no metrics endpoint.
    pub addr: Option<String>,
}

impl MetricsSection {
    pub fn resolve(&self) -> Result<Option<std::net::SocketAddr>, ConfigError> {
        match &self.addr {
            None => Ok(None),
            Some(a) => a.parse().map(Some).map_err(|_| {
                ConfigError::invalid("metrics.addr", format!("'{a}' is not host:port"))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_overrides_file() {
        let s = NatsSection {
            url: Some("nats://file:1".into()),
            ..Default::default()
        };
        let none = |_: &str| None;
        assert_eq!(s.resolve(None, &none).unwrap().url, "nats://file:1");
        assert_eq!(
            s.resolve(Some("nats://env:2".into()), &none).unwrap().url,
            "nats://env:2"
        );
        assert_eq!(
            NatsSection::default().resolve(None, &none).unwrap().url,
            DEFAULT_NATS_URL
        );
        assert!(NatsSection::default()
            .resolve(Some("http://x".into()), &none)
            .is_err());
    }
}
