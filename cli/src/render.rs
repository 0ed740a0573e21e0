//! Human-readable lines for runs and run log entries (the `--json` forms print the server's JSON).

use loopgate_api::LOG_HEADLINE_KEY;
pub use loopgate_common::state::excerpt;
use loopgate_common::state::{short_id, verdicts_text, RunState};
use serde_json::Value;

use crate::run_view::{LogRecord, RunView};

/// One line per log entry: `[round N] what happened`. The words are the entry's headline: the
/// manager's (`headline`), or, from a manager that does not send one, this CLI's own
/// ([`loopgate_common::state::LogEvent::headline`]) for an event it knows, else the event's name
/// and its JSON.
pub fn log_line(record: &LogRecord) -> String {
    let round = record.raw.get("round").and_then(Value::as_u64).unwrap_or(0);
    if let Some(headline) = record.raw.get(LOG_HEADLINE_KEY).and_then(Value::as_str) {
        return format!("[round {round}] {headline}");
    }
    match &record.entry {
        Ok(entry) => format!("[round {}] {}", entry.round, entry.event.headline()),
        Err(raw) => {
            let kind = raw.get("type").and_then(Value::as_str).unwrap_or("entry");
            format!("[round {round}] {kind}: {}", excerpt(&raw.to_string(), 200))
        }
    }
}

/// `attempts: [round N] attempt K of M won: P/B checks ...`: the latest round of several
/// attempts in the run's log entries (its `attempt_won` headline), for `loopgate status`;
/// `None` when no step ran as several attempts.
pub fn attempts_line(entries: &[Value]) -> Option<String> {
    let last = entries
        .iter()
        .rev()
        .find(|e| e.get("type").and_then(Value::as_str) == Some("attempt_won"))?;
    Some(format!(
        "attempts:  {}",
        log_line(&LogRecord::from_value(last.clone()))
    ))
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
    if let Some(origin) = &view.origin {
        lines.push(format!(
            "started from commit {} (tree {})",
            origin.describe(),
            short_id(&origin.tree)
        ));
        if view.state == RunState::Completed {
            lines.push(format!("put it on a branch: loopgate apply {}", view.id));
        }
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
    for p in &view.episode_progress {
        lines.push(format!(
            "running: executor {} turn {}{}, {} tool calls, {} tokens, {} s in (its last notice)",
            p.worker,
            p.turn,
            p.tool
                .as_deref()
                .map(|t| format!(", calling {t}"))
                .unwrap_or_default(),
            p.tool_calls,
            p.tokens,
            p.elapsed_ms / 1000
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
        lines.push(tokens_line(view, tokens));
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

/// `tokens: N`, with the prompt tokens the providers read from their caches when there were
/// some.
fn tokens_line(view: &RunView, tokens: u64) -> String {
    let u = &view.usage;
    let cached = [u.manager, u.executor, u.auditor]
        .iter()
        .fold(0u64, |sum, role| {
            sum.saturating_add(role.cached_prompt_tokens)
        });
    if cached == 0 {
        format!("tokens: {tokens}")
    } else {
        format!("tokens: {tokens} ({cached} prompt tokens read from cache)")
    }
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
        let took = e
            .duration_ms
            .map(|ms| format!(", took {ms} ms"))
            .unwrap_or_default();
        lines.push(format!(
            "  {}: {} on snapshot {}{exit}{took}",
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
    if view.origin.is_some() && view.state == RunState::Completed {
        lines.push(format!(
            "put it on a branch (verified first): loopgate apply {}",
            view.id
        ));
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

    #[test]
    fn the_latest_round_of_attempts_is_the_status_line() {
        let won = |round: u64, attempt: u64| {
            serde_json::json!({"type": "attempt_won", "at": 0, "generation": 1, "round": round,
                "attempt": attempt, "of": 3, "candidate": "a".repeat(64), "worker": "w",
                "tokens": 1, "passing": 7, "blocking": 9, "early": false, "others": ""})
        };
        let other = serde_json::json!({"type": "gate", "at": 0, "generation": 1, "round": 2,
            "passed": false, "snapshot": "s", "reasons": []});
        assert_eq!(attempts_line(std::slice::from_ref(&other)), None);
        assert_eq!(
            attempts_line(&[won(1, 1), won(2, 2), other]).as_deref(),
            Some("attempts:  [round 2] attempt 2 of 3 won: 7/9 checks (snapshot aaaaaaaaaaaa)")
        );
    }
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
                json!({"at":1,"generation":1,"round":2,"type":"clause_step","clause":2,"of":2,
                       "text":"Create b.txt.","attempt":1}),
                "[round 2] the step is goal clause 2 of 2 (try 1), no manager decision (budget.clause_steps): Create b.txt.",
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
    fn tokens_line_shows_cached_prompt_tokens_when_some() {
        let cases = [
            (json!({}), "tokens: 120"),
            (
                json!({"executor": {"input_tokens": 100, "output_tokens": 20}}),
                "tokens: 120",
            ),
            (
                json!({
                    "executor": {"input_tokens": 80, "output_tokens": 10, "cached_prompt_tokens": 60},
                    "manager": {"input_tokens": 20, "output_tokens": 10, "cached_prompt_tokens": 5},
                    "auditor": {"input_tokens": 0, "output_tokens": 0}
                }),
                "tokens: 120 (65 prompt tokens read from cache)",
            ),
        ];
        for (usage, want) in cases {
            let view = RunView::from_value(&json!({
                "id": "r1", "state": "running", "usage": usage, "total_tokens": 120
            }))
            .unwrap();
            let lines = run_summary(&view, 0);
            assert!(lines.contains(&want.to_string()), "{lines:?}");
        }
    }

    #[test]
    fn status_says_what_a_running_episode_does() {
        let view = RunView::from_value(&json!({
            "id": "r1", "state": "running", "episode_progress": [
                {"run_id": "r1", "generation": 1, "round": 2, "delivery_attempt": 1,
                 "worker": "exec-1", "turn": 3, "tool": "shell", "tool_calls": 2,
                 "tokens": 900, "elapsed_ms": 7400}
            ]
        }))
        .unwrap();
        let lines = run_summary(&view, 0);
        assert!(
            lines.contains(
                &"running: executor exec-1 turn 3, calling shell, 2 tool calls, 900 tokens, 7 s in (its last notice)"
                    .to_string()
            ),
            "{lines:?}"
        );
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
