//! A step of several attempts (`budget.attempts`): dispatch, scoring, the winner, early stop,
//! deadlines; and a step of one attempt unchanged.

use super::tests::{apply, evidence, kinds, reply, started};
use super::*;
use crate::state::{AttemptStage, DeadlineKind, Target};
use crate::task::parse_task_toml;
use loopgate_protocol::usage::Usage;
use loopgate_protocol::verdict::{AuditStatus, ContractVerdict, Integrity, Verdicts};
use loopgate_protocol::wire::{
    AuditPurpose, AuditReport, EpisodeRole, EpisodeStarted, ExecOutcome, ExecResult, Message,
};

const TASK3: &str = r#"
goal = "Create a, b and c"
[[acceptance]]
id = "a"
check = "test -f a"
[[acceptance]]
id = "b"
check = "test -f b"
[[acceptance]]
id = "c"
check = "test -f c"
[budget]
# The run's first step comes at once here; baseline_tests.rs tests the starting
# workspace's checks before it.
baseline_checks = false
attempts = 3
step_retries = 0
clause_steps = false
"#;

/// A run of `TASK3` whose first step (three siblings) is in flight.
fn dispatched() -> Step {
    let r = start_run("r1", parse_task_toml(TASK3).unwrap(), "base", 0).record;
    reply(&r, "Next: cli\nTask: create the files")
}

fn try_apply(record: &RunRecord, event: RunEvent) -> Decision {
    decide(record, &event, 2)
}

fn sibling_result(record: &RunRecord, k: u32, candidate: Option<&str>, tokens: u64) -> RunEvent {
    RunEvent::ExecFinished(ExecResult {
        transcript: None,
        run_id: record.id.clone(),
        generation: record.generation,
        round: record.round,
        delivery_attempt: 1,
        worker: format!("exec-{k}"),
        outcome: match candidate {
            Some(c) => ExecOutcome::Frozen {
                candidate: c.into(),
                summary: format!("attempt {k} did it"),
                claimed_done: true,
                steps: 1,
                tool_calls: 1,
                files_changed: 1,
                self_check_refusals: 0,
            },
            None => ExecOutcome::Failed {
                error: "model unreachable".into(),
            },
        },
        usage: Usage {
            input_tokens: tokens,
            output_tokens: 0,
            cost_micros: 0,
            ..Default::default()
        },
        duration_ms: 1,
        agent_isolation: None,
        attempt: k,
    })
}

/// The checks-only report on `candidate`: the criteria of `passing` pass, the rest fail.
fn checks_only(
    record: &RunRecord,
    candidate: &str,
    passing: &[&str],
    integrity: Integrity,
) -> RunEvent {
    let evidence = ["a", "b", "c"]
        .iter()
        .map(|id| evidence(candidate, id, passing.contains(id)))
        .collect();
    RunEvent::AuditFinished(AuditReport {
        run_id: record.id.clone(),
        generation: record.generation,
        round: record.round,
        purpose: AuditPurpose::Round,
        delivery_attempt: 1,
        worker: "aud".into(),
        snapshot: candidate.into(),
        verdicts: Verdicts {
            status: AuditStatus::Incomplete,
            integrity,
            contract: ContractVerdict::Aligned,
        },
        evidence,
        gaps: vec![],
        backcheck: vec![],
        changed_paths: vec!["a".into()],
        added_paths: vec![],
        judgment: None,
        usage: Usage::default(),
        duration_ms: 1,
        proposal: None,
        rubric: None,
        spec_hash: record.contract.spec_hash.clone(),
        completes_run: false,
        mechanical_only: true,
        key_id: String::new(),
        signature: String::new(),
    })
}

fn stages(record: &RunRecord) -> Vec<AttemptStage> {
    match &record.phase {
        Phase::Executing { attempts, .. } => attempts.iter().map(|a| a.stage).collect(),
        p => panic!("not executing: {p:?}"),
    }
}

fn requests(step: &Step) -> Vec<(String, Message)> {
    step.outgoing()
        .iter()
        .map(|o| (o.msg_id.clone(), o.message.clone()))
        .collect()
}

fn cancels(step: &Step) -> Vec<String> {
    step.outgoing()
        .iter()
        .filter_map(|o| match &o.message {
            Message::CancelEpisodes(c) => c.dispatch.clone(),
            _ => None,
        })
        .collect()
}

#[test]
fn one_attempt_is_the_step_it_was() {
    let s = reply(&started(), "Next: cli\nTask: write hello.py");
    assert_eq!(s.outgoing().len(), 1);
    assert_eq!(s.outgoing()[0].msg_id, "r1:1:1:exec");
    let Message::ExecRequest(request) = &s.outgoing()[0].message else {
        panic!("{:?}", s.outgoing());
    };
    assert_eq!(request.attempt, 1);
    let wire = serde_json::to_value(request).unwrap();
    assert!(wire.get("attempt").is_none(), "{wire}");
    let Phase::Executing { attempts, .. } = &s.record.phase else {
        panic!("{:?}", s.record.phase);
    };
    assert!(attempts.is_empty());
    let stored = serde_json::to_value(&s.record.phase).unwrap();
    assert!(stored.get("attempts").is_none(), "{stored}");
    assert!(!serde_json::to_string(&s.log).unwrap().contains("attempts"));
}

#[test]
fn a_step_of_three_attempts_goes_out_as_three_requests() {
    let s = dispatched();
    let sent = requests(&s);
    let ids: Vec<&str> = sent.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "r1:1:1:exec",
            "r1:1:1:exec:attempt-2",
            "r1:1:1:exec:attempt-3"
        ]
    );
    for (k, (_, message)) in sent.iter().enumerate() {
        let Message::ExecRequest(r) = message else {
            panic!("{message:?}");
        };
        assert_eq!(r.attempt, k as u32 + 1);
        assert_eq!(r.base_snapshot, "base");
        assert!(matches!(s.outgoing()[k].target, Target::Exec { .. }));
    }
    assert_eq!(stages(&s.record), vec![AttemptStage::Queued; 3]);
    assert_eq!(kinds(&s), vec!["decision", "exec_dispatched"]);
}

#[test]
fn the_candidate_passing_most_wins_and_the_others_are_outscored() {
    let mut r = dispatched().record;
    for (k, c, tokens) in [(1, "c1", 100), (2, "c2", 300), (3, "c3", 50)] {
        let s = apply(&r, sibling_result(&r, k, Some(c), tokens));
        let (id, Message::AuditRequest(audit)) = &requests(&s)[0] else {
            panic!("{:?}", s.outgoing());
        };
        assert_eq!(id, &format!("r1:1:1:audit:attempt-{k}"));
        assert!(audit.mechanical_only && !audit.completes_run);
        assert_eq!(audit.base_snapshot, "base");
        r = s.record;
    }
    assert_eq!(r.accounting.usage.executor.input_tokens, 450);
    let s = apply(&r, checks_only(&r, "c1", &["a"], Integrity::Clean));
    assert!(s.outgoing().is_empty());
    let s = apply(
        &s.record,
        checks_only(&s.record, "c3", &["a"], Integrity::Clean),
    );
    let s = apply(
        &s.record,
        checks_only(&s.record, "c2", &["a", "b"], Integrity::Clean),
    );
    assert_eq!(
        kinds(&s),
        vec![
            "audit_report",
            "candidate_rejected",
            "candidate_rejected",
            "attempt_won",
            "audit_dispatched"
        ]
    );
    let headlines: Vec<String> = s.log.iter().map(|e| e.event.headline()).collect();
    assert!(
        headlines[3].starts_with("attempt 2 of 3 won: 2/3 checks"),
        "{headlines:?}"
    );
    assert!(headlines[1].ends_with("outscored"), "{headlines:?}");
    // The winner gets the round's own, full audit.
    let (id, Message::AuditRequest(full)) = &requests(&s)[0] else {
        panic!("{:?}", s.outgoing());
    };
    assert_eq!(id, "r1:1:1:audit");
    assert!(!full.mechanical_only);
    assert_eq!(full.candidate_snapshot, "c2");
    assert!(matches!(&s.record.phase, Phase::Auditing { candidate, .. } if candidate == "c2"));
    // One round of history, the losers in its line.
    assert_eq!(s.record.history.len(), 1);
    let line = &s.record.history[0].exec_summary;
    assert!(line.contains("attempt 2 of 3 won: 2/3 checks"), "{line}");
    assert!(line.contains("attempt 1: 1/3 checks, outscored"), "{line}");
    // A tie (c1 and c3 pass one each) would have gone to fewer tokens: c3.
    assert!(line.contains("attempt 3: 1/3 checks, outscored"), "{line}");
}

#[test]
fn a_sibling_passing_everything_cancels_the_others_and_their_late_results_are_ignored() {
    let r = dispatched().record;
    let s = apply(&r, sibling_result(&r, 2, Some("c2"), 40));
    let s = apply(
        &s.record,
        checks_only(&s.record, "c2", &["a", "b", "c"], Integrity::Clean),
    );
    assert_eq!(
        cancels(&s),
        vec![
            "r1:1:1:exec".to_string(),
            "r1:1:1:exec:attempt-3".to_string()
        ]
    );
    let won = s
        .log
        .iter()
        .find(|e| e.event.kind() == "attempt_won")
        .unwrap();
    assert!(matches!(
        won.event,
        LogEvent::AttemptWon {
            attempt: 2,
            early: true,
            ..
        }
    ));
    assert!(matches!(&s.record.phase, Phase::Auditing { candidate, .. } if candidate == "c2"));
    let tokens = s.record.accounting.usage.executor.input_tokens;
    assert_eq!(tokens, 40);
    // A cancelled sibling's result arrives anyway: ignored, its tokens not counted.
    let late = sibling_result(&s.record, 1, Some("c1"), 999);
    assert!(matches!(try_apply(&s.record, late), Decision::Ignore(_)));
}

#[test]
fn an_integrity_violation_never_wins() {
    let r = dispatched().record;
    let s = apply(&r, sibling_result(&r, 1, Some("c1"), 10));
    let s = apply(&s.record, sibling_result(&s.record, 2, Some("c2"), 10));
    let s = apply(&s.record, sibling_result(&s.record, 3, None, 10));
    // All three criteria pass, but a protected path changed: no early stop, no win.
    let s = apply(
        &s.record,
        checks_only(&s.record, "c1", &["a", "b", "c"], Integrity::Violation),
    );
    assert!(cancels(&s).is_empty());
    let s = apply(
        &s.record,
        checks_only(&s.record, "c2", &["a"], Integrity::Clean),
    );
    assert!(s.log.iter().any(|e| matches!(
        &e.event,
        LogEvent::CandidateRejected { candidate, reason } if candidate == "c1" && reason == "integrity violation"
    )));
    assert!(matches!(&s.record.phase, Phase::Auditing { candidate, .. } if candidate == "c2"));
}

#[test]
fn only_violations_and_failures_fail_the_round() {
    let r = dispatched().record;
    let s = apply(&r, sibling_result(&r, 1, Some("c1"), 10));
    let s = apply(&s.record, sibling_result(&s.record, 2, None, 10));
    let s = apply(&s.record, sibling_result(&s.record, 3, None, 10));
    let s = apply(
        &s.record,
        checks_only(&s.record, "c1", &["a"], Integrity::Violation),
    );
    assert!(matches!(s.record.phase, Phase::Deciding { .. }));
    assert_eq!(s.record.streaks.failed_rounds, 1);
    assert_eq!(s.record.history.len(), 1);
    assert!(s.record.history[0].candidate.is_none());
    assert_eq!(s.record.snapshot, "base");
}

#[test]
fn identical_candidates_share_one_checks_only_audit() {
    let r = dispatched().record;
    let s = apply(&r, sibling_result(&r, 1, Some("same"), 10));
    assert_eq!(s.outgoing().len(), 1);
    let s = apply(&s.record, sibling_result(&s.record, 2, Some("same"), 5));
    assert!(s.outgoing().is_empty());
    let s = apply(&s.record, sibling_result(&s.record, 3, None, 5));
    let s = apply(
        &s.record,
        checks_only(&s.record, "same", &["a"], Integrity::Clean),
    );
    // Both scored alike; the tie goes to fewer tokens (attempt 2), and no loser is rejected
    // for the very snapshot that won.
    assert!(s
        .log
        .iter()
        .any(|e| matches!(e.event, LogEvent::AttemptWon { attempt: 2, .. })));
    assert!(!kinds(&s).contains(&"candidate_rejected"));
}

fn start(record: &RunRecord, k: u32, delivery: u64) -> RunEvent {
    RunEvent::EpisodeStarted(EpisodeStarted {
        run_id: record.id.clone(),
        generation: record.generation,
        round: record.round,
        role: EpisodeRole::Executor,
        delivery_attempt: delivery,
        worker: format!("exec-{k}"),
        attempt: k,
    })
}

#[test]
fn each_sibling_starts_once_and_moves_the_deadline_on() {
    let r = dispatched().record;
    let s = apply(&r, start(&r, 1, 1));
    let first = s.record.deadlines.phase.unwrap();
    assert_eq!(first.kind, DeadlineKind::ExecEpisode);
    assert!(
        s.record.deadlines.queued_since_ms.is_some(),
        "two still queue"
    );
    // Sibling 2 starts later (one executor: it queued): the deadline covers it.
    let s2 = match decide(&s.record, &start(&s.record, 2, 1), 60_000) {
        Decision::Apply(step) => *step,
        other => panic!("{other:?}"),
    };
    assert!(s2.record.deadlines.phase.unwrap().at_ms > first.at_ms);
    assert!(s2.log[0]
        .event
        .headline()
        .starts_with("attempt 2: executor exec-2 started"));
    let s3 = apply(&s2.record, start(&s2.record, 3, 1));
    // The same start again (not the redelivery of the notice just applied) is no honest
    // worker's.
    assert!(matches!(
        try_apply(&s3.record, start(&s3.record, 2, 1)),
        Decision::Distrusted(_)
    ));
    assert!(s3.record.deadlines.queued_since_ms.is_none());
}

#[test]
fn the_deadline_settles_on_what_was_scored() {
    let r = dispatched().record;
    let s = apply(&r, start(&r, 1, 1));
    let s = apply(&s.record, sibling_result(&s.record, 1, Some("c1"), 10));
    let s = apply(
        &s.record,
        checks_only(&s.record, "c1", &["a"], Integrity::Clean),
    );
    let at = s.record.deadlines.phase.unwrap().at_ms;
    let s = match decide(&s.record, &RunEvent::Tick, at + 1) {
        Decision::Apply(step) => *step,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        cancels(&s),
        vec![
            "r1:1:1:exec:attempt-2".to_string(),
            "r1:1:1:exec:attempt-3".to_string()
        ]
    );
    assert!(s
        .log
        .iter()
        .any(|e| matches!(e.event, LogEvent::AttemptWon { attempt: 1, .. })));
    assert!(matches!(&s.record.phase, Phase::Auditing { candidate, .. } if candidate == "c1"));
}

#[test]
fn the_deadline_with_nothing_scored_fails_the_round() {
    let r = dispatched().record;
    let at = r.deadlines.phase.unwrap().at_ms;
    let s = match decide(&r, &RunEvent::Tick, at + 1) {
        Decision::Apply(step) => *step,
        other => panic!("{other:?}"),
    };
    assert_eq!(cancels(&s).len(), 3);
    assert!(matches!(s.record.phase, Phase::Deciding { .. }));
}

#[test]
fn a_full_audit_report_while_siblings_run_is_ignored() {
    let r = dispatched().record;
    let s = apply(&r, sibling_result(&r, 1, Some("c1"), 10));
    let RunEvent::AuditFinished(mut report) =
        checks_only(&s.record, "c1", &["a", "b", "c"], Integrity::Clean)
    else {
        unreachable!()
    };
    report.mechanical_only = false;
    assert!(matches!(
        try_apply(&s.record, RunEvent::AuditFinished(report)),
        Decision::Ignore(_)
    ));
}

/// One executor busy elsewhere: the step's deadline passes while siblings still queue behind
/// it. That is queue wait, not a failure: the sibling past its time is cancelled, the queued
/// ones wait on under a fresh start budget.
#[test]
fn siblings_queued_behind_busy_executors_wait_on() {
    let r = dispatched().record;
    let s = apply(&r, start(&r, 1, 1));
    let at = s.record.deadlines.phase.unwrap().at_ms;
    let serving = RunEvent::Sweep {
        serving: vec![loopgate_protocol::subjects::Capability::Cli],
    };
    let s = match decide(&s.record, &serving, at + 1) {
        Decision::Apply(step) => *step,
        other => panic!("{other:?}"),
    };
    assert_eq!(cancels(&s), vec!["r1:1:1:exec".to_string()]);
    assert_eq!(kinds(&s), vec!["deadline_missed", "queue_wait"]);
    assert_eq!(
        stages(&s.record),
        vec![
            AttemptStage::Lost,
            AttemptStage::Queued,
            AttemptStage::Queued
        ]
    );
    assert_eq!(
        s.record.deadlines.phase.map(|d| d.kind),
        Some(DeadlineKind::ExecStart)
    );
    // Without an executor serving the step, the deadline settles it.
    let s = match decide(&s.record, &RunEvent::Tick, at + 1_000_000) {
        Decision::Apply(step) => *step,
        other => panic!("{other:?}"),
    };
    assert!(matches!(s.record.phase, Phase::Deciding { .. }));
}

/// Planning episodes (spec, proposal) run once whatever `attempts` says; the work steps after
/// the contract is frozen run as siblings.
#[test]
fn planning_episodes_run_once() {
    let task =
        parse_task_toml("goal = \"Make a greeter CLI\"\nplan = true\n[budget]\nattempts = 3\n")
            .unwrap();
    let s = start_run("r1", task, "base", 0);
    let sent: Vec<&Message> = s.outgoing().iter().map(|o| &o.message).collect();
    assert!(
        matches!(sent[..], [Message::ExecRequest(ref r)] if r.attempt == 1),
        "{sent:?}"
    );
    let Phase::Executing { attempts, .. } = &s.record.phase else {
        panic!("{:?}", s.record.phase);
    };
    assert!(attempts.is_empty());
}
