//! The manager's JSON shapes as the CLI reads them: the API's `RunView` (shared with the
//! manager in `loopgate-api`, read leniently: fields the CLI does not show may be missing or
//! change) and log records (`common::state::LogEntry` plus its stream id).

pub use loopgate_api::{Checks, EvidenceView, GateView, RunView};
use loopgate_common::state::LogEntry;
use serde::Deserialize;
use serde_json::Value;

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
