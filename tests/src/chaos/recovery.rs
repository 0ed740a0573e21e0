//! How long after a fault the work it hit moved again, read from the runs' timelines.

use super::fault::{Action, Component, Fault};
use crate::RunFindings;

/// Step results: the entries a fault's recovery waits for.
const PROGRESS: [&str; 3] = ["exec_result", "audit_report", "gate"];

/// What a fault held up, measured from the fault (ms); `None` when it held nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Recovered {
    /// Until the work had its results again.
    pub result_ms: Option<i64>,
    /// Until the work moved again: a result, or (for a fault on one worker) a new episode of
    /// each step it held.
    pub moved_ms: Option<i64>,
}

/// How long after `fault` the work it hit moved again. A fault on one worker (killed, frozen,
/// its link cut): until every step that worker had started and not finished at the fault has
/// its result, and until each has its result or a new episode (taken over, or run again by
/// the restarted worker); `None` if it held none. Any other fault (a full disk hits every
/// executor): until the next step result of any run after the component was back, counted
/// from the fault, for both.
pub(crate) fn recovery_of(fault: &Fault, findings: &[RunFindings]) -> Recovered {
    let worker = matches!(fault.component, Component::Executor | Component::Auditor)
        && fault.action != Action::DiskFull;
    if !worker {
        let next = findings
            .iter()
            .flat_map(|f| &f.timeline)
            .filter(|e| e.at_ms >= fault.back_ms && PROGRESS.contains(&e.kind.as_str()))
            .map(|e| e.at_ms - fault.at_ms)
            .min();
        return Recovered {
            result_ms: next,
            moved_ms: next,
        };
    }
    let (result_kind, role_prefix) = if fault.component == Component::Executor {
        ("exec_result", "exec-")
    } else {
        ("audit_report", "audit-")
    };
    let mut recovered = Recovered::default();
    let later = |a: Option<i64>, b: i64| Some(a.unwrap_or(0).max(b));
    for f in findings {
        let held: Vec<((u64, u64), i64)> = f
            .timeline
            .iter()
            .filter(|e| {
                e.kind == "episode_started"
                    && e.at_ms <= fault.at_ms
                    && e.worker.as_deref() == Some(fault.target.as_str())
            })
            .map(|e| ((e.generation, e.round), e.at_ms))
            .collect();
        for (key, started_ms) in held {
            // The held episode's result is the first of its step after it started: a round
            // can log more than one (the audit of the starting workspace shares round 1 with
            // the audit of round 1's candidate).
            let result = f.timeline.iter().find(|e| {
                e.kind == result_kind && (e.generation, e.round) == key && e.at_ms >= started_ms
            });
            let Some(result) = result.filter(|r| r.at_ms > fault.at_ms) else {
                // Finished before the fault (nothing held up), or never (the run's own
                // figures say so).
                continue;
            };
            let restarted = f.timeline.iter().find(|e| {
                e.kind == "episode_started"
                    && (e.generation, e.round) == key
                    && e.at_ms > fault.at_ms
                    && e.worker
                        .as_deref()
                        .is_some_and(|w| w.starts_with(role_prefix))
            });
            let moved = restarted.map_or(result.at_ms, |e| e.at_ms.min(result.at_ms));
            recovered.result_ms = later(recovered.result_ms, result.at_ms - fault.at_ms);
            recovered.moved_ms = later(recovered.moved_ms, moved - fault.at_ms);
        }
    }
    recovered
}
