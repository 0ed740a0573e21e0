//! Deadlines, budgets, resume, escalation and the bounds on a misbehaving manager.

use super::tests::{apply, audit, exec_done, kinds, reply, started, TASK};
use super::*;
use crate::state::{DeadlineKind, Target};
use crate::task::parse_task_toml;
use loopgate_protocol::subjects::Capability;
use loopgate_protocol::usage::Usage;
use loopgate_protocol::verdict::Integrity;
use loopgate_protocol::wire::ExecResult;
use loopgate_protocol::wire::{EpisodeRole, ExecOutcome, Message};

fn tick(record: &RunRecord, now: i64) -> Decision {
    decide(record, &RunEvent::Tick, now)
}

pub(super) fn tick_apply(record: &RunRecord, now: i64) -> Step {
    match tick(record, now) {
        Decision::Apply(s) => *s,
        other => panic!("expected Apply, got {other:?}"),
    }
}

pub(super) fn deadline_at(record: &RunRecord) -> i64 {
    record.deadlines.phase.expect("a phase deadline").at_ms
}

#[test]
fn k_failed_rounds_ask_a_human_and_an_answer_resumes() {
    let mut task = parse_task_toml(TASK).unwrap();
    task.budget.max_rounds = 10;
    task.budget.max_failed_rounds = 2;
    let r = start_run("r1", task, "base", 0).record;
    let s = reply(&r, "Next: cli\nTask: a");
    let s = exec_done(&s.record, "c1");
    let s = audit(&s.record, false, Integrity::Clean);
    assert!(matches!(s.record.phase, Phase::Deciding { .. }));
    let s = reply(&s.record, "Next: cli\nTask: b");
    let s = exec_done(&s.record, "c2");
    let s = audit(&s.record, false, Integrity::Clean);
    assert_eq!(s.record.state, RunState::WaitingForInput);
    assert!(kinds(&s).contains(&"question"));
    assert_eq!(
        s.record.next_deadline_ms(),
        None,
        "waiting for a human has no phase deadline"
    );
    let s = apply(
        &s.record,
        RunEvent::Answer {
            text: "try python3 -c".into(),
        },
    );
    assert_eq!(s.record.state, RunState::Running);
    assert_eq!(s.record.streaks.failed_rounds, 0);
}

#[test]
fn no_worker_picks_up_the_step_then_the_manager_is_asked_again() {
    let r = started();
    let s = reply(&r, "Next: gui\nTask: click the button");
    assert!(matches!(
        s.outgoing()[0].target,
        Target::Exec {
            capability: Capability::Gui
        }
    ));
    // The worker gets no start-by time: the start budget moves while the step is queued.
    match &s.outgoing()[0].message {
        Message::ExecRequest(req) => assert_eq!(req.start_by_ms, None),
        m => panic!("{m:?}"),
    };
    let start_by = deadline_at(&s.record);
    assert!(matches!(tick(&s.record, start_by - 1), Decision::Ignore(_)));
    let t = tick_apply(&s.record, start_by);
    assert!(kinds(&t).contains(&"deadline_missed"));
    assert!(matches!(t.record.phase, Phase::Deciding { .. }));
    assert!(t
        .record
        .feedback
        .iter()
        .any(|f| f.contains("capability `gui`")));
}

#[test]
fn a_started_episode_gets_its_own_deadline_and_is_cancelled_when_it_passes() {
    let r = started();
    let s = reply(&r, "Next: cli\nTask: write");
    let exec_id = s.outgoing()[0].msg_id.clone();
    let started_ev = RunEvent::EpisodeStarted(loopgate_protocol::wire::EpisodeStarted {
        attempt: 1,
        run_id: "r1".into(),
        generation: 1,
        round: 1,
        role: EpisodeRole::Executor,
        delivery_attempt: 1,
        worker: "w1".into(),
    });
    let s = apply(&s.record, started_ev.clone());
    assert_eq!(
        s.record.deadlines.phase.unwrap().kind,
        DeadlineKind::ExecEpisode
    );
    let due = deadline_at(&s.record);
    assert!(due >= (1800 + EPISODE_GRACE_SECS as i64) * 1000);
    // `[budget] episode_grace_secs` moves it.
    let mut short = r.clone();
    short.task.budget.episode_grace_secs = 2;
    let s2 = apply(
        &reply(&short, "Next: cli\nTask: write").record,
        started_ev.clone(),
    );
    assert_eq!(
        deadline_at(&s2.record),
        due - (EPISODE_GRACE_SECS as i64 - 2) * 1000
    );
    // a redelivered started notice is a replay, not a second transition
    assert!(matches!(
        decide(&s.record, &started_ev, 5),
        Decision::Replay(_)
    ));
    let t = tick_apply(&s.record, due);
    // The notice names the timed-out step's dispatch (the exec request's dedup id) only, so
    // workers do not drop the run's later steps of this generation.
    let notice = t
        .outgoing()
        .iter()
        .find(|o| o.target == Target::Control)
        .map(|o| o.message.clone());
    match notice {
        Some(Message::CancelEpisodes(n)) => {
            assert_eq!(n.dispatch.as_deref(), Some(exec_id.as_str()));
            assert_eq!(n.generation, 1);
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(t.record.phase, Phase::Deciding { .. }));
    // the late result of the timed-out episode is ignored
    let late = RunEvent::ExecFinished(ExecResult {
        attempt: 1,
        run_id: "r1".into(),
        generation: 1,
        round: 1,
        delivery_attempt: 1,
        worker: "w1".into(),
        outcome: ExecOutcome::Failed { error: "x".into() },
        usage: Usage::default(),
        duration_ms: 0,
        agent_isolation: None,
    });
    assert!(matches!(
        decide(&t.record, &late, due + 1),
        Decision::Ignore(_)
    ));
}

#[test]
fn decision_deadlines_end_in_failed() {
    let mut r = started();
    for _ in 0..=2 {
        let due = deadline_at(&r);
        let t = tick_apply(&r, due);
        r = t.record;
    }
    assert_eq!(r.state, RunState::Failed);
    assert!(r.terminal_reason.unwrap().contains("did not decide"));
}

#[test]
fn wall_clock_budget_ends_the_run() {
    let mut task = parse_task_toml(TASK).unwrap();
    task.budget.max_wall_secs = Some(60);
    let r = start_run("r1", task, "base", 1_000).record;
    assert_eq!(r.next_deadline_ms(), Some(61_000));
    let s = reply(&r, "Next: cli\nTask: write");
    let t = tick_apply(&s.record, 61_000);
    assert_eq!(t.record.state, RunState::BudgetExhausted);
    assert!(
        t.outgoing().iter().any(|o| o.target == Target::Control),
        "in-flight episode told to stop"
    );
    assert_eq!(t.record.next_deadline_ms(), None);
}

#[test]
fn cost_budget_ends_the_run() {
    let mut task = parse_task_toml(TASK).unwrap();
    task.budget.max_cost_micros = Some(100);
    let r = start_run("r1", task, "base", 0).record;
    let ev = RunEvent::ManagerReplied {
        generation: 1,
        seq: 1,
        raw: "Next: cli\nTask: x".into(),
        usage: Usage {
            input_tokens: 1,
            output_tokens: 1,
            cost_micros: 101,
            ..Default::default()
        },
        gui_offered: true,
    };
    assert_eq!(apply(&r, ev).record.state, RunState::BudgetExhausted);
}

#[test]
fn resume_starts_a_new_generation_and_drops_old_results() {
    let r = started();
    let s = reply(&r, "Next: cli\nTask: write");
    let c = apply(
        &s.record,
        RunEvent::Cancel {
            reason: "user".into(),
        },
    );
    let mut budget = c.record.task.budget.clone();
    budget.max_rounds = 2;
    let resumed = apply(&c.record, RunEvent::Resume { budget });
    assert_eq!(resumed.record.generation, 2);
    assert_eq!(resumed.record.state, RunState::Running);
    assert_eq!(resumed.record.rounds_this_generation(), 0);
    assert!(kinds(&resumed).contains(&"resumed"));
    // generation-1 result arrives late
    let old = RunEvent::ExecFinished(ExecResult {
        attempt: 1,
        run_id: "r1".into(),
        generation: 1,
        round: 1,
        delivery_attempt: 1,
        worker: "w".into(),
        outcome: ExecOutcome::Failed {
            error: "late".into(),
        },
        usage: Usage::default(),
        duration_ms: 0,
        agent_isolation: None,
    });
    assert!(matches!(
        decide(&resumed.record, &old, 9),
        Decision::Ignore(_)
    ));
    let s = reply(&resumed.record, "Next: cli\nTask: again");
    match &s.outgoing()[0].message {
        Message::ExecRequest(req) => assert_eq!((req.generation, req.round), (2, 2)),
        m => panic!("{m:?}"),
    }
    // a running or completed run cannot be resumed
    let budget = s.record.task.budget.clone();
    assert!(matches!(
        decide(&s.record, &RunEvent::Resume { budget }, 10),
        Decision::Ignore(_)
    ));
}

/// Every exit path ends in a terminal state with a reason, no deadline, and a final log entry.
#[test]
fn every_exit_path_is_terminal_with_a_reason() {
    type Path = fn() -> Step;
    let paths: Vec<(&str, RunState, Path)> = vec![
        ("completed", RunState::Completed, || {
            let s = reply(&started(), "Next: cli\nTask: w");
            let s = exec_done(&s.record, "c1");
            audit(&s.record, true, Integrity::Clean)
        }),
        ("blocked by manager", RunState::Blocked, || {
            reply(&started(), "Next: blocked\nTask: impossible")
        }),
        ("blocked by invalid output", RunState::Blocked, || {
            let s = reply(&started(), "?");
            let s = reply(&s.record, "?");
            reply(&s.record, "?")
        }),
        ("rounds exhausted", RunState::BudgetExhausted, || {
            let mut r = started();
            for i in 0..3 {
                let s = reply(&r, &format!("Next: cli\nTask: t {i}"));
                let s = exec_done(&s.record, &format!("c{i}"));
                r = audit(&s.record, false, Integrity::Clean).record;
            }
            reply(&r, "Next: cli\nTask: t")
        }),
        ("cancelled", RunState::Cancelled, || {
            apply(
                &started(),
                RunEvent::Cancel {
                    reason: "user".into(),
                },
            )
        }),
        ("manager model keeps failing", RunState::Failed, || {
            let mut r = started();
            for _ in 0..3 {
                let seq = match r.phase {
                    Phase::Deciding { seq } => seq,
                    _ => unreachable!(),
                };
                let s = apply(
                    &r,
                    RunEvent::ManagerFailed {
                        generation: 1,
                        seq,
                        error: "503".into(),
                        usage: Usage::default(),
                    },
                );
                if s.record.state.is_terminal() {
                    return s;
                }
                r = s.record;
            }
            unreachable!("three failures exceed max_invalid_outputs = 2")
        }),
    ];
    for (name, want, path) in paths {
        let step = path();
        assert_eq!(step.record.state, want, "{name}");
        assert!(step.record.terminal_reason.is_some(), "{name}");
        assert_eq!(step.record.next_deadline_ms(), None, "{name}");
        assert_eq!(
            step.log.last().map(|e| e.event.kind()),
            Some("terminal"),
            "{name}"
        );
        assert!(
            step.outgoing().iter().all(|o| o.target == Target::Control),
            "{name}: nothing new dispatched"
        );
    }
}

#[test]
fn executor_escalates_up_its_ladder_after_failed_rounds() {
    let text = TASK.replace(
        "[budget]",
        "[roles]\nexecutor = [\"cheap\", \"mid\", \"strong\"]\n[budget]",
    );
    let mut task = parse_task_toml(&text).unwrap();
    task.budget.max_rounds = 20;
    task.budget.max_failed_rounds = 100;
    task.budget.escalate_after = 2;
    // Only the failed-rounds ladder here (stagnation escalates on its own, tested apart).
    task.budget.stagnation_rounds = 0;
    let mut r = start_run("r1", task, "base", 0).record;
    let mut profiles = Vec::new();
    for i in 0..7 {
        let s = reply(&r, &format!("Next: cli\nTask: try {i}"));
        match &s.outgoing()[0].message {
            Message::ExecRequest(req) => profiles.push(req.executor_profile.clone()),
            m => panic!("{m:?}"),
        }
        let s = exec_done(&s.record, &format!("c{i}"));
        r = audit(&s.record, false, Integrity::Clean).record;
    }
    assert_eq!(
        profiles,
        ["cheap", "cheap", "mid", "mid", "strong", "strong", "strong"]
    );
}

#[test]
fn a_route_no_worker_serves_is_refused_as_invalid() {
    let r = started();
    let ev = RunEvent::ManagerReplied {
        generation: 1,
        seq: 1,
        raw: "Next: gui\nTask: click".into(),
        usage: Usage::default(),
        gui_offered: false,
    };
    let s = apply(&r, ev);
    assert_eq!(kinds(&s), vec!["invalid_output"]);
    assert!(s
        .record
        .feedback
        .iter()
        .any(|f| f.contains("not available")));
    assert!(matches!(s.record.phase, Phase::Deciding { .. }));
}

#[test]
fn a_manager_that_keeps_saying_done_is_bounded() {
    let mut task = parse_task_toml(TASK).unwrap();
    task.budget.max_done_refusals = 3;
    let mut r = start_run("r1", task, "base", 0).record;
    for _ in 0..3 {
        r = reply(&r, "Next: done\nTask: finished").record;
        assert!(matches!(r.phase, Phase::Deciding { .. }));
    }
    let s = reply(&r, "Next: done\nTask: finished");
    assert_eq!(s.record.state, RunState::Blocked);
    assert!(s.record.terminal_reason.unwrap().contains("`done`"));
    // a real step in between resets the count
    let mut r = start_run("r2", parse_task_toml(TASK).unwrap(), "base", 0).record;
    r.task.budget.max_done_refusals = 1;
    r = reply(&r, "Next: done\nTask: finished").record;
    r = reply(&r, "Next: cli\nTask: write").record;
    assert_eq!(r.streaks.done_refusals, 0);
}

/// A start deadline that passes while the step waits behind busy workers is queue wait (the
/// budget counts again, no failed round, no new manager call); with no live worker of the
/// step's capability, or a sweep that does not know, it is a missed start as before.
#[test]
fn a_start_deadline_is_queue_wait_only_while_a_live_worker_serves_the_capability() {
    use Capability::{Cli, Gui};
    let r = started();
    let s = reply(&r, "Next: cli\nTask: write");
    let dispatched = s
        .record
        .deadlines
        .queued_since_ms
        .expect("queued since dispatch");
    let at = deadline_at(&s.record);
    // (serving, queue wait?)
    let cases: [(Option<Vec<Capability>>, bool); 5] = [
        (Some(vec![Cli]), true),
        (Some(vec![Cli, Gui]), true),
        (Some(vec![Gui]), false),
        (Some(vec![]), false),
        (None, false),
    ];
    for (serving, queued) in cases {
        let event = match &serving {
            Some(serving) => RunEvent::Sweep {
                serving: serving.clone(),
            },
            None => RunEvent::Tick,
        };
        let Decision::Apply(t) = decide(&s.record, &event, at) else {
            panic!("{serving:?}: the deadline has passed");
        };
        let kinds = kinds(&t);
        if queued {
            assert_eq!(kinds, vec!["queue_wait"], "{serving:?}");
            assert!(matches!(t.record.phase, Phase::Executing { round: 1, .. }));
            assert_eq!(t.record.streaks.failed_rounds, 0);
            assert!(t.outgoing().is_empty(), "no new manager call");
            let next = t.record.deadlines.phase.expect("re-armed");
            assert_eq!(next.kind, DeadlineKind::ExecStart);
            assert!(next.at_ms > at);
            match &t.log[0].event {
                LogEvent::QueueWait {
                    round, waited_ms, ..
                } => {
                    assert_eq!(*round, 1);
                    assert_eq!(*waited_ms, at - dispatched);
                }
                e => panic!("{e:?}"),
            }
        } else {
            assert!(kinds.contains(&"deadline_missed"), "{serving:?}: {kinds:?}");
            assert!(matches!(t.record.phase, Phase::Deciding { .. }));
        }
    }
    // Before the deadline a sweep does nothing, whoever serves.
    assert!(matches!(
        decide(&s.record, &RunEvent::Sweep { serving: vec![Cli] }, at - 1),
        Decision::Ignore(_)
    ));
}

/// Picked up: no longer queued, and the episode's own deadline applies.
#[test]
fn a_picked_up_step_is_no_longer_queued() {
    let r = started();
    let s = reply(&r, "Next: cli\nTask: write");
    assert!(s.record.deadlines.queued_since_ms.is_some());
    let started_ev = RunEvent::EpisodeStarted(loopgate_protocol::wire::EpisodeStarted {
        attempt: 1,
        run_id: "r1".into(),
        generation: 1,
        round: 1,
        role: EpisodeRole::Executor,
        delivery_attempt: 1,
        worker: "w1".into(),
    });
    let s = apply(&s.record, started_ev);
    assert_eq!(s.record.deadlines.queued_since_ms, None);
    let at = deadline_at(&s.record);
    let Decision::Apply(t) = decide(
        &s.record,
        &RunEvent::Sweep {
            serving: vec![Capability::Cli],
        },
        at,
    ) else {
        panic!("the episode deadline has passed");
    };
    assert!(kinds(&t).contains(&"deadline_missed"));
}
