//! Planning phases, contract approval and freezing, the rubric in the gate, and PIVOT.

use super::tests::{apply, exec_done, kinds, reply};
use super::*;
use crate::contract_proposal::{PROPOSAL_FILE, SPEC_FILE};
use crate::state::Outgoing;
use crate::state::{ContractSource, PlanningStage, Target};
use crate::task::parse_task_toml;
use loopgate_protocol::usage::Usage;
use loopgate_protocol::verdict::Evidence;
use loopgate_protocol::verdict::{AuditStatus, CheckVerdict, ContractVerdict, Integrity, Verdicts};
use loopgate_protocol::wire::AuditReport;
use loopgate_protocol::wire::{AuditPurpose, EpisodeKind, Message};

const PLANNED: &str = r#"
goal = "Make a greeter CLI"
plan = true
[budget]
max_rounds = 3
max_failed_rounds = 3
"#;

const PROPOSAL: &str = r#"
[[acceptance]]
id = "prints"
description = "greets"
check = "python3 hello.py | grep -q hello"
"#;

fn planned(extra: &str) -> RunRecord {
    let task = parse_task_toml(&PLANNED.replace("plan = true\n", &format!("plan = true\n{extra}")))
        .unwrap();
    start_run("r1", task, "base", 0).record
}

fn exec_request(record: &RunRecord) -> &loopgate_protocol::wire::ExecRequest {
    match &record.outbox[..] {
        [Outgoing {
            message: Message::ExecRequest(req),
            ..
        }] => req,
        other => panic!("expected one exec request, got {other:?}"),
    }
}

/// A plan audit of the pending candidate.
fn plan_audit(
    record: &RunRecord,
    integrity: Integrity,
    changed: &[&str],
    proposal: Option<&str>,
) -> Step {
    plan_audit_with(record, integrity, changed, proposal, vec![])
}

/// A plan audit that also ran the proposal's checks on the proposal snapshot.
fn plan_audit_with(
    record: &RunRecord,
    integrity: Integrity,
    changed: &[&str],
    proposal: Option<&str>,
    pre_checks: Vec<(&str, CheckVerdict)>,
) -> Step {
    let pre_checks = pre_checks
        .into_iter()
        .map(|(id, verdict)| (id, verdict, Some(0), ""))
        .collect();
    plan_audit_full(record, integrity, changed, proposal, pre_checks)
}

/// A plan audit whose pre-run checks have these exit codes and outputs.
fn plan_audit_full(
    record: &RunRecord,
    integrity: Integrity,
    changed: &[&str],
    proposal: Option<&str>,
    pre_checks: Vec<(&str, CheckVerdict, Option<i32>, &str)>,
) -> Step {
    let candidate = match &record.phase {
        Phase::Auditing {
            purpose: AuditPurpose::Plan,
            candidate,
            ..
        } => candidate.clone(),
        p => panic!("not in a plan audit: {p:?}"),
    };
    apply(
        record,
        RunEvent::AuditFinished(AuditReport {
            mechanical_only: false,
            run_id: record.id.clone(),
            generation: record.generation,
            round: record.round,
            purpose: AuditPurpose::Plan,
            delivery_attempt: 1,
            worker: "a".into(),
            snapshot: candidate.clone(),
            verdicts: Verdicts {
                status: AuditStatus::Complete,
                integrity,
                contract: ContractVerdict::Aligned,
            },
            evidence: pre_checks
                .iter()
                .map(|(id, verdict, exit_code, output)| Evidence {
                    artifact_version: candidate.clone(),
                    check_id: id.to_string(),
                    verdict: *verdict,
                    produced_at: 1,
                    log_digest: None,
                    exit_code: *exit_code,
                    duration_ms: 1,
                    output_excerpt: output.to_string(),
                    isolated: None,
                    screenshots: Vec::new(),
                })
                .collect(),
            gaps: vec![],
            backcheck: vec![],
            changed_paths: changed.iter().map(|p| p.to_string()).collect(),
            added_paths: Vec::new(),
            judgment: None,
            usage: Usage::default(),
            duration_ms: 1,
            proposal: proposal.map(str::to_string),
            rubric: None,
            spec_hash: record.contract.spec_hash.clone(),
            completes_run: false,
            key_id: String::new(),
            signature: String::new(),
        }),
    )
}

/// Planner and proposer both succeed; returns the record after the proposal's audit.
fn through_planning(extra: &str) -> Step {
    let r = planned(extra);
    let r = exec_done(&r, "spec-snap").record;
    let r = plan_audit(&r, Integrity::Clean, &[SPEC_FILE], None).record;
    let r = exec_done(&r, "contract-snap").record;
    plan_audit(&r, Integrity::Clean, &[PROPOSAL_FILE], Some(PROPOSAL))
}

#[test]
fn a_planned_run_writes_the_spec_then_the_contract_then_freezes_it() {
    let r = planned("");
    assert_eq!(r.planning.stage, Some(PlanningStage::Spec));
    assert_eq!(r.state, RunState::Running);
    let req = exec_request(&r);
    assert_eq!(req.episode, EpisodeKind::Plan);
    assert_eq!(req.increment.write_scope, vec![SPEC_FILE.to_string()]);
    assert!(req.contract.criteria.is_empty());

    let r = exec_done(&r, "spec-snap").record;
    assert!(matches!(
        r.phase,
        Phase::Auditing {
            purpose: AuditPurpose::Plan,
            ..
        }
    ));
    let step = plan_audit(&r, Integrity::Clean, &[SPEC_FILE], None);
    assert!(kinds(&step).contains(&"spec_written"));
    let r = step.record;
    assert_eq!(r.planning.stage, Some(PlanningStage::Contract));
    assert_eq!(r.snapshot, "spec-snap");
    assert_eq!(exec_request(&r).episode, EpisodeKind::Propose);
    assert_eq!(
        exec_request(&r).increment.write_scope,
        vec![PROPOSAL_FILE.to_string()]
    );

    let r = exec_done(&r, "contract-snap").record;
    let step = plan_audit(&r, Integrity::Clean, &[PROPOSAL_FILE], Some(PROPOSAL));
    assert_eq!(
        kinds(&step),
        vec!["audit_report", "contract_proposed", "contract_frozen"]
    );
    let r = step.record;
    assert_eq!(r.planning.stage, None);
    assert_eq!(r.contract.criteria.len(), 1);
    assert!(r.contract.protected_paths.contains(&SPEC_FILE.to_string()));
    assert!(r.contract.is_intact());
    // Round 1 is the manager's: planning rounds do not count against max_rounds.
    assert!(matches!(r.phase, Phase::Deciding { .. }));
    assert_eq!(r.rounds_this_generation(), 0);
    assert_eq!(r.outbox[0].target, Target::Decide);
    // Every later executor request carries the frozen contract and names its hash.
    let r = reply(&r, "Next: cli\nTask: write hello.py").record;
    let req = exec_request(&r);
    assert_eq!(req.contract.spec_hash, r.contract.spec_hash);
    assert_eq!(req.episode, EpisodeKind::Step);
}

#[test]
fn planning_attempts_that_break_the_rules_are_rejected_and_retried() {
    struct Case {
        name: &'static str,
        integrity: Integrity,
        changed: &'static [&'static str],
    }
    let cases = [
        Case {
            name: "planner wrote code",
            integrity: Integrity::Suspect,
            changed: &[SPEC_FILE, "hello.py"],
        },
        Case {
            name: "planner touched a protected path",
            integrity: Integrity::Violation,
            changed: &[SPEC_FILE],
        },
        Case {
            name: "planner wrote nothing",
            integrity: Integrity::Clean,
            changed: &[],
        },
    ];
    for case in cases {
        let r = exec_done(&planned(""), "bad").record;
        let step = plan_audit(&r, case.integrity, case.changed, None);
        assert!(
            kinds(&step).contains(&"candidate_rejected"),
            "{}",
            case.name
        );
        let r = step.record;
        assert_eq!(r.snapshot, "base", "{}", case.name);
        assert_eq!(r.planning.stage, Some(PlanningStage::Spec), "{}", case.name);
        assert_eq!(exec_request(&r).episode, EpisodeKind::Plan, "{}", case.name);
        assert!(
            exec_request(&r)
                .increment
                .instructions
                .contains("was not accepted"),
            "{}: the retry says why",
            case.name
        );
    }
}

#[test]
fn an_invalid_proposal_is_refused_and_repeated_failures_ask_a_person() {
    let r = planned("");
    let r = exec_done(&r, "spec-snap").record;
    let mut r = plan_audit(&r, Integrity::Clean, &[SPEC_FILE], None).record;
    for attempt in 1..=3 {
        r = exec_done(&r, &format!("c{attempt}")).record;
        let step = plan_audit(
            &r,
            Integrity::Clean,
            &[PROPOSAL_FILE],
            Some("[[acceptance]]\nid = \"a\"\n"),
        );
        assert!(kinds(&step).contains(&"contract_invalid"));
        r = step.record;
    }
    assert_eq!(r.state, RunState::WaitingForInput);
    assert_eq!(r.planning.stage, Some(PlanningStage::Contract));
    // A person's answer sends the proposer back to work with the guidance.
    let r = apply(
        &r,
        RunEvent::Answer {
            text: "use a grep check".into(),
        },
    )
    .record;
    assert_eq!(r.state, RunState::Running);
    assert_eq!(exec_request(&r).episode, EpisodeKind::Propose);
    // Once frozen, the manager hears nothing of the planning trouble, only the frozen contract.
    let r = exec_done(&r, "c4").record;
    let r = plan_audit(&r, Integrity::Clean, &[PROPOSAL_FILE], Some(PROPOSAL)).record;
    assert_eq!(r.planning.stage, None);
    assert_eq!(r.feedback.len(), 1, "{:?}", r.feedback);
    assert!(r.feedback[0].contains("frozen"));
}

#[test]
fn approval_waits_then_approve_or_edit_freezes_and_later_changes_are_refused() {
    let step = through_planning("require_approval = true\n");
    let r = step.record;
    assert_eq!(r.state, RunState::WaitingForInput);
    assert_eq!(r.planning.stage, Some(PlanningStage::Approval));
    let proposed = r.planning.proposed_contract.clone().unwrap();
    assert!(r.contract.criteria.is_empty(), "not frozen before approval");
    assert!(r.progress().contains("waiting for approval"));
    // `answer` is not approval.
    assert!(matches!(
        decide(&r, &RunEvent::Answer { text: "ok".into() }, 1),
        Decision::Ignore(_)
    ));

    // Approve as is.
    let approved = apply(&r, RunEvent::Approve { edited: None });
    assert!(kinds(&approved).contains(&"contract_frozen"));
    assert_eq!(approved.record.contract, proposed);
    assert!(matches!(
        approved.log.iter().find_map(|e| match &e.event {
            LogEvent::ContractFrozen { source, .. } => Some(*source),
            _ => None,
        }),
        Some(ContractSource::Approved)
    ));
    // Once frozen, no change is accepted.
    let edited = edited_contract(
        &approved.record,
        "[[acceptance]]\nid = \"x\"\ncheck = \"true\"",
    )
    .unwrap();
    assert!(matches!(
        decide(
            &approved.record,
            &RunEvent::Approve {
                edited: Some(edited.clone())
            },
            2
        ),
        Decision::Ignore(ref why) if why.contains("frozen")
    ));

    // Or replace it with an edited contract.
    let replaced = apply(
        &r,
        RunEvent::Approve {
            edited: Some(edited.clone()),
        },
    )
    .record;
    assert_eq!(replaced.contract, edited);
    assert_eq!(replaced.state, RunState::Running);
}

#[test]
fn a_contract_already_satisfied_before_any_work_is_refused() {
    let r = planned("");
    let r = exec_done(&r, "spec-snap").record;
    let r = plan_audit(&r, Integrity::Clean, &[SPEC_FILE], None).record;
    let r = exec_done(&r, "c1").record;
    // Every blocking check already passes on the planning snapshot: it tests nothing.
    let step = plan_audit_with(
        &r,
        Integrity::Clean,
        &[PROPOSAL_FILE],
        Some(PROPOSAL),
        vec![("prints", CheckVerdict::Pass)],
    );
    assert!(kinds(&step).contains(&"contract_invalid"));
    assert_eq!(step.record.planning.stage, Some(PlanningStage::Contract));
    assert!(step
        .record
        .feedback
        .last()
        .unwrap()
        .contains("already satisfied"));
    // Failing before the work, as it should: frozen.
    let r = exec_done(&step.record, "c2").record;
    let step = plan_audit_with(
        &r,
        Integrity::Clean,
        &[PROPOSAL_FILE],
        Some(PROPOSAL),
        vec![("prints", CheckVerdict::Fail)],
    );
    assert!(kinds(&step).contains(&"contract_frozen"));
}

#[test]
fn approve_is_refused_on_a_run_that_was_never_planned() {
    let r = start_run(
        "r1",
        parse_task_toml("goal = \"x\"\n[[acceptance]]\nid = \"a\"\ncheck = \"true\"").unwrap(),
        "base",
        0,
    )
    .record;
    assert!(matches!(
        decide(&r, &RunEvent::Approve { edited: None }, 1),
        Decision::Ignore(_)
    ));
}

// ------------------------------------------------------------------------------------------
// Goal clauses in the planned contract.

#[test]
fn the_proposer_sees_the_clauses_and_a_derived_check_broken_before_work_is_refused() {
    let judged = "[roles]\nauditor = \"judge\"\n";
    let r = planned(judged);
    let r = exec_done(&r, "spec-snap").record;
    let r = plan_audit(&r, Integrity::Clean, &[SPEC_FILE], None).record;
    let prompt = &exec_request(&r).increment.instructions;
    assert!(prompt.contains("1. \"Make a greeter CLI\""), "{prompt}");
    assert!(prompt.contains("clause = "), "{prompt}");
    let proposal = format!(
        "{PROPOSAL}\n[[acceptance]]\nid = \"cli\"\nclause = \"Make a greeter CLI\"\ncheck = \"test \\\"$(python3 hello.py)\\\" = 'x\"\n"
    );
    let r = exec_done(&r, "contract-snap").record;
    // (pre-run evidence of the derived check, refused?)
    let cases = [
        (
            CheckVerdict::Fail,
            Some(2),
            "sh: 1: Syntax error: Unterminated quoted string",
            true,
        ),
        (
            CheckVerdict::Fail,
            Some(2),
            "python3: can't open file 'hello.py'",
            false,
        ),
    ];
    for (verdict, exit, output, refused) in cases {
        let step = plan_audit_full(
            &r,
            Integrity::Clean,
            &[PROPOSAL_FILE],
            Some(&proposal),
            vec![
                ("prints", CheckVerdict::Fail, Some(1), ""),
                ("cli", verdict, exit, output),
            ],
        );
        let frozen = step.record.planning.stage.is_none();
        assert_eq!(frozen, !refused, "{output}");
        if refused {
            let last = step.record.feedback.last().unwrap();
            assert!(last.contains("cli: the shell cannot parse"), "{last}");
        } else {
            // The clause is covered by the proposer's derived criterion: nothing else is added.
            let c = &step.record.contract;
            assert_eq!(c.criteria.len(), 2, "{:?}", c.criteria);
            assert_eq!(
                c.criteria[1].source,
                loopgate_protocol::contract::CriterionSource::Goal
            );
        }
    }
}
