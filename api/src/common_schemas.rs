//! OpenAPI schemas for the two views of `loopgate-common` types that the API shows in a shape
//! of its own. Every other common type the API carries (task file, budget, contract, verdicts,
//! rubric standing, usage, manifest, run state, planning stage, ...) derives its schema itself
//! (`loopgate-common`'s `openapi` feature). These are never built at run time.

use utoipa::ToSchema;

// Not `Phase` itself: the run view shows only `Phase::name()` (the phase's `type` tag), not
// the phase object with its round internals (increment, capability, candidate).
/// What the run is waiting for right now.
#[derive(ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PhaseName {
    Deciding,
    Executing,
    Auditing,
    WaitingForAnswer,
    /// A paused run whose step in flight has finished: its next step waits for unpause.
    Paused,
    Finished,
}

// A summary, not `LogEntry` itself: entries are answered as stored (never re-serialized),
// including ones written by older or newer managers, so only the keys every entry has are
// promised and the event's own keys stay open.
/// One run log entry (`LogEntry` in `loopgate-common`) with its stream id and its headline;
/// `type` names the event and decides the other fields. An entry this manager cannot read is
/// `null`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct LogRecord {
    /// The Redis stream id (`1700000000000-0`), also the SSE event id.
    id: String,
    at: i64,
    generation: u32,
    round: u32,
    /// The event (`decision`, `exec_result`, `audit_report`, `gate`, `terminal`, ...); the
    /// other keys depend on it.
    #[serde(rename = "type")]
    kind: String,
    /// The entry in one line, as people read it (`LogEvent::headline` in `loopgate-common`;
    /// the event's name for an event this manager does not know): what `loopgate log` prints
    /// after `[round N]` and the console's timeline shows. Added when the entry is served.
    headline: String,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::BTreeSet;

    use loopgate_common::state::{LogEntry, LogEvent};
    use utoipa::PartialSchema;

    use super::*;

    /// Every key the summary promises is one every stored entry has (plus the stream `id` and
    /// the `headline`, which the manager adds when it serves the entry).
    #[test]
    fn log_records_promise_only_keys_every_entry_has() {
        let entry = LogEntry {
            at: 1,
            generation: 1,
            round: 1,
            event: LogEvent::Answered { text: "t".into() },
        };
        let stored: BTreeSet<String> = serde_json::to_value(entry)
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        let schema = serde_json::to_value(LogRecord::schema()).unwrap();
        let promised: BTreeSet<String> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| *k != "id" && *k != crate::LOG_HEADLINE_KEY)
            .cloned()
            .collect();
        assert!(promised.is_subset(&stored), "{promised:?} vs {stored:?}");
        assert_eq!(promised.len(), 4, "{promised:?}");
    }
}
