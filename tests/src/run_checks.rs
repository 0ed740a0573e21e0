//! What a fault run must not break, read from one run's log and evidence: no step recorded
//! twice, no evidence lost, and how long the run went without a log entry.

use std::collections::BTreeMap;

use serde_json::Value;

/// The terminal states of a run.
pub const TERMINAL: [&str; 5] = [
    "completed",
    "blocked",
    "budget_exhausted",
    "cancelled",
    "failed",
];

/// One run after the fact.
#[derive(Debug, Clone)]
pub struct RunFindings {
    pub id: String,
    pub state: String,
    /// `kind (generation, round) xN` for each step the log records more than once.
    pub duplicate_steps: Vec<String>,
    /// Audited snapshots (and a completed run's final snapshot) without an evidence record.
    pub lost_evidence: Vec<String>,
    /// Audit reports in the log.
    pub audited: usize,
    /// Executor `episode_started` entries per (generation, round), with their workers.
    pub executor_starts: BTreeMap<(u64, u64), Vec<String>>,
    /// Auditor `episode_started` entries per (generation, round), with their workers.
    pub auditor_starts: BTreeMap<(u64, u64), Vec<String>>,
    /// Every log entry's `at` (Unix ms), in log order.
    pub entry_times: Vec<i64>,
    /// Every log entry, briefly, in log order.
    pub timeline: Vec<TimelineEntry>,
    /// The objective of each `exec_dispatched` entry, in log order (one per executor round).
    pub exec_objectives: Vec<String>,
}

/// One log entry, reduced to what the fault reports read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineEntry {
    pub at_ms: i64,
    pub kind: String,
    pub generation: u64,
    pub round: u64,
    /// `worker` of `episode_started`, `exec_result` and `audit_report`.
    pub worker: Option<String>,
}

impl RunFindings {
    pub fn is_terminal(&self) -> bool {
        TERMINAL.contains(&self.state.as_str())
    }

    /// The longest time between two consecutive log entries, in ms.
    pub fn longest_gap_ms(&self) -> i64 {
        self.entry_times
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or(0)
    }
}

fn key(e: &Value) -> (u64, u64) {
    (
        e["generation"].as_u64().unwrap_or(0),
        e["round"].as_u64().unwrap_or(0),
    )
}

/// One run's findings from its record, its log entries and the snapshots its evidence
/// records are bound to (`Stack::inspect_run` reads them from a manager).
pub fn findings(id: &str, run: &Value, entries: &[Value], bound: &[String]) -> RunFindings {
    let state = run["state"].as_str().unwrap_or("").to_string();
    let mut counts: BTreeMap<(String, (u64, u64)), usize> = BTreeMap::new();
    for e in entries {
        let kind = e["type"].as_str().unwrap_or("");
        if ["exec_dispatched", "exec_result", "audit_report", "gate"].contains(&kind) {
            *counts.entry((kind.to_string(), key(e))).or_insert(0) += 1;
        }
    }
    let duplicate_steps = counts
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|((kind, k), n)| format!("{kind} {k:?} x{n}"))
        .collect();
    let audited: Vec<String> = entries
        .iter()
        .filter(|e| e["type"] == "audit_report")
        .filter_map(|e| e["snapshot"].as_str().map(str::to_string))
        .collect();
    let mut lost_evidence: Vec<String> = audited
        .iter()
        .filter(|s| !bound.contains(s))
        .cloned()
        .collect();
    if state == "completed" {
        if let Some(snap) = run["snapshot"].as_str() {
            if !bound.iter().any(|b| b == snap) && !lost_evidence.iter().any(|l| l == snap) {
                lost_evidence.push(snap.to_string());
            }
        }
    }
    let mut executor_starts: BTreeMap<(u64, u64), Vec<String>> = BTreeMap::new();
    let mut auditor_starts: BTreeMap<(u64, u64), Vec<String>> = BTreeMap::new();
    for e in entries.iter().filter(|e| e["type"] == "episode_started") {
        let worker = e["worker"].as_str().unwrap_or("?").to_string();
        let map = if e["role"] == "executor" {
            &mut executor_starts
        } else {
            &mut auditor_starts
        };
        map.entry(key(e)).or_default().push(worker);
    }
    RunFindings {
        id: id.to_string(),
        state,
        duplicate_steps,
        lost_evidence,
        audited: audited.len(),
        executor_starts,
        auditor_starts,
        entry_times: entries.iter().filter_map(|e| e["at"].as_i64()).collect(),
        timeline: entries
            .iter()
            .map(|e| TimelineEntry {
                at_ms: e["at"].as_i64().unwrap_or(0),
                kind: e["type"].as_str().unwrap_or("?").to_string(),
                generation: key(e).0,
                round: key(e).1,
                worker: e["worker"].as_str().map(str::to_string),
            })
            .collect(),
        exec_objectives: entries
            .iter()
            .filter(|e| e["type"] == "exec_dispatched")
            .map(|e| e["objective"].as_str().unwrap_or_default().to_string())
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn duplicates_and_lost_evidence_are_found() {
        let entries = vec![
            json!({"type": "exec_result", "generation": 1, "round": 1, "at": 10}),
            json!({"type": "audit_report", "generation": 1, "round": 1, "snapshot": "s1", "at": 20}),
            json!({"type": "exec_result", "generation": 1, "round": 2, "at": 50}),
            json!({"type": "exec_result", "generation": 1, "round": 2, "at": 55}),
            json!({"type": "audit_report", "generation": 1, "round": 2, "snapshot": "s2", "at": 60}),
            json!({"type": "episode_started", "role": "executor", "worker": "exec-1", "generation": 1, "round": 2, "at": 40}),
        ];
        // (bound evidence, final snapshot) -> (duplicates, lost)
        for (bound, snapshot, dups, lost) in [
            (vec!["s1", "s2"], "s2", 1, 0),
            (vec!["s1"], "s2", 1, 1),
            (vec![], "s3", 1, 3),
        ] {
            let bound: Vec<String> = bound.into_iter().map(String::from).collect();
            let run = json!({"state": "completed", "snapshot": snapshot});
            let f = findings("r", &run, &entries, &bound);
            assert_eq!(f.duplicate_steps.len(), dups, "{f:?}");
            assert_eq!(f.lost_evidence.len(), lost, "{f:?}");
            assert_eq!(f.audited, 2);
            assert_eq!(f.executor_starts[&(1, 2)], vec!["exec-1".to_string()]);
            assert_eq!(f.longest_gap_ms(), 30);
        }
    }
}
