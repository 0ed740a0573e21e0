//! Admission (`queued` until a slot is free) and dead letters (a step whose message
//! exhausted its deliveries fails now, not at its deadline).

use super::tests::{apply, exec_done, kinds, reply, started, TASK};
use super::*;
use crate::state::Target;
use crate::task::parse_task_toml;
use loopgate_protocol::wire::{DecideRequest, Message};

fn waiting() -> RunRecord {
    start_run_with(
        "r1",
        parse_task_toml(TASK).unwrap(),
        "base",
        1_000,
        true,
        Default::default(),
    )
    .record
}

#[test]
fn a_run_waiting_for_a_slot_dispatches_nothing_until_admitted() {
    let step = start_run_with(
        "r1",
        parse_task_toml(TASK).unwrap(),
        "base",
        1_000,
        true,
        Default::default(),
    );
    assert_eq!(step.record.state, RunState::Queued);
    assert_eq!(step.record.phase, Phase::Admission);
    assert!(step.outgoing().is_empty());
    assert_eq!(step.record.next_deadline_ms(), None);
    assert_eq!(kinds(&step), ["submitted", "admission_queued"]);
    step.record.check_consistency().unwrap();

    let admitted = match decide(&step.record, &RunEvent::Admit, 6_000) {
        Decision::Apply(s) => *s,
        other => panic!("{other:?}"),
    };
    assert_eq!(admitted.record.state, RunState::Queued);
    assert!(matches!(admitted.record.phase, Phase::Deciding { seq: 1 }));
    assert_eq!(admitted.outgoing().len(), 1);
    assert!(matches!(admitted.outgoing()[0].target, Target::Decide));
    match &admitted.log[0].event {
        LogEvent::Admitted { waited_ms } => assert_eq!(*waited_ms, 5_000),
        e => panic!("{e:?}"),
    }
}

#[test]
fn admit_and_cancel_of_a_waiting_run() {
    struct DeadLetterCase {
        name: &'static str,
        record: RunRecord,
        event: RunEvent,
        applies: bool,
        state: RunState,
    }
    let cases = [
        DeadLetterCase {
            name: "admit a run that is already started",
            record: started(),
            event: RunEvent::Admit,
            applies: false,
            state: RunState::Queued,
        },
        DeadLetterCase {
            name: "cancel while waiting for a slot",
            record: waiting(),
            event: RunEvent::Cancel {
                reason: "no".into(),
            },
            applies: true,
            state: RunState::Cancelled,
        },
        DeadLetterCase {
            name: "a tick while waiting: no deadline",
            record: waiting(),
            event: RunEvent::Tick,
            applies: false,
            state: RunState::Queued,
        },
    ];
    for case in cases {
        match decide(&case.record, &case.event, 2_000) {
            Decision::Apply(s) => {
                assert!(case.applies, "{}", case.name);
                assert_eq!(s.record.state, case.state, "{}", case.name);
                assert!(
                    s.outgoing().iter().all(|o| o.target == Target::Control),
                    "{}: nothing but notices",
                    case.name
                );
            }
            Decision::Ignore(_) => assert!(!case.applies, "{}", case.name),
            other => panic!("{}: {other:?}", case.name),
        }
    }
}

/// A dead letter of `kind` (for `generation` and `step`) sent to `record`.
struct DeadLetterCase {
    name: &'static str,
    record: RunRecord,
    kind: &'static str,
    generation: u32,
    step: u32,
    /// None: ignored; Some(phase name after) otherwise.
    then: Option<&'static str>,
    failed_rounds: u32,
}

fn assert_dead_letter(case: DeadLetterCase) {
    let event = RunEvent::DeadLettered {
        kind: case.kind.into(),
        generation: case.generation,
        step: case.step,
        reason: "10 deliveries failed".into(),
    };
    match (decide(&case.record, &event, 5), case.then) {
        (Decision::Apply(s), Some(phase)) => {
            assert_eq!(s.record.phase.name(), phase, "{}", case.name);
            assert!(kinds(&s).contains(&"dead_letter"), "{}", case.name);
            assert_eq!(
                s.record.streaks.failed_rounds, case.failed_rounds,
                "{}",
                case.name
            );
            if phase != case.record.phase.name() && case.kind != "decide_request" {
                assert!(
                    s.outgoing().iter().any(|o| o.target == Target::Control),
                    "{}: the abandoned step is cancelled",
                    case.name
                );
            }
        }
        (Decision::Ignore(_), None) => {}
        (other, _) => panic!("{}: {other:?}", case.name),
    }
}

#[test]
fn a_dead_letter_fails_the_step_it_belongs_to_and_only_logs_otherwise() {
    let r = started();
    let executing = reply(&r, "Next: cli\nTask: a").record;
    let auditing = exec_done(&executing, "c1").record;
    let cases = [
        DeadLetterCase {
            name: "the executor's result of the round in flight",
            record: executing.clone(),
            kind: "exec_result",
            generation: 1,
            step: 1,
            then: Some("deciding"),
            failed_rounds: 1,
        },
        DeadLetterCase {
            name: "the exec request of the round in flight",
            record: executing.clone(),
            kind: "exec_request",
            generation: 1,
            step: 1,
            then: Some("deciding"),
            failed_rounds: 1,
        },
        DeadLetterCase {
            name: "an older round's result: logged only",
            record: executing.clone(),
            kind: "exec_result",
            generation: 1,
            step: 0,
            then: Some("executing"),
            failed_rounds: 0,
        },
        DeadLetterCase {
            name: "the report of the audit in flight",
            record: auditing.clone(),
            kind: "audit_report",
            generation: 1,
            step: 1,
            then: Some("deciding"),
            failed_rounds: 1,
        },
        DeadLetterCase {
            name: "the pending decision request: asked again",
            record: r.clone(),
            kind: "decide_request",
            generation: 1,
            step: 1,
            then: Some("deciding"),
            failed_rounds: 0,
        },
        DeadLetterCase {
            name: "another generation",
            record: executing.clone(),
            kind: "exec_result",
            generation: 7,
            step: 1,
            then: None,
            failed_rounds: 0,
        },
    ];
    for case in cases {
        assert_dead_letter(case);
    }
}

#[test]
fn dead_lettered_events_name_the_step() {
    let decide_request = Message::DecideRequest(DecideRequest {
        run_id: "r1".into(),
        generation: 2,
        seq: 5,
    });
    match RunEvent::dead_lettered(&decide_request, "why") {
        Some(RunEvent::DeadLettered {
            kind,
            generation,
            step,
            reason,
        }) => {
            assert_eq!(
                (kind.as_str(), generation, step, reason.as_str()),
                ("decide_request", 2, 5, "why")
            );
        }
        other => panic!("{other:?}"),
    }
    let _ = apply;
}
