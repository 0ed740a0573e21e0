//! `sandbox` in `[executor]` and `[auditor]`: how checks (and the executor's agents) are isolated;
//! `loopgate_checks` turns it into a probed sandbox.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// Use bubblewrap where the host allows it, else run checks unisolated (said in reports).
    #[default]
    Auto,
    /// No network sandbox, no check: checks become inconclusive.
    Required,
    /// Never use bubblewrap.
    Off,
}
