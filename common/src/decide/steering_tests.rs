//! Instructions, pause and unpause, and continuing a completed run.

use super::tests::{apply, audit, exec_done, kinds, reply, started, TASK};
use super::*;
use crate::decide::manager_prompt::{user_prompt, INSTRUCTIONS_HEADING};
use crate::state::{HeldStep, Target};
use crate::task::parse_task_toml;
use loopgate_protocol::verdict::Integrity;
use loopgate_protocol::wire::{AuditPurpose, Message};

fn ignored(record: &RunRecord, event: RunEvent) -> String {
    match decide(record, &event, 1) {
        Decision::Ignore(why) => why,
        other => panic!("expected Ignore, got {other:?}"),
    }
}

fn instruct(record: &RunRecord, text: &str) -> Step {
    apply(record, RunEvent::Instruct { text: text.into() })
}

fn completed() -> RunRecord {
    let s = reply(&started(), "Next: cli\nTask: write hello.py");
    let s = exec_done(&s.record, "c1");
    let s = audit(&s.record, true, Integrity::Clean);
    assert_eq!(s.record.state, RunState::Completed);
    s.record
}

fn cancelled() -> RunRecord {
    apply(&started(), RunEvent::Cancel { reason: "x".into() }).record
}

fn waiting() -> RunRecord {
    reply(&started(), "Next: ask\nTask: which file?").record
}

#[test]
fn instruction_text_is_validated() {
    let long = "x".repeat(INSTRUCTION_MAX_CHARS + 1);
    let cases: [(&str, Result<&str, InstructionError>); 4] = [
        ("  use pytest  ", Ok("use pytest")),
        ("", Err(InstructionError::Empty)),
        (" \n\t", Err(InstructionError::Empty)),
        (
            &long,
            Err(InstructionError::TooLong {
                chars: INSTRUCTION_MAX_CHARS + 1,
            }),
        ),
    ];
    for (text, want) in cases {
        assert_eq!(
            validate_instruction(text),
            want.map(str::to_string),
            "{text:?}"
        );
    }
    assert!(validate_instruction(&"é".repeat(INSTRUCTION_MAX_CHARS)).is_ok());
}

#[test]
fn instructions_are_kept_logged_and_reach_only_the_manager_prompt() {
    let r = started();
    let s = instruct(&r, "prefer the standard library");
    assert_eq!(kinds(&s), vec!["instructed"]);
    assert!(s.outgoing().is_empty(), "an instruction dispatches nothing");
    assert_eq!(s.record.state, r.state);
    assert_eq!(s.record.phase, r.phase);
    let prompt = user_prompt(&s.record, 24_000);
    assert!(prompt.contains(INSTRUCTIONS_HEADING));
    assert!(prompt.contains("prefer the standard library"));
    // It stays across rounds, and never goes into the executor's or auditor's request.
    let s = reply(&s.record, "Next: cli\nTask: write hello.py");
    let exec = serde_json::to_string(&s.outgoing()[0].message).unwrap();
    assert!(!exec.contains("standard library"), "{exec}");
    let s = exec_done(&s.record, "c1");
    let req = serde_json::to_string(&s.outgoing()[0].message).unwrap();
    assert!(!req.contains("standard library"), "{req}");
    let s = audit(&s.record, false, Integrity::Clean);
    assert!(user_prompt(&s.record, 24_000).contains("prefer the standard library"));
}

#[test]
fn newest_instructions_win_within_the_bounds() {
    let mut r = started();
    for i in 0..(INSTRUCTIONS_KEEP + 2) {
        r = instruct(&r, &format!("instruction number {i}")).record;
    }
    assert_eq!(r.steering.instructions.len(), INSTRUCTIONS_KEEP);
    let prompt = user_prompt(&r, 24_000);
    assert!(!prompt.contains("instruction number 0"));
    assert!(!prompt.contains("instruction number 1"));
    let first = prompt.find("instruction number 2").unwrap();
    let last = prompt
        .find(&format!("instruction number {}", INSTRUCTIONS_KEEP + 1))
        .unwrap();
    assert!(first < last, "oldest first, newest last");
    // Long ones: only the newest that fit the section's share of the prompt.
    let mut r = started();
    for c in ['a', 'b', 'c'] {
        let text = c.to_string().repeat(INSTRUCTION_MAX_CHARS);
        r = instruct(&r, &text).record;
    }
    let prompt = user_prompt(&r, 24_000);
    assert!(prompt.contains(&"c".repeat(INSTRUCTION_MAX_CHARS)));
    assert!(!prompt.contains(&"a".repeat(100)));
    let none = user_prompt(&started(), 24_000);
    assert!(!none.contains(INSTRUCTIONS_HEADING));
}

#[test]
fn steering_is_refused_where_it_does_not_apply() {
    struct Case {
        name: &'static str,
        record: RunRecord,
        event: RunEvent,
    }
    let paused = apply(&started(), RunEvent::Pause).record;
    let task = Box::new(parse_task_toml(TASK).unwrap());
    let cases = [
        Case {
            name: "instruct an ended run",
            record: cancelled(),
            event: RunEvent::Instruct { text: "x".into() },
        },
        Case {
            name: "instruct with blank text",
            record: started(),
            event: RunEvent::Instruct { text: " ".into() },
        },
        Case {
            name: "pause an ended run",
            record: completed(),
            event: RunEvent::Pause,
        },
        Case {
            name: "pause a paused run",
            record: paused.clone(),
            event: RunEvent::Pause,
        },
        Case {
            name: "pause a run waiting for input",
            record: waiting(),
            event: RunEvent::Pause,
        },
        Case {
            name: "unpause a running run",
            record: started(),
            event: RunEvent::Unpause,
        },
        Case {
            name: "unpause an ended run",
            record: cancelled(),
            event: RunEvent::Unpause,
        },
        Case {
            name: "continue a running run",
            record: started(),
            event: RunEvent::Continue { task: task.clone() },
        },
        Case {
            name: "continue a paused run",
            record: paused,
            event: RunEvent::Continue { task: task.clone() },
        },
        Case {
            name: "continue a cancelled run",
            record: cancelled(),
            event: RunEvent::Continue { task },
        },
    ];
    for case in cases {
        let why = ignored(&case.record, case.event);
        assert!(!why.is_empty(), "{}", case.name);
    }
}

/// Pausing at each point of a round: what the step in flight does, what is held, and what
/// unpausing takes.
#[test]
fn a_paused_run_finishes_the_step_in_flight_and_holds_the_next() {
    // Paused while deciding: the decision is recorded, its round is held.
    let r = started();
    let p = apply(&r, RunEvent::Pause);
    assert_eq!(p.record.state, RunState::Paused);
    assert!(p.outgoing().is_empty());
    assert_eq!(p.record.phase, r.phase, "the decision in flight is awaited");
    let s = reply(&p.record, "Next: cli\nTask: write hello.py");
    assert_eq!(kinds(&s), vec!["decision", "held"]);
    assert!(s.outgoing().is_empty(), "no executor is dispatched");
    assert_eq!(s.record.round, 0);
    assert!(matches!(
        s.record.phase,
        Phase::Paused {
            held: HeldStep::Exec { .. }
        }
    ));
    assert_eq!(s.record.next_deadline_ms(), None, "nothing is awaited");
    let u = apply(&s.record, RunEvent::Unpause);
    assert_eq!(u.record.state, RunState::Running);
    assert_eq!(u.record.round, 1);
    assert!(matches!(u.outgoing()[0].target, Target::Exec { .. }));
    assert!(kinds(&u).contains(&"unpaused"));

    // Paused while executing: the episode and its round's audit finish; the next decision is
    // held.
    let s = reply(&started(), "Next: cli\nTask: write hello.py");
    let p = apply(&s.record, RunEvent::Pause);
    let s = exec_done(&p.record, "c1");
    assert!(matches!(s.outgoing()[0].message, Message::AuditRequest(_)));
    let s = audit(&s.record, false, Integrity::Clean);
    assert_eq!(s.record.snapshot, "c1", "the round is recorded");
    assert_eq!(
        s.record.phase,
        Phase::Paused {
            held: HeldStep::Decide
        }
    );
    assert!(s.outgoing().is_empty());
    let u = apply(&s.record, RunEvent::Unpause);
    assert!(matches!(u.record.phase, Phase::Deciding { .. }));
    assert_eq!(u.outgoing()[0].target, Target::Decide);

    // A final audit after `done` is a new step: held.
    let mut task = parse_task_toml(TASK).unwrap();
    task.complete_on_gate = false;
    let r = start_run("r1", task, "base", 0).record;
    let s = reply(&r, "Next: cli\nTask: write");
    let s = exec_done(&s.record, "c1");
    let s = audit(&s.record, true, Integrity::Clean);
    let p = apply(&s.record, RunEvent::Pause);
    let s = reply(&p.record, "Next: done\nTask: all pass");
    assert!(matches!(
        s.record.phase,
        Phase::Paused {
            held: HeldStep::Audit {
                purpose: AuditPurpose::Final,
                ..
            }
        }
    ));
    let u = apply(&s.record, RunEvent::Unpause);
    assert!(matches!(
        u.record.phase,
        Phase::Auditing {
            purpose: AuditPurpose::Final,
            ..
        }
    ));
    let c = audit(&u.record, true, Integrity::Clean);
    assert_eq!(c.record.state, RunState::Completed);
}

#[test]
fn a_queued_run_paused_before_its_first_decision_goes_back_to_queued() {
    let r = started();
    assert_eq!(r.state, RunState::Queued);
    let p = apply(&r, RunEvent::Pause);
    let u = apply(&p.record, RunEvent::Unpause);
    assert_eq!(u.record.state, RunState::Queued);
    assert_eq!(u.record.phase, r.phase);
    assert!(
        u.outgoing().is_empty(),
        "the decision in flight is still awaited"
    );
}

#[test]
fn the_wall_clock_budget_does_not_run_while_paused() {
    let mut task = parse_task_toml(TASK).unwrap();
    task.budget.max_wall_secs = Some(10);
    let r = start_run("r1", task, "base", 0).record;
    let s = reply(&r, "Next: cli\nTask: write hello.py");
    let s = exec_done(&s.record, "c1");
    let s = audit(&s.record, false, Integrity::Clean);
    assert_eq!(s.record.deadlines.wall_ms, Some(10_000));
    // Paused at 4 s (6 s left), then held long past the wall deadline.
    let p = match decide(&s.record, &RunEvent::Pause, 4_000) {
        Decision::Apply(step) => step.record,
        other => panic!("{other:?}"),
    };
    assert_eq!(p.deadlines.wall_ms, None);
    assert_eq!(p.steering.pause.unwrap().wall_left_ms, Some(6_000));
    let decided = reply(&p, "Next: cli\nTask: fix");
    assert!(matches!(decided.record.phase, Phase::Paused { .. }));
    assert_eq!(decided.record.next_deadline_ms(), None);
    assert!(matches!(
        decide(&decided.record, &RunEvent::Tick, 60_000),
        Decision::Ignore(_)
    ));
    let u = match decide(&decided.record, &RunEvent::Unpause, 100_000) {
        Decision::Apply(step) => step.record,
        other => panic!("{other:?}"),
    };
    assert_eq!(u.deadlines.wall_ms, Some(106_000));
    assert_eq!(u.steering.pause, None);
    assert!(matches!(
        decide(&u, &RunEvent::Tick, 105_999),
        Decision::Ignore(_)
    ));
}

#[test]
fn a_paused_run_can_be_cancelled_and_a_question_ends_the_pause() {
    let p = apply(&started(), RunEvent::Pause);
    let c = apply(
        &p.record,
        RunEvent::Cancel {
            reason: "stop".into(),
        },
    );
    assert_eq!(c.record.state, RunState::Cancelled);
    assert_eq!(c.record.steering.pause, None);
    let q = reply(&p.record, "Next: ask\nTask: which file?");
    assert_eq!(q.record.state, RunState::WaitingForInput);
    assert_eq!(q.record.steering.pause, None);
}

#[test]
fn a_completed_run_continues_as_a_new_generation_from_its_snapshot() {
    let done = completed();
    let mut task = parse_task_toml(
        "goal = \"Add a --name flag to hello.py\"\n[[acceptance]]\nid = \"prints\"\ncheck = \"python3 hello.py --name x\"\n",
    )
    .unwrap();
    task.budget.max_rounds = 4;
    let s = apply(
        &done,
        RunEvent::Continue {
            task: Box::new(task),
        },
    );
    let r = &s.record;
    assert_eq!(kinds(&s), vec!["continued"]);
    assert_eq!(r.state, RunState::Running);
    assert_eq!(r.generation, done.generation + 1);
    assert_eq!(r.base_snapshot, "c1");
    assert_eq!(r.snapshot, "c1");
    assert_eq!(r.contract.goal, "Add a --name flag to hello.py");
    assert_ne!(r.contract.spec_hash, done.contract.spec_hash);
    assert_eq!(r.rounds_this_generation(), 0);
    assert!(r.audit.evidence.is_empty() && r.audit.last_gate.is_none());
    assert_eq!(r.history, done.history, "earlier rounds stay");
    assert_eq!(r.terminal_reason, None);
    assert_eq!(s.outgoing()[0].target, Target::Decide);
    // The new generation needs its own passing round to complete.
    let s = reply(&s.record, "Next: done\nTask: finished");
    assert!(kinds(&s).contains(&"done_refused"));
    let s = reply(&s.record, "Next: cli\nTask: add the flag");
    assert_eq!(s.record.round, 2);
    let s = exec_done(&s.record, "c2");
    let s = audit(&s.record, true, Integrity::Clean);
    assert_eq!(s.record.state, RunState::Completed);
    assert_eq!(s.record.generation, 2);
}
