//! NATS subjects, stream, consumer and bucket names. The one place they are spelled.

/// Default subject prefix; configurable per deployment.
pub const DEFAULT_PREFIX: &str = "loopgate";

pub const STREAM_EXEC: &str = "LG_EXEC";
pub const STREAM_AUDIT: &str = "LG_AUDIT";
pub const STREAM_RESULTS: &str = "LG_RESULTS";
pub const STREAM_EVENTS: &str = "LG_EVENTS";
pub const SNAPSHOT_BUCKET: &str = "lg-snapshots";
/// Full outputs of acceptance checks, content-addressed like snapshot blobs.
pub const EVIDENCE_BUCKET: &str = "lg-evidence";

/// Executor capabilities: which kind of step a worker can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    Cli,
    Gui,
}

impl Capability {
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Cli => "cli",
            Capability::Gui => "gui",
        }
    }
}

/// Subject names under one prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subjects {
    prefix: String,
}

impl Default for Subjects {
    fn default() -> Self {
        Self::new(DEFAULT_PREFIX)
    }
}

impl Subjects {
    pub fn new(prefix: &str) -> Self {
        Subjects {
            prefix: prefix.trim_end_matches('.').to_string(),
        }
    }
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
    /// `loopgate.exec.<capability>`: manager -> executor workers (work queue).
    pub fn exec(&self, capability: Capability) -> String {
        format!("{}.exec.{}", self.prefix, capability.as_str())
    }
    /// `loopgate.heartbeat.capabilities`: executor workers -> managers (core NATS), each
    /// worker's capabilities with a TTL.
    pub fn capability_heartbeat(&self) -> String {
        format!("{}.heartbeat.capabilities", self.prefix)
    }
    pub fn exec_all(&self) -> String {
        format!("{}.exec.>", self.prefix)
    }
    /// `loopgate.audit.request`: manager -> auditor workers (work queue).
    pub fn audit_request(&self) -> String {
        format!("{}.audit.request", self.prefix)
    }
    pub fn audit_all(&self) -> String {
        format!("{}.audit.>", self.prefix)
    }
    /// `loopgate.result.exec.<run>`: executor -> any manager replica.
    pub fn exec_result(&self, run_id: &str) -> String {
        format!("{}.result.exec.{}", self.prefix, run_id)
    }
    /// `loopgate.result.audit.<run>`: auditor -> any manager replica.
    pub fn audit_result(&self, run_id: &str) -> String {
        format!("{}.result.audit.{}", self.prefix, run_id)
    }
    /// `loopgate.result.decide.<run>`: a manager asks any replica to take the next decision.
    pub fn decide(&self, run_id: &str) -> String {
        format!("{}.result.decide.{}", self.prefix, run_id)
    }
    pub fn results_all(&self) -> String {
        format!("{}.result.>", self.prefix)
    }
    /// `loopgate.result.started.<run>`: a worker tells the manager it picked an episode up.
    pub fn started(&self, run_id: &str) -> String {
        format!("{}.result.started.{}", self.prefix, run_id)
    }
    /// `loopgate.control.<run>`: core NATS (not persisted) control notices for in-flight
    /// episodes, e.g. cancel.
    pub fn control(&self, run_id: &str) -> String {
        format!("{}.control.{}", self.prefix, run_id)
    }
    pub fn control_all(&self) -> String {
        format!("{}.control.>", self.prefix)
    }
    /// `loopgate.events.<run>`: run events for watchers.
    pub fn events(&self, run_id: &str) -> String {
        format!("{}.events.{}", self.prefix, run_id)
    }
    pub fn events_all(&self) -> String {
        format!("{}.events.>", self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_under_prefix() {
        let s = Subjects::new("lg.");
        assert_eq!(s.exec(Capability::Cli), "lg.exec.cli");
        assert_eq!(s.audit_request(), "lg.audit.request");
        assert_eq!(s.exec_result("r1"), "lg.result.exec.r1");
        assert_eq!(s.decide("r1"), "lg.result.decide.r1");
        assert_eq!(Subjects::default().events("r"), "loopgate.events.r");
    }
}
