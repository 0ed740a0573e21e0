//! The spend budget running out with a round's episode: its candidate still gets a checks-only
//! audit (no model asked, never completing the run), and the run ends holding the better of it
//! and the artifact before; an episode that froze nothing ends the run at once.

use super::tests::{apply, audited, evidence, exec_result, frozen, reply, report_on};
use super::*;
use crate::state::Target;
use crate::task::parse_task_toml;
use loopgate_protocol::usage::Usage;
use loopgate_protocol::verdict::{AuditStatus, Integrity};
use loopgate_protocol::wire::{AuditPurpose, ExecOutcome, Message};

const TASK: &str = r#"
goal = "Make a and b pass"
[[acceptance]]
id = "a"
check = "test -f a"
[[acceptance]]
id = "b"
check = "test -f b"
[budget]
# The run's first step comes at once here; baseline_tests.rs tests the starting
# workspace's checks before it.
baseline_checks = false
max_rounds = 5
max_total_tokens = 1000
step_retries = 0
clause_steps = false
"#;

fn exec(record: &RunRecord, candidate: Option<&str>, tokens: u64) -> RunEvent {
    let outcome = match candidate {
        Some(candidate) => frozen(candidate),
        None => ExecOutcome::Failed {
            error: "the model server failed".into(),
        },
    };
    exec_result(record, outcome, Usage::tokens(tokens, 0))
}

/// A report on the candidate under audit: `passing` lists the checks that pass.
fn report(record: &RunRecord, passing: &[&str], mechanical_only: bool) -> RunEvent {
    let candidate = audited(record);
    let status = if passing.len() == 2 {
        AuditStatus::Complete
    } else {
        AuditStatus::Incomplete
    };
    let evidence = ["a", "b"]
        .iter()
        .map(|id| evidence(&candidate, id, passing.contains(id)))
        .collect();
    let mut report = report_on(record, status, Integrity::Clean, evidence);
    report.mechanical_only = mechanical_only;
    RunEvent::AuditFinished(report)
}

/// Round 1 froze `c1`, audited with `a` passing; round 2's episode froze `c2` and spent the
/// token budget.
fn budget_spent_by_round_two() -> Step {
    let r = start_run("r1", parse_task_toml(TASK).unwrap(), "base", 0).record;
    let r = reply(&r, "Next: cli\nTask: create a").record;
    let r = apply(&r, exec(&r, Some("c1"), 400)).record;
    let r = apply(&r, report(&r, &["a"], false)).record;
    assert_eq!((r.snapshot.as_str(), r.state), ("c1", RunState::Running));
    let r = reply(&r, "Next: cli\nTask: create b").record;
    apply(&r, exec(&r, Some("c2"), 700))
}

#[test]
fn a_candidate_frozen_as_the_budget_runs_out_gets_a_checks_only_audit() {
    let step = budget_spent_by_round_two();
    assert_eq!(step.record.state, RunState::Running);
    assert!(
        matches!(
            &step.record.phase,
            Phase::Auditing { candidate, checks_only: true, purpose: AuditPurpose::Round, .. }
                if candidate == "c2"
        ),
        "{:?}",
        step.record.phase
    );
    let request = step
        .record
        .outbox
        .iter()
        .find_map(|o| match (&o.target, &o.message) {
            (Target::Audit, Message::AuditRequest(r)) => Some(r),
            _ => None,
        })
        .expect("an audit request");
    assert!(request.mechanical_only && !request.completes_run);
    assert!(step.log.iter().any(|e| matches!(
        &e.event,
        LogEvent::AuditDispatched {
            checks_only: true,
            baseline: false,
            ..
        }
    )));
}

#[test]
fn the_run_ends_holding_the_better_of_the_last_candidate_and_the_artifact_before() {
    let auditing = budget_spent_by_round_two().record;
    // (checks passing on c2, the snapshot the run ends holding)
    let cases: [(&[&str], &str); 4] = [
        // Better: held.
        (&["a", "b"], "c2"),
        // As many passing: held, as any round's candidate is.
        (&["a"], "c2"),
        (&["b"], "c2"),
        // Fewer than c1 (it broke `a`): set aside, c1 kept.
        (&[], "c1"),
    ];
    for (passing, held) in cases {
        let end = apply(&auditing, report(&auditing, passing, true)).record;
        assert_eq!(end.state, RunState::BudgetExhausted, "{passing:?}");
        assert_eq!(end.snapshot, held, "{passing:?}");
        assert!(
            end.terminal_reason
                .as_deref()
                .is_some_and(|r| r.contains("token budget exhausted")),
            "{:?}",
            end.terminal_reason
        );
    }
}

#[test]
fn only_a_checks_only_report_answers_a_checks_only_audit_and_the_reverse() {
    let auditing = budget_spent_by_round_two().record;
    let full = decide(&auditing, &report(&auditing, &["a", "b"], false), 1);
    assert!(matches!(full, Decision::Ignore(_)), "{full:?}");
    // A round's full audit is not answered by a checks-only report of its candidate.
    let r = start_run("r1", parse_task_toml(TASK).unwrap(), "base", 0).record;
    let r = reply(&r, "Next: cli\nTask: create a").record;
    let r = apply(&r, exec(&r, Some("c1"), 400)).record;
    let checks_only = decide(&r, &report(&r, &["a", "b"], true), 1);
    assert!(
        matches!(checks_only, Decision::Ignore(_)),
        "{checks_only:?}"
    );
}

#[test]
fn an_episode_that_froze_nothing_as_the_budget_runs_out_ends_the_run_at_once() {
    let r = start_run("r1", parse_task_toml(TASK).unwrap(), "base", 0).record;
    let r = reply(&r, "Next: cli\nTask: create a").record;
    let end = apply(&r, exec(&r, None, 1100));
    assert_eq!(end.record.state, RunState::BudgetExhausted);
    assert!(!end
        .log
        .iter()
        .any(|e| matches!(e.event, LogEvent::AuditDispatched { .. })));
}
