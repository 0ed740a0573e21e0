//! `[nats]` in every daemon's config file, and its resolution (env values passed in).

use serde::{Deserialize, Serialize};

use loopgate_protocol::subjects::DEFAULT_PREFIX;

use crate::config::error::ConfigError;

pub const DEFAULT_NATS_URL: &str = "nats://127.0.0.1:4222";

/// `[nats]` in every daemon's config file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatsSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Subject prefix (default `loopgate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Name of the env var holding the password (never the password itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_env: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatsSettings {
    pub url: String,
    pub prefix: String,
    pub user: Option<String>,
    pub password: Option<String>,
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
