//! The manager's JSON shapes as the CLI reads them: `RunView` (lenient: fields the CLI does not
//! show may be missing or change) and log records (`common::state::LogEntry` plus its stream id).

use loopgate_common::state::{LogEntry, RunState};
use loopgate_common::verdict::Verdicts;
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RunView {
    pub id: String,
    pub state: RunState,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub round: u32,
    #[serde(default)]
    pub max_rounds: Option<u32>,
    /// Rounds counted against `max_rounds` (this generation's, after planning).
    #[serde(default)]
    pub counted_rounds: Option<u32>,
    #[serde(default)]
    pub total_tokens: Option<u64>,
    #[serde(default)]
    pub generation: u32,
    #[serde(default)]
    pub phase: Option<Value>,
    #[serde(default)]
    pub snapshot: Option<String>,
    #[serde(default)]
    pub base_snapshot: Option<String>,
    #[serde(default)]
    pub goal: Option<String>,
    #[serde(default)]
    pub checks: Option<ChecksView>,
    #[serde(default)]
    pub gate: Option<GateView>,
    #[serde(default)]
    pub verdicts: Option<Verdicts>,
    #[serde(default)]
    pub evidence: Vec<EvidenceView>,
    #[serde(default)]
    pub terminal_reason: Option<String>,
    #[serde(default)]
    pub question: Option<String>,
    #[serde(default)]
    pub task_state: Option<String>,
    /// Progress as evidence (`acceptance 3/5 passing on snapshot abc123, rubric 7.9/8.5`).
    #[serde(default)]
    pub progress: Option<String>,
    /// `spec`, `contract` or `approval` while a planned contract is being built.
    #[serde(default)]
    pub planning: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct ChecksView {
    #[serde(default)]
    pub passing: u32,
    #[serde(default)]
    pub total: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GateView {
    #[serde(default)]
    pub passed: bool,
    #[serde(default)]
    pub reasons: Vec<String>,
}

/// One evidence record (`common::verdict::Evidence`), read leniently.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct EvidenceView {
    pub check_id: String,
    pub verdict: String,
    #[serde(default)]
    pub artifact_version: String,
    #[serde(default)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub duration_ms: Option<u64>,
    #[serde(default)]
    pub output_excerpt: Option<String>,
}

impl RunView {
    pub fn from_value(value: &Value) -> Result<RunView, serde_json::Error> {
        RunView::deserialize(value)
    }

    /// The `type` of the phase object (`executing`, `auditing`, ...), if any.
    pub fn phase_name(&self) -> Option<&str> {
        self.phase
            .as_ref()
            .and_then(|p| p.get("type").or(Some(p)))
            .and_then(Value::as_str)
    }
}

/// A run log entry as served by `/log` and the event stream: the stream id plus the entry.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRecord {
    pub id: Option<String>,
    /// The typed entry, or the raw JSON when this CLI does not know the entry's type.
    pub entry: Result<LogEntry, Value>,
    pub raw: Value,
}

impl LogRecord {
    pub fn from_value(raw: Value) -> LogRecord {
        let id = raw.get("id").and_then(|v| match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        });
        let entry = LogEntry::deserialize(&raw).map_err(|_| raw.clone());
        LogRecord { id, entry, raw }
    }

    pub fn is_terminal(&self) -> bool {
        self.type_name() == Some("terminal")
    }

    /// Entries after which progress may have changed (`loopgate watch` prints it again).
    pub fn moves_progress(&self) -> bool {
        matches!(
            self.type_name(),
            Some("gate" | "pivot" | "spec_written" | "contract_proposed" | "contract_frozen")
        )
    }

    pub fn is_question(&self) -> bool {
        self.type_name() == Some("question")
    }

    pub fn type_name(&self) -> Option<&str> {
        self.raw.get("type").and_then(Value::as_str)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use loopgate_common::state::LogEvent;
    use serde_json::json;

    #[test]
    fn log_records_keep_their_stream_id() {
        let rec = LogRecord::from_value(json!({
            "id": "1700000000000-0", "at": 1, "generation": 1, "round": 2,
            "type": "gate", "passed": true, "snapshot": "ab", "reasons": []
        }));
        assert_eq!(rec.id.as_deref(), Some("1700000000000-0"));
        assert!(matches!(
            rec.entry,
            Ok(LogEntry {
                round: 2,
                event: LogEvent::Gate { passed: true, .. },
                ..
            })
        ));
        let unknown = LogRecord::from_value(
            json!({"at": 1, "generation": 1, "round": 0, "type": "new_kind"}),
        );
        assert!(unknown.entry.is_err());
        assert_eq!(unknown.type_name(), Some("new_kind"));
    }

    #[test]
    fn run_view_tolerates_missing_optional_fields() {
        let minimal = RunView::from_value(&json!({"id": "r1", "state": "running"})).unwrap();
        assert_eq!(minimal.round, 0);
        assert!(minimal.evidence.is_empty());
        let full = RunView::from_value(&json!({
            "id": "r1", "state": "completed", "phase": {"type": "finished"}, "round": 3,
            "generation": 1, "snapshot": "s", "base_snapshot": "b", "spec_hash": "h", "goal": "g",
            "checks": {"passing": 1, "total": 1}, "gate": {"passed": true, "reasons": [], "snapshot": "s"},
            "verdicts": {"status": "complete", "integrity": "clean", "contract": "aligned"},
            "evidence": [{"artifact_version": "s", "check_id": "c", "verdict": "pass", "produced_at": 1,
                          "log_digest": null, "exit_code": 0, "duration_ms": 5, "output_excerpt": ""}],
            "terminal_reason": "done", "question": null, "task_state": null, "usage": {},
            "created_at": 1, "updated_at": 2
        }))
        .unwrap();
        assert_eq!(full.phase_name(), Some("finished"));
        let flat_phase =
            RunView::from_value(&json!({"id": "r1", "state": "running", "phase": "executing"}))
                .unwrap();
        assert_eq!(flat_phase.phase_name(), Some("executing"));
        assert_eq!(full.evidence[0].verdict, "pass");
        assert!(RunView::from_value(&json!({"id": "r1", "state": "bogus"})).is_err());
    }
}
