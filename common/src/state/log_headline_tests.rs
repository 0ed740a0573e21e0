#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use serde_json::json;

fn headline(value: Value) -> String {
    serde_json::from_value::<LogEvent>(value.clone())
        .unwrap_or_else(|e| panic!("{value}: {e}"))
        .headline()
}

/// One entry of every event, with its headline: none falls back to the bare event name.
#[test]
fn every_event_has_its_own_headline() {
    let s = "a".repeat(64);
    let b = "b".repeat(64);
    let verdicts = json!({"status": "complete", "integrity": "clean", "contract": "aligned"});
    let cases = vec![
        (
            json!({"type": "submitted", "spec_hash": s, "base_snapshot": b, "criteria": 2}),
            "submitted: 2 acceptance criteria, base snapshot bbbbbbbbbbbb",
        ),
        (
            json!({"type": "submitted", "spec_hash": s, "base_snapshot": b, "criteria": 0}),
            "submitted: goal only (the contract is planned first), base snapshot bbbbbbbbbbbb",
        ),
        (
            json!({"type": "decision", "seq": 1, "route": "cli", "task": "Create hello.py\nthat prints", "task_state": null}),
            "next: cli — Create hello.py that prints",
        ),
        (
            json!({"type": "invalid_output", "seq": 1, "error": "no JSON", "raw": "?"}),
            "manager output not understood: no JSON",
        ),
        (
            json!({"type": "manager_error", "seq": 1, "error": "timeout"}),
            "manager error: timeout",
        ),
        (
            json!({"type": "exec_dispatched", "capability": "cli", "objective": "write it", "base_snapshot": b}),
            "executor (cli) dispatched: write it",
        ),
        (
            json!({"type": "exec_result", "worker": "exec-1", "candidate": s, "summary": "wrote hello.py",
                   "claimed_done": true, "tool_calls": 3, "error": null, "tokens": 120}),
            "executor exec-1: snapshot aaaaaaaaaaaa — its summary (a claim): wrote hello.py [3 tool calls] [120 tokens] (claims done)",
        ),
        (
            json!({"type": "exec_result", "worker": "exec-1", "candidate": null, "summary": "",
                   "claimed_done": false, "error": "model unreachable"}),
            "executor exec-1 failed: model unreachable",
        ),
        (
            json!({"type": "exec_dispatched", "capability": "cli", "objective": "write it", "base_snapshot": b,
                   "attempts": 3}),
            "executor (cli) dispatched as 3 attempts: write it",
        ),
        (
            json!({"type": "exec_result", "worker": "exec-2", "candidate": s, "summary": "wrote it",
                   "claimed_done": false, "error": null, "tokens": 90, "step_attempt": 2}),
            "attempt 2: executor exec-2: snapshot aaaaaaaaaaaa — its summary (a claim): wrote it [90 tokens]",
        ),
        (
            json!({"type": "episode_started", "role": "executor", "worker": "exec-2", "attempt": 1,
                   "step_attempt": 3}),
            "attempt 3: executor exec-2 started (attempt 1)",
        ),
        (
            json!({"type": "audit_report", "purpose": "round", "worker": "a", "snapshot": s, "verdicts": verdicts,
                   "passing": 7, "checked": 9, "gaps": [], "downgraded": false, "step_attempt": 1}),
            "attempt 1: audit: complete/clean/aligned — checks 7/9 passing",
        ),
        (
            json!({"type": "attempt_won", "attempt": 2, "of": 3, "candidate": s, "worker": "exec-2",
                   "tokens": 900, "passing": 7, "blocking": 9, "early": false,
                   "others": "attempt 1: 5/9 checks, outscored; attempt 3: failed"}),
            "attempt 2 of 3 won: 7/9 checks (snapshot aaaaaaaaaaaa); attempt 1: 5/9 checks, outscored; attempt 3: failed",
        ),
        (
            json!({"type": "attempt_won", "attempt": 1, "of": 2, "candidate": s, "worker": "exec-1",
                   "tokens": 10, "passing": 2, "blocking": 2, "early": true, "others": ""}),
            "attempt 1 of 2 won: 2/2 checks (snapshot aaaaaaaaaaaa); the others were cancelled",
        ),
        (
            json!({"type": "audit_dispatched", "purpose": "final", "candidate": s}),
            "final audit dispatched for snapshot aaaaaaaaaaaa",
        ),
        (
            json!({"type": "audit_dispatched", "purpose": "round", "candidate": s, "checks_only": true}),
            "round audit (checks only) dispatched for snapshot aaaaaaaaaaaa",
        ),
        (
            json!({"type": "audit_dispatched", "purpose": "round", "candidate": s, "checks_only": true,
                   "baseline": true}),
            "baseline checks dispatched for the starting workspace (snapshot aaaaaaaaaaaa)",
        ),
        (
            json!({"type": "audit_report", "purpose": "round", "worker": "a", "snapshot": s, "verdicts": verdicts,
                   "passing": 1, "checked": 2, "gaps": ["no test for b"], "downgraded": true}),
            "audit: complete/clean/aligned — checks 1/2 passing (downgraded by the auditor model); gaps: no test for b",
        ),
        (
            json!({"type": "gate", "passed": true, "snapshot": s, "reasons": []}),
            "gate: open on snapshot aaaaaaaaaaaa",
        ),
        (
            json!({"type": "gate", "passed": false, "snapshot": s, "reasons": ["check 'a' fails", "x"]}),
            "gate: closed — check 'a' fails; x",
        ),
        (
            json!({"type": "done_refused", "reasons": ["check 'a' fails"]}),
            "done refused: check 'a' fails",
        ),
        (
            json!({"type": "candidate_rejected", "candidate": s, "reason": "protected path changed"}),
            "snapshot aaaaaaaaaaaa rejected: protected path changed",
        ),
        (
            json!({"type": "question", "question": "Which port?"}),
            "question: Which port?",
        ),
        (
            json!({"type": "episode_started", "role": "executor", "worker": "exec-1", "attempt": 1, "queued_ms": 2500}),
            "executor exec-1 started (attempt 1, queued 2.5 s)",
        ),
        (
            json!({"type": "episode_started", "role": "auditor", "worker": "audit-1", "attempt": 2}),
            "auditor audit-1 started (attempt 2)",
        ),
        (
            json!({"type": "episode_progress", "worker": "exec-1", "turn": 3, "tool": "shell",
                "tool_calls": 2, "tokens": 1200, "elapsed_ms": 4500}),
            "executor exec-1 working: turn 3, calling shell, 2 tool calls, 1200 tokens, 4.5 s elapsed",
        ),
        (
            json!({"type": "episode_progress", "worker": "exec-1", "turn": 1, "elapsed_ms": 300,
                "step_attempt": 2}),
            "attempt 2: executor exec-1 working: turn 1, 0 tool calls, 0 tokens, 0.3 s elapsed",
        ),
        (
            json!({"type": "audit_progress", "worker": "audit-1", "stage": "checks",
                "check": "tests", "check_index": 2, "checks_total": 3, "elapsed_ms": 4500}),
            "auditor audit-1 auditing: running check tests (2 of 3), 4.5 s elapsed",
        ),
        (
            json!({"type": "audit_progress", "worker": "audit-1", "stage": "judge",
                "check_index": 3, "checks_total": 3, "elapsed_ms": 61000}),
            "auditor audit-1 auditing: asking the judge (3 of 3 checks run), 61.0 s elapsed",
        ),
        (
            json!({"type": "audit_progress", "worker": "audit-1", "stage": "rubric",
                "check_index": 0, "checks_total": 0, "elapsed_ms": 300}),
            "auditor audit-1 auditing: scoring the rubric (0 of 0 checks run), 0.3 s elapsed",
        ),
        (
            json!({"type": "exec_result", "worker": "exec-1", "candidate": null, "summary": "did it",
                "claimed_done": false, "error": null, "duration_ms": 61000, "transcript": "ab"}),
            "executor exec-1: its summary (a claim): did it [took 61.0 s]",
        ),
        (
            json!({"type": "deadline_missed", "kind": "exec_start", "detail": "no executor picked it up"}),
            "deadline missed: no executor picked it up",
        ),
        (
            json!({"type": "answered", "text": "port 8000"}),
            "answered: port 8000",
        ),
        (
            json!({"type": "resumed", "from_state": "budget_exhausted"}),
            "resumed after budget_exhausted",
        ),
        (
            json!({"type": "escalated", "profile": "strong", "after_failed_rounds": 2}),
            "executor escalated to profile 'strong' after 2 failed rounds",
        ),
        (
            json!({"type": "terminal", "state": "budget_exhausted", "reason": "max_rounds reached", "snapshot": s}),
            "budget_exhausted: max_rounds reached (snapshot aaaaaaaaaaaa)",
        ),
        (
            json!({"type": "spec_written", "snapshot": s}),
            "planning: spec.md written (snapshot aaaaaaaaaaaa)",
        ),
        (
            json!({"type": "contract_proposed", "spec_hash": s, "criteria": 3, "rubric": true, "awaiting_approval": true}),
            "planning: contract aaaaaaaaaaaa proposed (3 criteria, rubric), waiting for approval",
        ),
        (
            json!({"type": "contract_invalid", "error": "no criteria"}),
            "planning: proposed contract refused: no criteria",
        ),
        (
            json!({"type": "contract_frozen", "spec_hash": s, "criteria": 3, "source": "edited"}),
            "contract frozen: spec aaaaaaaaaaaa (3 criteria, edited)",
        ),
        (
            json!({"type": "rubric_scored", "snapshot": s, "average": 7.5, "threshold": 8.0, "strategy": null,
                   "layer": null, "passed": false, "summary": "rubric 7.5/8.0"}),
            "rubric 7.5/8.0",
        ),
        (
            json!({"type": "pivot", "from": s, "to": b, "reason": "a dead end"}),
            "PIVOT: snapshot aaaaaaaaaaaa rolled back to bbbbbbbbbbbb — a dead end",
        ),
        (
            json!({"type": "audit_reused", "snapshot": s, "from_round": 2}),
            "snapshot aaaaaaaaaaaa is unchanged from round 2: its audit is reused, not run again",
        ),
        (
            json!({"type": "stagnation", "rounds": 2, "escalated_to": null}),
            "no progress for 2 rounds: the manager is told to change approach",
        ),
        (
            json!({"type": "stagnation", "rounds": 2, "escalated_to": "strong"}),
            "no progress for 2 rounds: escalated (executor profile 'strong', fresh start from the attempt ledger)",
        ),
        (
            json!({"type": "instructed", "text": "use pytest\nnot unittest"}),
            "instruction: use pytest not unittest",
        ),
        (
            json!({"type": "paused", "phase": "executing"}),
            "paused (the executing step in flight finishes first)",
        ),
        (json!({"type": "paused", "phase": "queued"}), "paused"),
        (
            json!({"type": "held", "step": "decide"}),
            "held: the next step (decide) waits for unpause",
        ),
        (
            json!({"type": "unpaused", "paused_ms": 1500}),
            "unpaused after 1.5 s",
        ),
        (
            json!({"type": "continued", "goal": "Add bye.py", "spec_hash": s, "criteria": 2, "base_snapshot": b}),
            "continued as a new generation from snapshot bbbbbbbbbbbb: contract aaaaaaaaaaaa (2 criteria), goal: Add bye.py",
        ),
        (
            json!({"type": "step_sent_back", "seq": 2, "reason": "a repeat"}),
            "step sent back to the manager: a repeat",
        ),
        (
            json!({"type": "step_retried", "from_round": 1, "step": "fix it"}),
            "round 1's step failed its audit: an executor tries it again with that audit's evidence, no manager decision (budget.step_retries): fix it",
        ),
        (
            json!({"type": "clause_step", "clause": 2, "of": 3, "text": "Print 1 to 9.", "attempt": 1}),
            "the step is goal clause 2 of 3 (try 1), no manager decision (budget.clause_steps): Print 1 to 9.",
        ),
        (
            json!({"type": "clause_step", "clause": 3, "of": 3, "text": "Print 10.", "attempt": 1, "set_aside": [1, 2]}),
            "the step is goal clause 3 of 3 (try 1); clauses 1, 2 set aside, still failing after their tries, no manager decision (budget.clause_steps): Print 10.",
        ),
        (
            json!({"type": "goal_step", "of": 10}),
            "the step is the whole goal (10 clauses in one episode, every check), no manager decision (budget.goal_first); the clauses still failing after it are the next steps",
        ),
        (
            json!({"type": "step_replaced", "seq": 3, "dropped": "print hi", "step": "print hello"}),
            "the manager's step kept changing the goal's exact words (`print hi`): the executor gets the goal's own words instead: print hello",
        ),
        (
            json!({"type": "admission_queued"}),
            "queued: waiting for an admission slot ([manager] max_active_runs)",
        ),
        (
            json!({"type": "admitted", "waited_ms": 2000}),
            "admitted after 2.0 s in the admission queue",
        ),
        (
            json!({"type": "queue_wait", "round": 2, "capability": "gui", "waited_ms": 120000}),
            "round 2 still queued after 120.0 s: every `gui` executor is busy (queue wait, not a failed round)",
        ),
        (
            json!({"type": "dead_letter", "kind": "exec_result", "reason": "max deliveries"}),
            "dead letter: a exec_result message exhausted its deliveries (max deliveries); the step is retried as an infrastructure failure",
        ),
    ];
    let mut kinds = std::collections::BTreeSet::new();
    for (value, want) in cases {
        let event: LogEvent = serde_json::from_value(value.clone()).unwrap();
        kinds.insert(event.kind());
        assert_eq!(headline(value), want);
    }
    // Every event of `LogEvent` is in the table above.
    assert_eq!(kinds.len(), 43, "{kinds:?}");
}

#[test]
fn excerpts_flatten_and_cut() {
    assert_eq!(excerpt("a\n  b\tc", 10), "a b c");
    assert_eq!(excerpt("abcdef", 3), "abc…");
    assert_eq!(short_id("0123456789abcdef"), "0123456789ab");
    assert_eq!(short_id("abc"), "abc");
}

#[test]
fn long_fields_are_cut_to_one_line() {
    let long = "word ".repeat(100);
    let line = headline(json!({"type": "answered", "text": long}));
    assert!(line.ends_with('…') && !line.contains('\n'), "{line}");
    assert_eq!(line.chars().count(), "answered: ".len() + 200 + 1);
}
