//! `[metrics]` in the workers' config files.

use serde::{Deserialize, Serialize};

use crate::config::error::ConfigError;

/// `[metrics]` in the workers' config files: where to serve Prometheus `/metrics` and
/// `/healthz` (the manager serves them on its API address).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsSection {
    /// `host:port`; absent = no metrics endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
