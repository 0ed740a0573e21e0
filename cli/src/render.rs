//! Human-readable lines for runs and run log entries (the `--json` forms print the server's JSON).

use loopgate_common::state::{LogEvent, RunState};
use loopgate_protocol::verdict::Verdicts;
use serde::Serialize;
use serde_json::Value;

use crate::run_view::{LogRecord, RunView};

/// How many hex digits of a snapshot id people see.
pub const SNAPSHOT_PREFIX_LEN: usize = 12;
const TASK_EXCERPT_CHARS: usize = 100;

pub fn short_id(id: &str) -> &str {
    match id.char_indices().nth(SNAPSHOT_PREFIX_LEN) {
        Some((i, _)) => &id[..i],
        None => id,
    }
}

/// First `max` characters of `text` on one line, with `…` when cut.
pub fn excerpt(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max).collect();
        format!("{cut}…")
    }
}

/// The serde (snake_case) name of an enum value.
fn wire_name(value: &impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "?".to_string(),
    }
}

pub fn verdicts_text(v: &Verdicts) -> String {
    format!(
        "{}/{}/{}",
        wire_name(&v.status),
        wire_name(&v.integrity),
        wire_name(&v.contract)
    )
}

/// One line per log entry: `[round N] what happened`.
pub fn log_line(record: &LogRecord) -> String {
    match &record.entry {
        Ok(entry) => format!("[round {}] {}", entry.round, event_text(&entry.event)),
        Err(raw) => {
            let round = raw.get("round").and_then(Value::as_u64).unwrap_or(0);
            let kind = raw.get("type").and_then(Value::as_str).unwrap_or("entry");
            format!("[round {round}] {kind}: {}", excerpt(&raw.to_string(), 200))
        }
    }
}

fn event_text(event: &LogEvent) -> String {
    match event {
        LogEvent::Submitted {
            base_snapshot,
            criteria,
            ..
        } if *criteria == 0 => format!(
            "submitted: goal only (the contract is planned first), base snapshot {}",
            short_id(base_snapshot)
        ),
        LogEvent::Submitted {
            base_snapshot,
            criteria,
            ..
        } => format!(
            "submitted: {criteria} acceptance criteria, base snapshot {}",
            short_id(base_snapshot)
        ),
        LogEvent::Decision { route, task, .. } => {
            format!(
                "next: {} — {}",
                route.as_str(),
                excerpt(task, TASK_EXCERPT_CHARS)
            )
        }
        LogEvent::InvalidOutput { error, .. } => {
            format!("manager output not understood: {}", excerpt(error, 200))
        }
        LogEvent::ManagerError { error, .. } => format!("manager error: {}", excerpt(error, 200)),
        LogEvent::ExecDispatched {
            capability,
            objective,
            ..
        } => format!(
            "executor ({}) dispatched: {}",
            capability.as_str(),
            excerpt(objective, TASK_EXCERPT_CHARS)
        ),
        LogEvent::ExecResult {
            worker,
            candidate,
            summary,
            claimed_done,
            tool_calls,
            error,
            self_check_refusals,
            agent_isolation,
            tokens,
        } => {
            let mut text = match (candidate, error) {
                (_, Some(error)) => format!("executor {worker} failed: {}", excerpt(error, 200)),
                (Some(candidate), None) => format!(
                    "executor {worker}: snapshot {} — {}",
                    short_id(candidate),
                    excerpt(summary, TASK_EXCERPT_CHARS)
                ),
                (None, None) => format!(
                    "executor {worker}: {}",
                    excerpt(summary, TASK_EXCERPT_CHARS)
                ),
            };
            if *tool_calls > 0 {
                text.push_str(&format!(" [{tool_calls} tool calls]"));
            }
            if let Some(tokens) = tokens.filter(|t| *t > 0) {
                text.push_str(&format!(" [{tokens} tokens]"));
            }
            if *self_check_refusals > 0 {
                text.push_str(&format!(
                    " [finish refused {self_check_refusals}x by self-check]"
                ));
            }
            if let Some(warning) = agent_isolation.as_ref().and_then(|i| i.warning()) {
                text.push_str(&format!(" [{warning}]"));
            }
            if *claimed_done {
                text.push_str(" (claims done)");
            }
            text
        }
        LogEvent::AuditDispatched { purpose, candidate } => format!(
            "{} audit dispatched for snapshot {}",
            wire_name(purpose),
            short_id(candidate)
        ),
        LogEvent::AuditReport {
            verdicts,
            passing,
            checked,
            gaps,
            downgraded,
            ..
        } => {
            let mut text = format!(
                "audit: {} — checks {passing}/{checked} passing",
                verdicts_text(verdicts)
            );
            if *downgraded {
                text.push_str(" (downgraded by the auditor model)");
            }
            if !gaps.is_empty() {
                text.push_str(&format!("; gaps: {}", excerpt(&gaps.join("; "), 200)));
            }
            text
        }
        LogEvent::Gate {
            passed,
            snapshot,
            reasons,
        } => {
            if *passed {
                format!("gate: passed on snapshot {}", short_id(snapshot))
            } else {
                format!("gate: closed — {}", excerpt(&reasons.join("; "), 200))
            }
        }
        LogEvent::DoneRefused { reasons } => {
            format!("done refused: {}", excerpt(&reasons.join("; "), 200))
        }
        LogEvent::CandidateRejected { candidate, reason } => format!(
            "snapshot {} rejected: {}",
            short_id(candidate),
            excerpt(reason, 200)
        ),
        LogEvent::Question { question } => format!("question: {question}"),
        LogEvent::EpisodeStarted {
            role,
            worker,
            attempt,
            queued_ms,
        } => {
            let role = match role {
                loopgate_protocol::wire::EpisodeRole::Executor => "executor",
                loopgate_protocol::wire::EpisodeRole::Auditor => "auditor",
            };
            match queued_ms {
                Some(ms) => format!(
                    "{role} {worker} started (attempt {attempt}, queued {:.1} s)",
                    *ms as f64 / 1000.0
                ),
                None => format!("{role} {worker} started (attempt {attempt})"),
            }
        }
        LogEvent::DeadlineMissed { detail, .. } => {
            format!("deadline missed: {}", excerpt(detail, 200))
        }
        LogEvent::Answered { text } => format!("answered: {}", excerpt(text, 200)),
        LogEvent::Resumed { from_state } => format!("resumed after {}", from_state.as_str()),
        LogEvent::Instructed { text } => format!("instruction: {}", excerpt(text, 200)),
        LogEvent::Paused { phase } => match phase.as_str() {
            "deciding" | "executing" | "auditing" => {
                format!("paused (the {phase} step in flight finishes first)")
            }
            _ => "paused".to_string(),
        },
        LogEvent::Held { step } => format!("held: the next step ({step}) waits for unpause"),
        LogEvent::Unpaused { paused_ms } => {
            format!("unpaused after {:.1} s", *paused_ms as f64 / 1000.0)
        }
        LogEvent::Continued {
            goal,
            spec_hash,
            criteria,
            base_snapshot,
        } => format!(
            "continued as a new generation from snapshot {}: contract {} ({criteria} criteria), goal: {}",
            short_id(base_snapshot),
            short_id(spec_hash),
            excerpt(goal, 200)
        ),
        LogEvent::Escalated {
            profile,
            after_failed_rounds,
        } => format!(
            "executor escalated to profile '{profile}' after {after_failed_rounds} failed rounds"
        ),
        LogEvent::Terminal {
            state,
            reason,
            snapshot,
        } => format!(
            "{}: {} (snapshot {})",
            state.as_str(),
            excerpt(reason, 200),
            short_id(snapshot)
        ),
        LogEvent::SpecWritten { snapshot } => {
            format!(
                "planning: spec.md written (snapshot {})",
                short_id(snapshot)
            )
        }
        LogEvent::ContractProposed {
            spec_hash,
            criteria,
            rubric,
            awaiting_approval,
        } => format!(
            "planning: contract {} proposed ({criteria} criteria{}){}",
            short_id(spec_hash),
            if *rubric { ", rubric" } else { "" },
            if *awaiting_approval {
                ", waiting for approval"
            } else {
                ""
            }
        ),
        LogEvent::ContractInvalid { error } => {
            format!(
                "planning: proposed contract refused: {}",
                excerpt(error, 200)
            )
        }
        LogEvent::ContractFrozen {
            spec_hash,
            criteria,
            source,
        } => format!(
            "contract frozen: spec {} ({criteria} criteria, {})",
            short_id(spec_hash),
            wire_name(source)
        ),
        LogEvent::RubricScored { summary, .. } => excerpt(summary, 200),
        LogEvent::Pivot { from, to, reason } => format!(
            "PIVOT: snapshot {} rolled back to {} — {}",
            short_id(from),
            short_id(to),
            excerpt(reason, 200)
        ),
        LogEvent::AuditReused {
            snapshot,
            from_round,
        } => format!(
            "snapshot {} is unchanged from round {from_round}: its audit is reused, not run again",
            short_id(snapshot)
        ),
        LogEvent::Stagnation {
            rounds,
            escalated_to,
        } => match escalated_to {
            Some(profile) => format!(
                "no progress for {rounds} rounds: escalated (executor profile '{profile}', fresh start from the attempt ledger)"
            ),
            None => format!(
                "no progress for {rounds} rounds: the manager is told to change approach"
            ),
        },
        LogEvent::StepSentBack { reason, .. } => {
            format!("step sent back to the manager: {}", excerpt(reason, 200))
        }
        LogEvent::StepRetried { from_round, step } => format!(
            "round {from_round}'s step failed its audit: an executor tries it again with that audit's evidence, no manager decision (budget.step_retries): {}",
            excerpt(step, 120)
        ),
        LogEvent::StepReplaced { dropped, step, .. } => format!(
            "the manager's step kept changing the goal's exact words (`{}`): the executor gets the goal's own words instead: {}",
            excerpt(dropped, 80),
            excerpt(step, 120)
        ),
        LogEvent::AdmissionQueued => {
            "queued: waiting for an admission slot ([manager] max_active_runs)".to_string()
        }
        LogEvent::Admitted { waited_ms } => format!(
            "admitted after {:.1} s in the admission queue",
            *waited_ms as f64 / 1000.0
        ),
        LogEvent::QueueWait {
            round,
            capability,
            waited_ms,
        } => format!(
            "round {round} still queued after {:.1} s: every `{}` executor is busy (queue wait, not a failed round)",
            *waited_ms as f64 / 1000.0,
            capability.as_str()
        ),
        LogEvent::DeadLetter { kind, reason } => format!(
            "dead letter: a {kind} message exhausted its deliveries ({}); the step is retried as an infrastructure failure",
            excerpt(reason, 160)
        ),
    }
}

/// `loopgate status` in human form, at `now_ms` (Unix milliseconds).
pub fn run_summary(view: &RunView, now_ms: i64) -> Vec<String> {
    let rounds = match (view.max_rounds, view.counted_rounds) {
        (Some(max), Some(counted)) if counted != view.round => {
            format!("{}, {counted}/{max} counted", view.round)
        }
        (Some(max), _) => format!("{}/{max}", view.round),
        (None, _) => view.round.to_string(),
    };
    let name = view
        .name
        .as_deref()
        .map(|n| format!(" \"{n}\""))
        .unwrap_or_default();
    let mut lines = vec![format!(
        "run {}{name}: {} (round {rounds}, generation {})",
        view.id,
        view.state.as_str(),
        view.generation
    )];
    if let Some(goal) = &view.goal {
        lines.push(format!("goal: {}", excerpt(goal, 200)));
    }
    if let Some(phase) = view.phase_name() {
        lines.push(format!("phase: {phase}"));
    }
    if let Some(snapshot) = &view.snapshot {
        let base = view.base_snapshot.as_deref().map(short_id).unwrap_or("?");
        lines.push(format!("snapshot: {snapshot} (base {base})"));
    }
    match (&view.progress, view.checks) {
        (Some(progress), _) => lines.push(format!("progress: {progress}")),
        (None, Some(checks)) => lines.push(format!(
            "checks: {}/{} passing",
            checks.passing, checks.total
        )),
        (None, None) => {}
    }
    if let Some(since) = view.queued_since {
        let secs = now_ms.saturating_sub(since).max(0) / 1000;
        lines.push(format!(
            "queue: round {} waits for a free worker ({secs} s so far; a wait costs no round)",
            view.round
        ));
    }
    if let Some(verdicts) = &view.verdicts {
        lines.push(format!("audit: {}", verdicts_text(verdicts)));
    }
    if let Some(gate) = &view.gate {
        if gate.passed {
            lines.push("gate: passed".to_string());
        } else {
            lines.push(format!("gate: closed — {}", gate.reasons.join("; ")));
        }
    }
    if let Some(tokens) = view.total_tokens {
        lines.push(format!("tokens: {tokens}"));
    }
    if let Some(task_state) = &view.task_state {
        lines.push(format!("task state: {}", excerpt(task_state, 300)));
    }
    if view.state == RunState::WaitingForInput {
        if let Some(question) = &view.question {
            lines.push(format!("question: {question}"));
        }
        if view.planning.as_deref() == Some("approval") {
            lines.push(format!(
                "review with: loopgate contract {id}; approve with: loopgate approve {id} [--edit FILE]",
                id = view.id
            ));
        } else {
            lines.push(format!("answer with: loopgate answer {} \"TEXT\"", view.id));
        }
    }
    if view.state == RunState::Paused {
        lines.push(format!("unpause with: loopgate unpause {}", view.id));
    }
    if !view.instructions.is_empty() {
        lines.push("operator instructions (newest last):".to_string());
        for i in &view.instructions {
            lines.push(format!("  - (round {}) {}", i.round, excerpt(&i.text, 200)));
        }
    }
    if let Some(reason) = &view.terminal_reason {
        lines.push(format!("reason: {reason}"));
    }
    lines.extend(evidence_lines(view));
    lines
}

fn evidence_lines(view: &RunView) -> Vec<String> {
    if view.evidence.is_empty() {
        return Vec::new();
    }
    let mut lines = vec!["evidence:".to_string()];
    for e in &view.evidence {
        let exit = e
            .exit_code
            .map(|c| format!(", exit {c}"))
            .unwrap_or_default();
        lines.push(format!(
            "  {}: {} on snapshot {}{exit}",
            e.check_id,
            e.verdict,
            short_id(&e.artifact_version)
        ));
    }
    lines
}

/// What `watch` prints when the run ends: state, reason, snapshot id and the evidence.
pub fn final_report(view: &RunView) -> Vec<String> {
    let reason = view.terminal_reason.as_deref().unwrap_or("no reason given");
    let mut lines = vec![format!("run {} {}: {reason}", view.id, view.state.as_str())];
    if let Some(snapshot) = &view.snapshot {
        lines.push(format!("snapshot: {snapshot}"));
    }
    if let Some(progress) = &view.progress {
        lines.push(format!("progress: {progress}"));
    }
    lines.extend(evidence_lines(view));
    if view.snapshot.is_some() {
        lines.push(format!("get the files: loopgate checkout {} DIR", view.id));
    }
    lines
}

/// `loopgate runs` in human form.
pub fn runs_table(views: &[RunView]) -> Vec<String> {
    if views.is_empty() {
        return vec!["no runs".to_string()];
    }
    let id_width = views.iter().map(|v| v.id.len()).max().unwrap_or(2).max(2);
    let mut lines = vec![format!(
        "{:id_width$}  {:17}  {:>5}  {:>6}  GOAL",
        "ID", "STATE", "ROUND", "CHECKS"
    )];
    for v in views {
        let checks = v
            .checks
            .map(|c| format!("{}/{}", c.passing, c.total))
            .unwrap_or_else(|| "-".to_string());
        lines.push(format!(
            "{:id_width$}  {:17}  {:>5}  {:>6}  {}",
            v.id,
            v.state.as_str(),
            v.round,
            checks,
            excerpt(v.goal.as_deref().unwrap_or(""), 60)
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn line(v: Value) -> String {
        log_line(&LogRecord::from_value(v))
    }

    #[test]
    fn log_lines_table() {
        let snap = "a".repeat(64);
        let cases = vec![
            (
                json!({"at":1,"generation":1,"round":1,"type":"decision","seq":1,"route":"cli",
                       "task":"Create hello.py\nthat prints","task_state":null}),
                "[round 1] next: cli — Create hello.py that prints",
            ),
            (
                json!({"at":1,"generation":1,"round":1,"type":"audit_report","purpose":"round","worker":"audit-1",
                       "snapshot":snap,"verdicts":{"status":"complete","integrity":"clean","contract":"aligned"},
                       "passing":1,"checked":1,"gaps":[],"downgraded":false}),
                "[round 1] audit: complete/clean/aligned — checks 1/1 passing",
            ),
            (
                json!({"at":1,"generation":1,"round":2,"type":"gate","passed":false,"snapshot":snap,
                       "reasons":["check 'a' fails","integrity is suspect, not clean"]}),
                "[round 2] gate: closed — check 'a' fails; integrity is suspect, not clean",
            ),
            (
                json!({"at":1,"generation":1,"round":2,"type":"exec_result","worker":"exec-1","candidate":snap,
                       "summary":"wrote hello.py","claimed_done":true,"tool_calls":3,"error":null}),
                "[round 2] executor exec-1: snapshot aaaaaaaaaaaa — wrote hello.py [3 tool calls] (claims done)",
            ),
            (
                json!({"at":1,"generation":1,"round":2,"type":"exec_result","worker":"exec-1","candidate":snap,
                       "summary":"fixed hello.py","claimed_done":true,"tool_calls":5,"error":null,
                       "self_check_refusals":2}),
                "[round 2] executor exec-1: snapshot aaaaaaaaaaaa — fixed hello.py [5 tool calls] [finish refused 2x by self-check] (claims done)",
            ),
            (
                json!({"at":1,"generation":1,"round":3,"type":"terminal","state":"budget_exhausted",
                       "reason":"max_rounds reached","snapshot":snap}),
                "[round 3] budget_exhausted: max_rounds reached (snapshot aaaaaaaaaaaa)",
            ),
            (
                json!({"at":1,"generation":1,"round":2,"type":"instructed","text":"use pytest\nnot unittest"}),
                "[round 2] instruction: use pytest not unittest",
            ),
            (
                json!({"at":1,"generation":1,"round":2,"type":"paused","phase":"executing"}),
                "[round 2] paused (the executing step in flight finishes first)",
            ),
            (
                json!({"at":1,"generation":1,"round":2,"type":"held","step":"decide"}),
                "[round 2] held: the next step (decide) waits for unpause",
            ),
            (
                json!({"at":1,"generation":1,"round":2,"type":"unpaused","paused_ms":1500}),
                "[round 2] unpaused after 1.5 s",
            ),
            (
                json!({"at":1,"generation":2,"round":2,"type":"continued","goal":"Add bye.py",
                       "spec_hash":snap,"criteria":2,"base_snapshot":snap}),
                "[round 2] continued as a new generation from snapshot aaaaaaaaaaaa: contract aaaaaaaaaaaa (2 criteria), goal: Add bye.py",
            ),
            (
                json!({"at":1,"generation":1,"round":4,"type":"something_new","x":1}),
                "[round 4] something_new: ",
            ),
        ];
        for (value, expected) in cases {
            let got = line(value);
            assert!(got.starts_with(expected), "got {got:?}, want {expected:?}");
        }
    }

    #[test]
    fn excerpts_flatten_and_cut() {
        assert_eq!(excerpt("a\n  b\tc", 10), "a b c");
        assert_eq!(excerpt("abcdef", 3), "abc…");
        assert_eq!(short_id("0123456789abcdef"), "0123456789ab");
        assert_eq!(short_id("abc"), "abc");
    }

    #[test]
    fn final_report_names_state_snapshot_and_evidence() {
        let view = RunView::from_value(&json!({
            "id": "r1", "state": "completed", "snapshot": "f".repeat(64), "terminal_reason": "all checks pass",
            "evidence": [{"artifact_version": "f".repeat(64), "check_id": "prints-greeting", "verdict": "pass", "exit_code": 0}]
        }))
        .unwrap();
        let lines = final_report(&view);
        assert_eq!(lines[0], "run r1 completed: all checks pass");
        assert_eq!(lines[1], format!("snapshot: {}", "f".repeat(64)));
        assert!(
            lines.contains(&"  prints-greeting: pass on snapshot ffffffffffff, exit 0".to_string())
        );
    }
}
