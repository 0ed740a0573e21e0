use super::*;
use crate::state::{DeadlineKind, Target};
use crate::subjects::Capability;
use crate::task::parse_task_toml;
use crate::verdict::{AuditStatus, CheckVerdict, ContractVerdict, Integrity, Verdicts};
use crate::wire::{AuditPurpose, EpisodeRole, ExecOutcome, Message};

const TASK: &str = r#"
goal = "Create hello.py"
[[acceptance]]
id = "prints"
check = "python3 hello.py"
[budget]
max_rounds = 3
max_invalid_outputs = 2
"#;

fn started() -> RunRecord {
    start_run("r1", parse_task_toml(TASK).unwrap(), "base", 0).record
}

pub(super) fn apply(record: &RunRecord, event: RunEvent) -> Step {
    match decide(record, &event, 1) {
        Decision::Apply(step) => *step,
        other => panic!("expected Apply, got {other:?}"),
    }
}

pub(super) fn reply(record: &RunRecord, raw: &str) -> Step {
    let seq = match record.phase {
        Phase::Deciding { seq } => seq,
        ref p => panic!("not deciding: {p:?}"),
    };
    apply(
        record,
        RunEvent::ManagerReplied {
            generation: record.generation,
            seq,
            raw: raw.into(),
            usage: Usage {
                input_tokens: 10,
                output_tokens: 5,
                cost_micros: 0,
            },
            gui_offered: true,
        },
    )
}

pub(super) fn exec_done(record: &RunRecord, candidate: &str) -> Step {
    apply(
        record,
        RunEvent::ExecFinished(ExecResult {
            run_id: record.id.clone(),
            generation: record.generation,
            round: record.round,
            delivery_attempt: 1,
            worker: "w".into(),
            outcome: ExecOutcome::Frozen {
                candidate: candidate.into(),
                summary: "did it".into(),
                claimed_done: true,
                steps: 2,
                tool_calls: 2,
                files_changed: 1,
            },
            usage: Usage::default(),
            duration_ms: 5,
        }),
    )
}

pub(super) fn report(record: &RunRecord, pass: bool, integrity: Integrity) -> AuditReport {
    let (purpose, candidate) = match &record.phase {
        Phase::Auditing {
            purpose, candidate, ..
        } => (*purpose, candidate.clone()),
        p => panic!("not auditing: {p:?}"),
    };
    AuditReport {
        run_id: record.id.clone(),
        generation: record.generation,
        round: record.round,
        purpose,
        delivery_attempt: 1,
        worker: "a".into(),
        snapshot: candidate.clone(),
        verdicts: Verdicts {
            status: if pass {
                AuditStatus::Complete
            } else {
                AuditStatus::Incomplete
            },
            integrity,
            contract: ContractVerdict::Aligned,
        },
        evidence: vec![Evidence {
            artifact_version: candidate,
            check_id: "prints".into(),
            verdict: if pass {
                CheckVerdict::Pass
            } else {
                CheckVerdict::Fail
            },
            produced_at: 1,
            log_digest: None,
            exit_code: Some(if pass { 0 } else { 1 }),
            duration_ms: 1,
            output_excerpt: "out".into(),
        }],
        gaps: vec![],
        backcheck: vec![],
        changed_paths: vec!["hello.py".into()],
        judgment: None,
        usage: Usage::default(),
        duration_ms: 1,
        proposal: None,
        rubric: None,
        spec_hash: record.contract.spec_hash.clone(),
    }
}

pub(super) fn audit(record: &RunRecord, pass: bool, integrity: Integrity) -> Step {
    apply(
        record,
        RunEvent::AuditFinished(report(record, pass, integrity)),
    )
}

pub(super) fn kinds(step: &Step) -> Vec<&'static str> {
    step.log.iter().map(|e| e.event.kind()).collect()
}

#[test]
fn start_requests_a_decision() {
    let step = start_run("r1", parse_task_toml(TASK).unwrap(), "base", 0);
    assert_eq!(step.record.state, RunState::Queued);
    assert_eq!(step.outgoing().len(), 1);
    assert_eq!(step.outgoing()[0].target, Target::Decide);
    assert_eq!(kinds(&step), vec!["submitted"]);
}

#[test]
fn fail_then_pass_completes_through_the_gate() {
    let r = started();
    let s = reply(&r, "Next: cli\nTask: write hello.py");
    assert_eq!(s.record.state, RunState::Running);
    assert_eq!(s.record.round, 1);
    assert!(matches!(s.outgoing()[0].target, Target::Exec { .. }));
    let s = exec_done(&s.record, "c1");
    assert!(matches!(s.outgoing()[0].message, Message::AuditRequest(_)));
    let s = audit(&s.record, false, Integrity::Clean);
    assert_eq!(s.record.snapshot, "c1");
    assert!(matches!(s.record.phase, Phase::Deciding { .. }));
    assert_eq!(
        s.record.audit.last_gate.as_ref().map(|g| g.passed),
        Some(false)
    );
    let s = reply(&s.record, "Next: cli\nTask: fix hello.py");
    assert_eq!(s.record.round, 2);
    let s = exec_done(&s.record, "c2");
    let s = audit(&s.record, true, Integrity::Clean);
    assert_eq!(s.record.state, RunState::Completed);
    assert_eq!(s.record.snapshot, "c2");
    assert_eq!(s.evidence[0].artifact_version, "c2");
    assert!(s.outgoing().is_empty());
    assert_eq!(kinds(&s), vec!["audit_report", "gate", "terminal"]);
}

#[test]
fn done_without_passing_gate_is_refused_and_fed_back() {
    let r = started();
    let s = reply(&r, "Next: done\nTask: looks finished");
    assert_eq!(kinds(&s), vec!["decision", "done_refused"]);
    assert!(matches!(s.record.phase, Phase::Deciding { seq: 2 }));
    assert!(s.record.feedback.iter().any(|f| f.contains("refused")));
    assert_eq!(s.record.state, RunState::Running);
}

#[test]
fn done_with_passing_gate_runs_a_final_audit() {
    let mut task = parse_task_toml(TASK).unwrap();
    task.complete_on_gate = false;
    let r = start_run("r1", task, "base", 0).record;
    let s = reply(&r, "Next: cli\nTask: write");
    let s = exec_done(&s.record, "c1");
    let s = audit(&s.record, true, Integrity::Clean);
    assert_eq!(
        s.record.state,
        RunState::Running,
        "no gate-driven completion when disabled"
    );
    let s = reply(&s.record, "Next: done\nTask: all pass");
    match &s.record.phase {
        Phase::Auditing {
            purpose, candidate, ..
        } => {
            assert_eq!(*purpose, AuditPurpose::Final);
            assert_eq!(candidate, "c1");
        }
        p => panic!("{p:?}"),
    }
    let s = audit(&s.record, true, Integrity::Clean);
    assert_eq!(s.record.state, RunState::Completed);
}

#[test]
fn invalid_output_is_reasked_then_blocks() {
    let r = started();
    let s = reply(&r, "I am not sure what to do");
    assert_eq!(kinds(&s), vec!["invalid_output"]);
    assert!(matches!(s.record.phase, Phase::Deciding { .. }));
    let s = reply(&s.record, "garbage again");
    assert!(matches!(s.record.phase, Phase::Deciding { .. }));
    let s = reply(&s.record, "still garbage");
    assert_eq!(s.record.state, RunState::Blocked);
    // a valid reply resets the streak
    let s = reply(&r, "junk");
    let s = reply(&s.record, "Next: cli\nTask: go");
    assert_eq!(s.record.streaks.invalid_decisions, 0);
}

#[test]
fn max_rounds_exhausts_the_budget() {
    let mut r = started();
    for round in 1..=3 {
        let s = reply(&r, "Next: cli\nTask: try");
        let s = exec_done(&s.record, &format!("c{round}"));
        r = audit(&s.record, false, Integrity::Clean).record;
    }
    let s = reply(&r, "Next: cli\nTask: try again");
    assert_eq!(s.record.state, RunState::BudgetExhausted);
    assert!(s.outgoing().is_empty());
}

#[test]
fn integrity_violation_rejects_the_candidate() {
    let r = started();
    let s = reply(&r, "Next: cli\nTask: write");
    let s = exec_done(&s.record, "c1");
    let s = audit(&s.record, true, Integrity::Violation);
    assert_eq!(s.record.snapshot, "base");
    assert_ne!(s.record.state, RunState::Completed);
    assert!(kinds(&s).contains(&"candidate_rejected"));
}

#[test]
fn guard_downgrades_complete_without_evidence() {
    let r = started();
    let s = reply(&r, "Next: cli\nTask: write");
    let s = exec_done(&s.record, "c1");
    let mut rep = report(&s.record, true, Integrity::Clean);
    rep.evidence.clear();
    let s = apply(&s.record, RunEvent::AuditFinished(rep));
    assert_ne!(s.record.state, RunState::Completed);
    let (v, _) = s.record.audit.last_verdicts.clone().unwrap();
    assert_eq!(v.status, AuditStatus::Incomplete);
    assert_eq!(v.contract, ContractVerdict::Unknown);
}

#[test]
fn stale_and_duplicate_events() {
    let r = started();
    let s = reply(&r, "Next: cli\nTask: write");
    // the same reply again is a redelivery: replay the outbox
    let again = RunEvent::ManagerReplied {
        generation: 1,
        seq: 1,
        raw: "Next: cli\nTask: write".into(),
        usage: Usage::default(),
        gui_offered: true,
    };
    assert!(matches!(decide(&s.record, &again, 2), Decision::Replay(ref o) if o.len() == 1));
    // an old decision sequence is ignored
    let old = RunEvent::ManagerReplied {
        generation: 1,
        seq: 0,
        raw: "Next: done".into(),
        usage: Usage::default(),
        gui_offered: true,
    };
    assert!(matches!(decide(&s.record, &old, 2), Decision::Ignore(_)));
    // a result from another generation is ignored
    let mut stale = s.record.clone();
    stale.generation = 2;
    let e = exec_done(&s.record, "c1");
    let _ = e;
    let res = RunEvent::ExecFinished(ExecResult {
        run_id: "r1".into(),
        generation: 1,
        round: 1,
        delivery_attempt: 1,
        worker: "w".into(),
        outcome: ExecOutcome::Failed { error: "x".into() },
        usage: Usage::default(),
        duration_ms: 0,
    });
    assert!(matches!(decide(&stale, &res, 2), Decision::Ignore(_)));
}

#[test]
fn ask_waits_and_answer_resumes() {
    let r = started();
    let s = reply(&r, "Next: ask\nTask: which python?");
    assert_eq!(s.record.state, RunState::WaitingForInput);
    let s = apply(
        &s.record,
        RunEvent::Answer {
            text: "python3".into(),
        },
    );
    assert_eq!(s.record.state, RunState::Running);
    assert!(s.record.feedback.iter().any(|f| f.contains("python3")));
}

#[test]
fn cancel_is_terminal_and_late_results_are_ignored() {
    let r = started();
    let s = reply(&r, "Next: cli\nTask: write");
    let c = apply(
        &s.record,
        RunEvent::Cancel {
            reason: "user".into(),
        },
    );
    assert_eq!(c.record.state, RunState::Cancelled);
    let late = exec_done(&s.record, "c1");
    let _ = late;
    let ev = RunEvent::ExecFinished(ExecResult {
        run_id: "r1".into(),
        generation: 1,
        round: 1,
        delivery_attempt: 1,
        worker: "w".into(),
        outcome: ExecOutcome::Failed { error: "x".into() },
        usage: Usage::default(),
        duration_ms: 0,
    });
    assert!(matches!(decide(&c.record, &ev, 3), Decision::Ignore(_)));
}

#[test]
fn manager_prompt_stays_within_budget() {
    let mut r = started();
    r.task.budget.max_failed_rounds = 1000;
    for round in 1..=40 {
        let s = reply(
            &r,
            &format!(
                "Current task state: {}\nNext: cli\nTask: {}",
                "x".repeat(3000),
                "y".repeat(3000)
            ),
        );
        let s = exec_done(&s.record, &format!("c{round}"));
        r = {
            let mut rep = report(&s.record, false, Integrity::Clean);
            rep.evidence[0].output_excerpt = "z".repeat(5000);
            rep.gaps = vec!["g".repeat(500); 10];
            apply(&s.record, RunEvent::AuditFinished(rep)).record
        };
        r.task.budget.max_rounds = 1000;
    }
    let prompt = crate::prompts::manager::user_prompt(&r, 24_000);
    assert!(prompt.chars().count() <= 24_000, "{}", prompt.len());
    assert!(prompt.contains("Create hello.py"));
    assert!(prompt.contains("Round 40"));
}

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
    let start_by = match &s.outgoing()[0].message {
        Message::ExecRequest(req) => req.start_by_ms.unwrap(),
        m => panic!("{m:?}"),
    };
    assert_eq!(start_by, deadline_at(&s.record));
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
    let started_ev = RunEvent::EpisodeStarted(crate::wire::EpisodeStarted {
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
    // a redelivered started notice is a replay, not a second transition
    assert!(matches!(
        decide(&s.record, &started_ev, 5),
        Decision::Replay(_)
    ));
    let t = tick_apply(&s.record, due);
    assert!(t.outgoing().iter().any(|o| o.target == Target::Control));
    assert!(matches!(t.record.phase, Phase::Deciding { .. }));
    // the late result of the timed-out episode is ignored
    let late = RunEvent::ExecFinished(ExecResult {
        run_id: "r1".into(),
        generation: 1,
        round: 1,
        delivery_attempt: 1,
        worker: "w1".into(),
        outcome: ExecOutcome::Failed { error: "x".into() },
        usage: Usage::default(),
        duration_ms: 0,
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
                let s = reply(&r, "Next: cli\nTask: t");
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
    let mut r = start_run("r1", task, "base", 0).record;
    let mut profiles = Vec::new();
    for i in 0..7 {
        let s = reply(&r, "Next: cli\nTask: try");
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
