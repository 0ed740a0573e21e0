use super::*;
use crate::state::Target;
use crate::task::parse_task_toml;
use loopgate_protocol::usage::Usage;
use loopgate_protocol::verdict::Evidence;
use loopgate_protocol::verdict::{AuditStatus, CheckVerdict, ContractVerdict, Integrity, Verdicts};
use loopgate_protocol::wire::{AuditPurpose, EpisodeRole, ExecOutcome, Message};
use loopgate_protocol::wire::{AuditReport, ExecResult};

pub(super) const TASK: &str = r#"
goal = "Create hello.py"
[[acceptance]]
id = "prints"
check = "python3 hello.py"
[budget]
# The run's first step comes at once here; baseline_tests.rs tests the starting
# workspace's checks before it.
baseline_checks = false
max_rounds = 3
max_invalid_outputs = 2
# These tests drive the manager for every step; step_retry.rs and progress_tests.rs test a
# failed step tried again without it, clause_step.rs and clause_step_tests.rs a goal clause
# given as the step without it.
step_retries = 0
clause_steps = false
"#;

pub(super) fn started() -> RunRecord {
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
                ..Default::default()
            },
            gui_offered: true,
        },
    )
}

pub(super) fn exec_done(record: &RunRecord, candidate: &str) -> Step {
    apply(
        record,
        exec_result(record, frozen(candidate), Usage::default()),
    )
}

/// An episode that froze `candidate` and claims done.
pub(super) fn frozen(candidate: &str) -> ExecOutcome {
    ExecOutcome::Frozen {
        candidate: candidate.into(),
        summary: "did it".into(),
        claimed_done: true,
        steps: 2,
        tool_calls: 2,
        files_changed: 1,
        self_check_refusals: 0,
    }
}

/// The executor's result of `record`'s current round from worker `w`.
pub(super) fn exec_result(record: &RunRecord, outcome: ExecOutcome, usage: Usage) -> RunEvent {
    RunEvent::ExecFinished(ExecResult {
        transcript: None,
        attempt: 1,
        run_id: record.id.clone(),
        generation: record.generation,
        round: record.round,
        delivery_attempt: 1,
        worker: "w".into(),
        outcome,
        usage,
        duration_ms: 5,
        agent_isolation: None,
    })
}

/// One check's evidence on `snapshot`: exit 0 when it passes, 1 when not, output "out".
pub(super) fn evidence(snapshot: &str, id: &str, pass: bool) -> Evidence {
    Evidence {
        artifact_version: snapshot.into(),
        check_id: id.into(),
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
        isolated: None,
        screenshots: Vec::new(),
    }
}

pub(super) fn report(record: &RunRecord, pass: bool, integrity: Integrity) -> AuditReport {
    let candidate = audited(record);
    let status = if pass {
        AuditStatus::Complete
    } else {
        AuditStatus::Incomplete
    };
    report_on(
        record,
        status,
        integrity,
        vec![evidence(&candidate, "prints", pass)],
    )
}

/// The snapshot `record` waits for the audit of.
pub(super) fn audited(record: &RunRecord) -> String {
    match &record.phase {
        Phase::Auditing { candidate, .. } => candidate.clone(),
        p => panic!("not auditing: {p:?}"),
    }
}

/// A full, unsigned report from auditor `a` on the audit `record` waits for.
pub(super) fn report_on(
    record: &RunRecord,
    status: AuditStatus,
    integrity: Integrity,
    evidence: Vec<Evidence>,
) -> AuditReport {
    let (purpose, candidate) = match &record.phase {
        Phase::Auditing {
            purpose, candidate, ..
        } => (*purpose, candidate.clone()),
        p => panic!("not auditing: {p:?}"),
    };
    AuditReport {
        mechanical_only: false,
        run_id: record.id.clone(),
        generation: record.generation,
        round: record.round,
        purpose,
        delivery_attempt: 1,
        worker: "a".into(),
        snapshot: candidate,
        verdicts: Verdicts {
            status,
            integrity,
            contract: ContractVerdict::Aligned,
        },
        evidence,
        gaps: vec![],
        backcheck: vec![],
        changed_paths: vec!["hello.py".into()],
        added_paths: Vec::new(),
        judgment: None,
        usage: Usage::default(),
        duration_ms: 1,
        proposal: None,
        rubric: None,
        spec_hash: record.contract.spec_hash.clone(),
        completes_run: false,
        key_id: String::new(),
        signature: String::new(),
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
        let s = reply(&r, &format!("Next: cli\nTask: try {round}"));
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
        transcript: None,
        attempt: 1,
        run_id: "r1".into(),
        generation: 1,
        round: 1,
        delivery_attempt: 1,
        worker: "w".into(),
        outcome: ExecOutcome::Failed { error: "x".into() },
        usage: Usage::default(),
        duration_ms: 0,
        agent_isolation: None,
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
fn an_ask_that_hands_the_goal_back_goes_back_to_the_manager_not_to_a_person() {
    let mut r = started();
    let goal = "Create hello.py that prints hello, loopgate on one line and exits 0.";
    r.contract.goal = goal.to_string();
    let s = reply(&r, &format!("Next: ask\nTask: {goal}"));
    assert_eq!(s.record.state, RunState::Running, "no person was asked");
    assert!(s.log.iter().any(|e| matches!(
        &e.event,
        LogEvent::InvalidOutput { error, .. } if error.contains("repeats the goal")
    )));
    assert!(
        matches!(s.record.phase, Phase::Deciding { .. }),
        "asked again"
    );
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
        transcript: None,
        attempt: 1,
        run_id: "r1".into(),
        generation: 1,
        round: 1,
        delivery_attempt: 1,
        worker: "w".into(),
        outcome: ExecOutcome::Failed { error: "x".into() },
        usage: Usage::default(),
        duration_ms: 0,
        agent_isolation: None,
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
                "Current task state: {}\nNext: cli\nTask: {round} {}",
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
    let prompt = crate::decide::manager_prompt::user_prompt(&r, 24_000);
    assert!(prompt.chars().count() <= 24_000, "{}", prompt.len());
    assert!(prompt.contains("Create hello.py"));
    assert!(prompt.contains("Round 40"));
}

/// The manager reads the claim of the one episode a run waits for under the id its request
/// was sent with (the worker claims the step under that id): for an exec step and its audit,
/// and nothing while a decision is pending.
#[test]
fn the_episode_in_flight_is_named_by_its_requests_id() {
    let deciding = started();
    let sent_as = |step: &Step, want: EpisodeRole| {
        step.outgoing()
            .iter()
            .find_map(|o| match (&o.message, want) {
                (Message::ExecRequest(_), EpisodeRole::Executor)
                | (Message::AuditRequest(_), EpisodeRole::Auditor) => Some(o.msg_id.clone()),
                _ => None,
            })
    };
    let mut cases = Vec::new();
    let mut record = deciding.clone();
    if let Phase::Auditing { .. } = record.phase {
        // A start audit of the base first: answered so the run goes on to its decision.
        record = apply(
            &record,
            RunEvent::AuditFinished(report(&record, false, Integrity::Clean)),
        )
        .record;
    }
    cases.push((record.clone(), None));
    let executing = reply(&record, "Next: cli\nTask: write hello.py");
    cases.push((
        executing.record.clone(),
        sent_as(&executing, EpisodeRole::Executor).map(|id| (EpisodeRole::Executor, id)),
    ));
    let auditing = exec_done(&executing.record, "c1");
    cases.push((
        auditing.record.clone(),
        sent_as(&auditing, EpisodeRole::Auditor).map(|id| (EpisodeRole::Auditor, id)),
    ));
    for (record, want) in cases {
        assert!(
            want.is_some() || matches!(record.phase, Phase::Deciding { .. }),
            "a request was sent for {:?}",
            record.phase
        );
        assert_eq!(
            single_episode_in_flight(&record),
            want,
            "{:?}",
            record.phase
        );
    }
}
