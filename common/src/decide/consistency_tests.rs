//! Every record `decide` hands back agrees with itself (state vs phase); a transition that
//! would not is refused. Every other test's `apply` also goes through the check, so each
//! transition the suite drives is a consistent one.

use super::tests::{exec_done, reply};
use super::*;
use crate::state::InconsistentRecord;
use crate::task::parse_task_toml;
use loopgate_protocol::usage::Usage;
use loopgate_protocol::wire::ExecResult;
use loopgate_protocol::wire::{EpisodeRole, ExecOutcome};

const TASK: &str = r#"
goal = "Create hello.py"
[[acceptance]]
id = "prints"
check = "python3 hello.py"
[budget]
# The run's first step comes at once here; baseline_tests.rs tests the starting
# workspace's checks before it.
baseline_checks = false
# Every step is the manager's here: a failing audit goes back to it (not to an executor, as
# a retry would), and the first step is its decision (not the goal's clause).
step_retries = 0
clause_steps = false
"#;

fn task(extra: &str) -> Task {
    parse_task_toml(&format!("{extra}\n{TASK}")).unwrap()
}

#[test]
fn new_runs_are_consistent() {
    for (name, extra, state, phase) in [
        ("plain", "", RunState::Queued, "deciding"),
        ("planned", "plan = true", RunState::Running, "executing"),
    ] {
        let step = start_run("r1", task(extra), "base", 0);
        assert_eq!(step.record.check_consistency(), Ok(()), "{name}");
        assert_eq!(
            (step.record.state, step.record.phase.name()),
            (state, phase),
            "{name}"
        );
        assert_eq!(
            step.record.schema,
            crate::state::RUN_RECORD_SCHEMA,
            "{name}"
        );
    }
}

/// A record that already disagrees (stored by a bug, or edited by hand): `queued` while a
/// round executes.
fn queued_but_executing() -> RunRecord {
    let r = start_run("r1", task(""), "base", 0).record;
    let mut r = reply(&r, "Next: cli\nTask: write hello.py").record;
    assert!(matches!(r.phase, Phase::Executing { .. }));
    r.state = RunState::Queued;
    r
}

#[test]
fn a_transition_to_an_inconsistent_record_is_refused() {
    let record = queued_but_executing();
    let started = RunEvent::EpisodeStarted(loopgate_protocol::wire::EpisodeStarted {
        attempt: 1,
        run_id: "r1".into(),
        generation: 1,
        round: 1,
        role: EpisodeRole::Executor,
        delivery_attempt: 1,
        worker: "w1".into(),
    });
    let frozen = RunEvent::ExecFinished(ExecResult {
        transcript: None,
        attempt: 1,
        run_id: "r1".into(),
        generation: 1,
        round: 1,
        delivery_attempt: 1,
        worker: "w1".into(),
        outcome: ExecOutcome::Frozen {
            candidate: "c1".into(),
            summary: "done".into(),
            claimed_done: true,
            steps: 1,
            tool_calls: 1,
            files_changed: 1,
            self_check_refusals: 0,
        },
        usage: Usage::default(),
        duration_ms: 1,
        agent_isolation: None,
    });
    // (event, the phase the refused record would have had)
    for (event, phase) in [(started, "executing"), (frozen, "auditing")] {
        let refused = InconsistentRecord {
            run_id: "r1".into(),
            state: RunState::Queued,
            phase,
        };
        assert_eq!(
            decide(&record, &event, 5),
            Decision::Refused(refused),
            "{event:?}"
        );
    }
}

#[test]
fn an_inconsistent_run_can_still_be_cancelled() {
    let step = match decide(
        &queued_but_executing(),
        &RunEvent::Cancel {
            reason: "stuck".into(),
        },
        5,
    ) {
        Decision::Apply(step) => step,
        other => panic!("{other:?}"),
    };
    assert_eq!(step.record.state, RunState::Cancelled);
    assert_eq!(step.record.phase, Phase::Finished);
    assert_eq!(step.record.check_consistency(), Ok(()));
}

#[test]
fn every_phase_a_run_goes_through_is_consistent() {
    // One run through deciding, executing, auditing, waiting_for_answer and finished, checked
    // at each step (the other tests cover the other paths through `apply`).
    let r = start_run("r1", task(""), "base", 0).record;
    let mut seen = vec![(r.state, r.phase.name())];
    let r = reply(&r, "Next: cli\nTask: write").record;
    seen.push((r.state, r.phase.name()));
    let r = exec_done(&r, "c1").record;
    seen.push((r.state, r.phase.name()));
    let r = reply(
        &super::tests::audit(&r, false, loopgate_protocol::verdict::Integrity::Clean).record,
        "Next: ask\nTask: which python?",
    )
    .record;
    seen.push((r.state, r.phase.name()));
    let r = super::tests::apply(
        &r,
        RunEvent::Cancel {
            reason: "enough".into(),
        },
    )
    .record;
    seen.push((r.state, r.phase.name()));
    assert_eq!(
        seen,
        vec![
            (RunState::Queued, "deciding"),
            (RunState::Running, "executing"),
            (RunState::Running, "auditing"),
            (RunState::WaitingForInput, "waiting_for_answer"),
            (RunState::Cancelled, "finished"),
        ]
    );
}
