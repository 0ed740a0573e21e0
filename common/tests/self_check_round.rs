//! The self-check budget through one round of the pure state machine: the task's
//! `budget.self_checks` rides to the executor in the `ExecRequest`, and the refusals the
//! episode reports land in the run log's `exec_result` entry. Old messages without the new
//! fields still decode (a default budget, no refusals).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use loopgate_common::budget::DEFAULT_SELF_CHECKS;
use loopgate_common::decide::{decide, start_run, Decision, RunEvent, Step};
use loopgate_common::state::{LogEvent, Phase};
use loopgate_common::task::parse_task_toml;
use loopgate_protocol::usage::Usage;
use loopgate_protocol::wire::{decode, ExecOutcome, ExecResult, Message};

/// The demo's task (`examples/hello`); its `[budget]` table comes last.
const TASK: &str = include_str!("../../examples/hello/task.toml");

fn apply(step: &Step, event: RunEvent) -> Step {
    match decide(&step.record, &event, 1) {
        Decision::Apply(step) => *step,
        other => panic!("expected Apply, got {other:?}"),
    }
}

/// The run after its first step went out (the demo's goal is one clause: the step itself,
/// with no manager decision; with a manager decision, after its `Next: cli`): its exec
/// request's `self_checks`.
fn dispatched(budget: &str) -> (Step, u32) {
    // The starting workspace's checks (before the first step) are tested in the decide
    // module's baseline tests.
    let task = parse_task_toml(&format!("{TASK}baseline_checks = false\n{budget}")).unwrap();
    let started = start_run("r1", task, "base", 0);
    let step = match started.record.phase {
        Phase::Deciding { seq } => apply(
            &started,
            RunEvent::ManagerReplied {
                generation: 1,
                seq,
                raw: "Next: cli\nTask: create hello.py".into(),
                usage: Usage::default(),
                gui_offered: false,
            },
        ),
        _ => started,
    };
    let self_checks = step
        .outgoing()
        .iter()
        .find_map(|out| match &out.message {
            Message::ExecRequest(req) => Some(req.self_checks),
            _ => None,
        })
        .expect("an exec request in the outbox");
    (step, self_checks)
}

#[test]
fn the_task_budget_reaches_the_exec_request() {
    let cases = [
        ("", DEFAULT_SELF_CHECKS),
        ("self_checks = 0\n", 0),
        ("self_checks = 5\n", 5),
    ];
    for (budget, want) in cases {
        assert_eq!(dispatched(budget).1, want, "{budget:?}");
    }
}

#[test]
fn refusals_are_logged_with_the_exec_result() {
    let (step, _) = dispatched("");
    let frozen = |refusals| ExecOutcome::Frozen {
        candidate: "cand".into(),
        summary: "wrote hello.py".into(),
        claimed_done: true,
        steps: 4,
        tool_calls: 5,
        files_changed: 1,
        self_check_refusals: refusals,
    };
    let cases = [
        (frozen(0), 0),
        (frozen(2), 2),
        (
            ExecOutcome::Failed {
                error: "model down".into(),
            },
            0,
        ),
    ];
    for (outcome, want) in cases {
        let result = ExecResult {
            transcript: None,
            attempt: 1,
            run_id: "r1".into(),
            generation: 1,
            round: step.record.round,
            delivery_attempt: 1,
            worker: "w".into(),
            outcome: outcome.clone(),
            usage: Usage::default(),
            duration_ms: 1,
            agent_isolation: None,
        };
        let next = apply(&step, RunEvent::ExecFinished(result));
        let logged = next
            .log
            .iter()
            .find_map(|entry| match &entry.event {
                LogEvent::ExecResult {
                    self_check_refusals,
                    ..
                } => Some(*self_check_refusals),
                _ => None,
            })
            .expect("an exec_result entry");
        assert_eq!(logged, want, "{outcome:?}");
        let entry = next.log.iter().find(|e| e.event.kind() == "exec_result");
        let json = serde_json::to_value(entry.unwrap()).unwrap();
        assert_eq!(json["self_check_refusals"], want, "{json}");
    }
}

#[test]
fn messages_and_log_entries_without_the_new_fields_still_decode() {
    let request = br#"{"v":1,"kind":"exec_request","run_id":"r","generation":1,"round":1,
        "capability":"cli","contract":{"goal":"g","criteria":[],"protected_paths":[],"spec_hash":"h"},
        "increment":{"objective":"o"},"base_snapshot":"b","executor_profile":"p",
        "episode_secs":5,"max_steps":3}"#;
    let Message::ExecRequest(req) = decode(request).unwrap() else {
        panic!("not an exec request");
    };
    assert_eq!(req.self_checks, DEFAULT_SELF_CHECKS);
    let result = br#"{"v":1,"kind":"exec_result","run_id":"r","generation":1,"round":1,
        "delivery_attempt":1,"worker":"w","usage":{"input_tokens":0,"output_tokens":0},
        "duration_ms":1,"outcome":{"type":"frozen","candidate":"c","summary":"s",
        "claimed_done":true,"steps":1,"tool_calls":1,"files_changed":1}}"#;
    let Message::ExecResult(result) = decode(result).unwrap() else {
        panic!("not an exec result");
    };
    assert!(matches!(
        result.outcome,
        ExecOutcome::Frozen {
            self_check_refusals: 0,
            ..
        }
    ));
    let entry: loopgate_common::state::LogEntry = serde_json::from_str(
        r#"{"at":1,"generation":1,"round":1,"type":"exec_result","worker":"w",
            "candidate":"c","summary":"s","claimed_done":true,"error":null}"#,
    )
    .unwrap();
    assert!(matches!(
        entry.event,
        LogEvent::ExecResult {
            self_check_refusals: 0,
            ..
        }
    ));
}
