//! The rubric in the gate, and PIVOT.

use super::tests::{apply, exec_done, kinds, reply};
use super::*;
use crate::task::parse_task_toml;
use loopgate_protocol::rubric::{RubricOutcome, RubricScore, RubricVerdict, ScoreLayer, Strategy};
use loopgate_protocol::verdict::Evidence;
use loopgate_protocol::verdict::{CheckVerdict, Integrity};

const RUBRIC_TASK: &str = r#"
goal = "Write a README"
rubric_threshold = 8.5
derive_criteria = false
[[acceptance]]
id = "prints"
check = "true"
[[rubric]]
name = "clarity"
[roles]
auditor = "judge"
[budget]
# The run's first step comes at once here; baseline_tests.rs tests the starting
# workspace's checks before it.
baseline_checks = false
max_rounds = 5
max_failed_rounds = 5
# The manager decides every step here, the first one too.
clause_steps = false
"#;

fn rubric_run() -> RunRecord {
    start_run("r1", parse_task_toml(RUBRIC_TASK).unwrap(), "base", 0).record
}

fn verdict(average: f64, strategy: Strategy, outcome: RubricOutcome) -> RubricVerdict {
    RubricVerdict {
        threshold: 8.5,
        score: Some(RubricScore {
            scores: [("clarity".to_string(), average)].into_iter().collect(),
            weighted_average: average,
            strategy: Some(strategy),
            layer: ScoreLayer::Json,
            notes: vec![],
        }),
        outcome: Some(outcome),
        reason: "judge's reason".into(),
    }
}

/// A round audit whose checks pass, with the rubric verdict and its evidence.
fn rubric_audit(record: &RunRecord, v: RubricVerdict) -> Step {
    let mut report = super::tests::report(record, true, Integrity::Clean);
    report.evidence.push(Evidence {
        artifact_version: report.snapshot.clone(),
        check_id: loopgate_protocol::contract::RUBRIC_EVIDENCE_ID.into(),
        verdict: if v.passed() {
            CheckVerdict::Pass
        } else {
            CheckVerdict::Fail
        },
        produced_at: 1,
        log_digest: None,
        exit_code: None,
        duration_ms: 1,
        output_excerpt: v.summary(),
        isolated: None,
        screenshots: Vec::new(),
    });
    report.rubric = Some(v);
    apply(record, RunEvent::AuditFinished(report))
}

fn round(record: &RunRecord, candidate: &str) -> RunRecord {
    let r = reply(
        record,
        &format!("Next: cli\nTask: improve it into {candidate}"),
    )
    .record;
    exec_done(&r, candidate).record
}

#[test]
fn the_rubric_joins_the_gate() {
    struct Case {
        name: &'static str,
        verdict: RubricVerdict,
        completed: bool,
    }
    let cases = [
        Case {
            name: "pass completes",
            verdict: verdict(9.0, Strategy::Finish, RubricOutcome::Pass),
            completed: true,
        },
        Case {
            name: "below threshold keeps going",
            verdict: verdict(
                7.0,
                Strategy::Refine,
                RubricOutcome::BelowThreshold {
                    average: 7.0,
                    threshold: 8.5,
                },
            ),
            completed: false,
        },
        Case {
            name: "FINISH below threshold is refused",
            verdict: verdict(
                7.9,
                Strategy::Finish,
                RubricOutcome::FinishRefused {
                    average: 7.9,
                    threshold: 8.5,
                },
            ),
            completed: false,
        },
    ];
    for case in cases {
        let r = round(&rubric_run(), "c1");
        let step = rubric_audit(&r, case.verdict.clone());
        let done = step.record.state == RunState::Completed;
        assert_eq!(done, case.completed, "{}", case.name);
        assert!(kinds(&step).contains(&"rubric_scored"), "{}", case.name);
        let progress = step.record.progress();
        let avg = case.verdict.average().unwrap();
        assert!(
            progress.contains(&format!("rubric {avg:.1}/8.5")),
            "{}: {progress}",
            case.name
        );
        assert!(
            progress.starts_with("acceptance 1/1 passing on snapshot c1"),
            "{progress}"
        );
        if !case.completed {
            assert!(step
                .record
                .audit
                .last_gate
                .unwrap()
                .reasons
                .iter()
                .any(|r| r.contains("rubric")));
            assert!(step.record.feedback.iter().any(|f| f.contains("rubric")));
        }
    }
}

#[test]
fn pivot_rolls_back_to_the_last_passing_snapshot_even_with_perfect_scores() {
    // complete_on_gate = false keeps a fully passing snapshot from ending the run.
    let task = parse_task_toml(&RUBRIC_TASK.replace(
        "goal = \"Write a README\"",
        "goal = \"Write a README\"\ncomplete_on_gate = false",
    ))
    .unwrap();
    let r = start_run("r1", task, "base", 0).record;
    // PIVOT with nothing good yet: back to the base.
    let r = round(&r, "c1");
    let step = rubric_audit(&r, verdict(10.0, Strategy::Pivot, RubricOutcome::Pivot));
    assert!(kinds(&step).contains(&"pivot"));
    assert_eq!(step.record.snapshot, "base");
    assert!(step.record.feedback.iter().any(|f| f.contains("PIVOT")));
    assert!(matches!(step.record.phase, Phase::Deciding { .. }));
    // A good round, then a PIVOT: back to the good one.
    let r = round(&step.record, "good");
    let r = rubric_audit(&r, verdict(9.0, Strategy::Refine, RubricOutcome::Pass)).record;
    assert_eq!(r.audit.last_good_snapshot.as_deref(), Some("good"));
    let r = round(&r, "worse");
    let step = rubric_audit(&r, verdict(9.5, Strategy::Pivot, RubricOutcome::Pivot));
    assert_eq!(step.record.snapshot, "good");
    assert_eq!(
        step.record.audit.last_good_snapshot.as_deref(),
        Some("good")
    );
}
