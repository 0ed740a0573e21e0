use super::super::tests::{apply, evidence, exec_done, kinds, reply, report_on};
use super::super::{decide, start_run, Decision, RunEvent, Step};
use crate::state::{LogEvent, Phase, RunRecord, RunState};
use crate::task::parse_task_toml;
use loopgate_protocol::verdict::{AuditStatus, Evidence, Integrity};
use loopgate_protocol::wire::{AuditReport, Message};

/// A task over a workspace whose own tests pass at the start, with a feature still to add.
fn task_toml(budget: &str, more: &str) -> String {
    format!(
        r#"
goal = "Add every_nth to the package and keep its own tests green"
{more}
[[acceptance]]
id = "own-tests"
check = "python3 -m unittest"
[[acceptance]]
id = "every-nth"
check = "python3 -c 'from pkg import every_nth'"
[budget]
max_rounds = 4
step_retries = 0
clause_steps = false
{budget}
"#
    )
}

fn started(budget: &str) -> Step {
    start_run(
        "r1",
        parse_task_toml(&task_toml(budget, "")).unwrap(),
        "base",
        0,
    )
}

/// The checks-only report `record` waits for, with `evidence`.
fn checks_only_report(record: &RunRecord, evidence: Vec<Evidence>) -> AuditReport {
    AuditReport {
        mechanical_only: true,
        ..report_on(record, AuditStatus::Incomplete, Integrity::Clean, evidence)
    }
}

/// The baseline audit answered: `own-tests` passes on the starting workspace, `every-nth` not.
fn baseline_answered(record: &RunRecord) -> Step {
    let report = checks_only_report(
        record,
        vec![
            evidence("base", "own-tests", true),
            evidence("base", "every-nth", false),
        ],
    );
    apply(record, RunEvent::AuditFinished(report))
}

#[test]
fn a_run_first_checks_its_starting_workspace_with_no_model_asked() {
    let s = started("");
    assert!(
        matches!(
            &s.record.phase,
            Phase::Auditing { round: 0, candidate, checks_only: true, .. } if candidate == "base"
        ),
        "{:?}",
        s.record.phase
    );
    let [out] = s.outgoing() else {
        panic!("one message: {:?}", s.outgoing());
    };
    let Message::AuditRequest(request) = &out.message else {
        panic!("an audit request: {:?}", out.message);
    };
    assert!(request.mechanical_only);
    assert!(!request.completes_run);
    assert_eq!(request.candidate_snapshot, "base");
    assert_eq!(request.base_snapshot, "base");
    assert_eq!(kinds(&s), vec!["submitted", "audit_dispatched"]);
    assert!(s
        .log
        .iter()
        .any(|e| matches!(e.event, LogEvent::AuditDispatched { baseline: true, .. })));
    assert_eq!(s.record.state, RunState::Running);
    s.record.check_consistency().unwrap();
}

#[test]
fn the_baseline_stands_for_the_starting_workspace_and_the_first_step_follows() {
    let s = baseline_answered(&started("").record);
    let baseline = s
        .log
        .iter()
        .find_map(|e| match &e.event {
            LogEvent::BaselineChecked {
                passing,
                failing,
                skipped,
                ..
            } => Some((passing.clone(), failing.clone(), skipped.clone())),
            _ => None,
        })
        .expect("baseline_checked logged");
    assert_eq!(
        baseline,
        (
            vec!["own-tests".to_string()],
            vec!["every-nth".to_string()],
            None
        )
    );
    assert_eq!(s.record.snapshot, "base");
    assert_eq!(s.record.audit.evidence.len(), 2);
    assert_eq!(s.evidence.len(), 2, "the evidence is stored");
    assert!(matches!(s.record.phase, Phase::Deciding { .. }));
    assert_eq!(s.record.round, 0, "the baseline is not a round");
    assert_eq!(s.record.streaks.failed_rounds, 0);
    assert!(!kinds(&s).contains(&"gate"), "{:?}", kinds(&s));
    s.record.check_consistency().unwrap();
}

/// The first round breaks the tests that passed at the start and still lacks the feature:
/// with a baseline it is set aside and the next step starts from the starting workspace;
/// without one (the old behaviour) the broken candidate became the artifact.
#[test]
fn a_first_candidate_that_breaks_what_passed_at_the_start_is_set_aside() {
    for (budget, kept) in [("", "base"), ("baseline_checks = false", "c1")] {
        let s = started(budget);
        let s = if budget.is_empty() {
            baseline_answered(&s.record)
        } else {
            s
        };
        let s = reply(&s.record, "Next: cli\nTask: add every_nth");
        assert_eq!(s.record.round, 1);
        let s = exec_done(&s.record, "c1");
        let report = report_on(
            &s.record,
            AuditStatus::Incomplete,
            Integrity::Clean,
            vec![
                evidence("c1", "own-tests", false),
                evidence("c1", "every-nth", false),
            ],
        );
        let s = apply(&s.record, RunEvent::AuditFinished(report));
        assert_eq!(s.record.snapshot, kept, "{budget:?}");
        assert_eq!(
            kinds(&s).contains(&"candidate_rejected"),
            budget.is_empty(),
            "{budget:?}: {:?}",
            kinds(&s)
        );
    }
}

#[test]
fn a_lost_baseline_audit_is_skipped_and_not_counted_as_a_failed_round() {
    let s = started("");
    let deadline = s
        .record
        .deadlines
        .phase
        .as_ref()
        .expect("an audit deadline")
        .at_ms;
    let s = match decide(&s.record, &RunEvent::Tick, deadline + 1) {
        Decision::Apply(step) => *step,
        other => panic!("expected Apply, got {other:?}"),
    };
    let skipped = s.log.iter().find_map(|e| match &e.event {
        LogEvent::BaselineChecked { skipped, .. } => skipped.clone(),
        _ => None,
    });
    assert!(
        skipped
            .as_deref()
            .is_some_and(|why| why.contains("starting workspace")),
        "{skipped:?}"
    );
    assert!(matches!(s.record.phase, Phase::Deciding { .. }));
    assert_eq!(s.record.streaks.failed_rounds, 0);
    assert!(s.record.audit.evidence.is_empty());
    assert!(
        s.outgoing()
            .iter()
            .any(|o| matches!(o.message, Message::CancelEpisodes(_))),
        "the lost audit is cancelled: {:?}",
        s.outgoing()
    );
    assert_ne!(s.record.state, RunState::Failed);
}

#[test]
fn runs_without_a_baseline() {
    let cases = [
        ("turned off", task_toml("baseline_checks = false", "")),
        ("a planning stage", task_toml("", "plan = true")),
        (
            "no check to run",
            r#"
goal = "Write a haiku about rust into haiku.txt"
[[acceptance]]
id = "haiku"
description = "haiku.txt holds a haiku"
blocking = false
"#
            .to_string(),
        ),
    ];
    for (why, toml) in cases {
        let s = start_run("r1", parse_task_toml(&toml).unwrap(), "base", 0);
        assert!(
            !matches!(s.record.phase, Phase::Auditing { .. }),
            "{why}: {:?}",
            s.record.phase
        );
        assert!(!kinds(&s).contains(&"audit_dispatched"), "{why}");
    }
}
