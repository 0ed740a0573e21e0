//! How an executor isolated the agent of one episode (the built-in tool loop's `shell`, or a
//! CLI agent) from itself: carried on every `ExecResult` and its `exec_result` run log entry,
//! so a run whose agent ran next to the worker's secrets (`[executor] sandbox = "off"`) says so
//! in its record.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentIsolation {
    /// The agent ran under bubblewrap: its own pid namespace (the worker's processes and
    /// their environments invisible), an allow-listed environment, a read-only view of the
    /// host without the worker's config and credential files, only the workspace and its own
    /// home writable, killed as a whole at the end of each call or run.
    pub sandboxed: bool,
    /// The agent could reach the network (`[executor] agent_network`).
    pub network: bool,
    /// What was missing when not sandboxed (e.g. `sandbox = "off" in the executor config`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

impl AgentIsolation {
    /// The one-line warning people see when the agent was not sandboxed (`None` when it was).
    pub fn warning(&self) -> Option<String> {
        (!self.sandboxed).then(|| {
            let why = if self.note.is_empty() {
                "no reason given"
            } else {
                self.note.as_str()
            };
            format!("agent ran WITHOUT a sandbox: {why}")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warning_only_when_unsandboxed_and_note_optional_on_the_wire() {
        let sandboxed = AgentIsolation {
            sandboxed: true,
            network: false,
            note: String::new(),
        };
        assert_eq!(sandboxed.warning(), None);
        assert_eq!(
            serde_json::to_value(&sandboxed).unwrap(),
            serde_json::json!({"sandboxed": true, "network": false})
        );
        let off: AgentIsolation = serde_json::from_str(
            r#"{"sandboxed": false, "network": true, "note": "sandbox = \"off\""}"#,
        )
        .unwrap();
        assert_eq!(
            off.warning().as_deref(),
            Some("agent ran WITHOUT a sandbox: sandbox = \"off\"")
        );
    }
}
