//! The loop acts on what it knows: evidence reaches the executor, identical candidates are not
//! re-audited, stagnation escalates, and steps that alter the goal's words or repeat a failed
//! instruction go back to the manager.

use super::tests::{apply, evidence, exec_done, kinds, reply, report, started, TASK};
use super::*;
use crate::task::parse_task_toml;
use loopgate_protocol::verdict::Integrity;
use loopgate_protocol::wire::{AuditReport, ExecRequest, Message};

fn exec_request(step: &Step) -> &ExecRequest {
    step.outgoing()
        .iter()
        .find_map(|o| match &o.message {
            Message::ExecRequest(req) => Some(req),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no exec request in {:?}", kinds(step)))
}

/// An audit of the pending candidate whose only check fails with `output`.
fn failing_audit(record: &RunRecord, output: &str) -> Step {
    let mut rep: AuditReport = report(record, false, Integrity::Clean);
    rep.evidence[0].output_excerpt = output.into();
    apply(record, RunEvent::AuditFinished(rep))
}

#[test]
fn the_next_executor_sees_the_failing_check_output() {
    let r = started();
    let s = reply(&r, "Next: cli\nTask: write hello.py");
    // Round 1 has nothing audited yet.
    assert!(exec_request(&s).feedback.is_empty());
    let s = exec_done(&s.record, "c1");
    let s = failing_audit(&s.record, "python3: can't open file 'hello.py'");
    let s = reply(
        &s.record,
        "Next: cli\nTask: create hello.py in the workspace root",
    );
    let req = exec_request(&s);
    let fb = &req.feedback;
    assert_eq!(fb.audited_snapshot.as_deref(), Some("c1"));
    assert_eq!(fb.failing.len(), 1);
    assert_eq!(fb.failing[0].criterion, "prints");
    assert_eq!(fb.failing[0].exit_code, Some(1));
    assert_eq!(fb.failing[0].check.as_deref(), Some("python3 hello.py"));
    assert!(fb.failing[0].output_excerpt.contains("can't open file"));
    assert_eq!(fb.changed_paths, vec!["hello.py".to_string()]);
    assert!(!fb.gate_reasons.is_empty());
    // The step carries the goal's own words.
    assert_eq!(
        req.increment.goal_clauses,
        vec!["Create hello.py".to_string()]
    );
}

#[test]
fn an_identical_candidate_is_not_audited_again() {
    let r = started();
    let s = reply(&r, "Next: cli\nTask: write hello.py");
    let s = exec_done(&s.record, "c1");
    let s = failing_audit(&s.record, "wrong output");
    let s = reply(&s.record, "Next: cli\nTask: fix the output of hello.py");
    // The executor changed nothing: the candidate is the snapshot audited in round 1.
    let s = exec_done(&s.record, "c1");
    let kinds = kinds(&s);
    assert!(kinds.contains(&"audit_reused"), "{kinds:?}");
    assert!(!kinds.contains(&"audit_dispatched"), "{kinds:?}");
    assert!(
        s.outgoing()
            .iter()
            .all(|o| !matches!(o.message, Message::AuditRequest(_))),
        "no audit request"
    );
    // The round counts, its evidence is round 1's, and the manager is asked again.
    assert_eq!(s.record.round, 2);
    assert!(matches!(s.record.phase, Phase::Deciding { .. }));
    let last = s.record.history.last().unwrap();
    assert_eq!(last.reused_from, Some(1));
    assert_eq!(last.failing[0].1, "wrong output");
    let ledger = ledger_lines(&s.record);
    assert!(ledger[1].contains("changed nothing"), "{ledger:?}");
    assert!(
        ledger[1].contains("the same failure as round 1"),
        "{ledger:?}"
    );
}

#[test]
fn rounds_without_progress_escalate() {
    let text = TASK.replace(
        "[budget]",
        "[roles]\nexecutor = [\"cheap\", \"strong\"]\n[budget]\nstagnation_rounds = 2\nescalate_after = 100",
    );
    let mut task = parse_task_toml(&text).unwrap();
    task.budget.max_rounds = 10;
    task.budget.max_failed_rounds = 100;
    let mut r = start_run("r1", task, "base", 0).record;
    let mut stagnated = Vec::new();
    for i in 1..=3 {
        let s = reply(&r, &format!("Next: cli\nTask: attempt {i}"));
        let s = exec_done(&s.record, &format!("c{i}"));
        // Every round fails the same way: no new output, nothing newly passing.
        let s = failing_audit(&s.record, "same failure");
        if kinds(&s).contains(&"stagnation") {
            stagnated.push(i);
        }
        r = s.record;
    }
    // Round 1's failure is new; rounds 2 and 3 repeat it: the second of them escalates.
    assert_eq!(stagnated, vec![3]);
    assert_eq!(r.executor_profile(), "strong");
    assert!(
        r.feedback
            .iter()
            .any(|f| f.contains("your approach did not work")),
        "{:?}",
        r.feedback
    );
    // The next episode starts from the ledger.
    let s = reply(&r, "Next: cli\nTask: attempt 4");
    let req = exec_request(&s);
    assert_eq!(req.executor_profile, "strong");
    assert_eq!(
        req.feedback.attempts.len(),
        3,
        "{:?}",
        req.feedback.attempts
    );
    // A round that moves resets the count.
    let s = exec_done(&s.record, "c4");
    let s = failing_audit(&s.record, "a new failure");
    assert_eq!(s.record.streaks.stagnant_rounds, 0);
}

#[test]
fn a_step_that_renames_the_goals_file_is_sent_back() {
    let r = started();
    let s = reply(&r, "Next: cli\nTask: create print-hello.py");
    assert_eq!(kinds(&s), vec!["decision", "step_sent_back"]);
    assert!(matches!(s.record.phase, Phase::Deciding { seq: 2 }));
    assert_eq!(s.record.round, 0, "no executor ran");
    let why = s.record.feedback.last().unwrap();
    assert!(
        why.contains("hello.py") && why.contains("print-hello.py"),
        "{why}"
    );
    // Bounded like invalid replies: after max_invalid_outputs (2) an executor runs, on the
    // goal's own words, never the renamed file.
    let s = reply(&s.record, "Next: cli\nTask: create print-hello.py");
    assert!(kinds(&s).contains(&"step_sent_back"));
    let s = reply(&s.record, "Next: cli\nTask: create print-hello.py");
    assert!(kinds(&s).contains(&"step_replaced"), "{:?}", kinds(&s));
    let increment = exec_request(&s).increment.clone();
    let goal = s.record.contract.goal.clone();
    assert_eq!(increment.objective, increment.goal_clauses.join(" "));
    assert!(
        goal.contains(increment.objective.as_str()),
        "{goal} / {increment:?}"
    );
    assert!(
        !increment.objective.contains("print-hello.py"),
        "{increment:?}"
    );
    assert!(
        !increment.instructions.contains("print-hello.py"),
        "{increment:?}"
    );
    assert_eq!(s.record.streaks.steps_sent_back, 0);
    // A faithful step goes through at once.
    let s = reply(&started(), "Next: cli\nTask: create hello.py");
    assert!(kinds(&s).contains(&"exec_dispatched"));
}

#[test]
fn a_verbatim_repeat_of_a_failed_step_is_sent_back_once() {
    let r = started();
    let s = reply(&r, "Next: cli\nTask: write hello.py");
    let s = exec_done(&s.record, "c1");
    let s = failing_audit(&s.record, "SyntaxError");
    let s = reply(&s.record, "Next: cli\nTask: Write  hello.py");
    assert!(kinds(&s).contains(&"step_sent_back"), "{:?}", kinds(&s));
    let why = s.record.feedback.last().unwrap();
    assert!(
        why.contains("word for word") && why.contains("SyntaxError"),
        "{why}"
    );
    assert!(
        why.contains("Round 1: step"),
        "the ledger comes with it: {why}"
    );
    // Asked once more: the same step now goes through.
    let s = reply(&s.record, "Next: cli\nTask: write hello.py");
    assert!(kinds(&s).contains(&"exec_dispatched"), "{:?}", kinds(&s));
}

/// The fixture's task with failed steps tried again (`step_retries`, 0 in the fixture).
fn retrying(retries: u32) -> RunRecord {
    let text = TASK.replace(
        "step_retries = 0",
        &format!("step_retries = {retries}\nmax_rounds = 6"),
    );
    let text = text.replacen("max_rounds = 3\n", "", 1);
    start_run("r1", parse_task_toml(&text).unwrap(), "base", 0).record
}

#[test]
fn a_failed_step_goes_back_to_an_executor_with_its_evidence_and_no_decision() {
    let r = retrying(1);
    let s = reply(&r, "Next: cli\nTask: write hello.py");
    let s = exec_done(&s.record, "c1");
    let decisions = s.record.decide_seq;
    let s = failing_audit(&s.record, "NameError: name 'x' is not defined");
    // No decision was asked: round 2 runs round 1's step, with round 1's failing check.
    assert_eq!(
        kinds(&s),
        vec!["audit_report", "gate", "step_retried", "exec_dispatched"]
    );
    assert_eq!(s.record.decide_seq, decisions);
    assert!(matches!(s.record.phase, Phase::Executing { round: 2, .. }));
    let req = exec_request(&s);
    assert_eq!(req.increment.objective, "write hello.py");
    assert_eq!(
        req.increment.goal_clauses,
        vec!["Create hello.py".to_string()]
    );
    assert_eq!(req.feedback.audited_snapshot.as_deref(), Some("c1"));
    assert!(req.feedback.failing[0].output_excerpt.contains("NameError"));
    assert_eq!(s.record.streaks.step_retries, 1);

    // The retry fails too: now the manager decides, and sees the retry in its ledger.
    let s = exec_done(&s.record, "c2");
    assert!(s.record.history.last().unwrap().retried);
    let s = failing_audit(&s.record, "NameError: name 'y' is not defined");
    assert!(
        matches!(s.record.phase, Phase::Deciding { .. }),
        "{:?}",
        kinds(&s)
    );
    let ledger = ledger_lines(&s.record);
    assert!(ledger[1].contains("tried again"), "{ledger:?}");
    // A manager repeating the step that just failed twice is still sent back once.
    let s = reply(&s.record, "Next: cli\nTask: write hello.py");
    assert!(kinds(&s).contains(&"step_sent_back"), "{:?}", kinds(&s));
    // A step the manager chose resets the retries in a row.
    let s = reply(&s.record, "Next: cli\nTask: define x in hello.py");
    assert_eq!(s.record.streaks.step_retries, 0);
    let s = exec_done(&s.record, "c3");
    let s = failing_audit(&s.record, "NameError: name 'z' is not defined");
    assert!(kinds(&s).contains(&"step_retried"), "{:?}", kinds(&s));
    assert_eq!(exec_request(&s).increment.objective, "define x in hello.py");
}

#[test]
fn a_retried_step_that_passes_completes_the_run() {
    let s = reply(&retrying(1), "Next: cli\nTask: write hello.py");
    let s = exec_done(&s.record, "c1");
    let s = failing_audit(&s.record, "wrong output");
    let s = exec_done(&s.record, "c2");
    let rep = report(&s.record, true, Integrity::Clean);
    let s = apply(&s.record, RunEvent::AuditFinished(rep));
    assert_eq!(s.record.state, RunState::Completed, "{:?}", kinds(&s));
    assert_eq!(s.record.round, 2);
    assert_eq!(s.record.decide_seq, 1, "one decision in all");
}

#[test]
fn a_round_that_changed_nothing_is_not_retried() {
    let s = reply(&retrying(3), "Next: cli\nTask: write hello.py");
    // The executor froze the snapshot it started from.
    let s = exec_done(&s.record, "base");
    let s = failing_audit(&s.record, "python3: can't open file 'hello.py'");
    assert!(!kinds(&s).contains(&"step_retried"), "{:?}", kinds(&s));
    assert!(matches!(s.record.phase, Phase::Deciding { .. }));
}

/// An audit of the pending candidate with one evidence record per `(criterion, passes)`.
fn audit_with(record: &RunRecord, results: &[(&str, bool)]) -> Step {
    let mut rep: AuditReport = report(record, false, Integrity::Clean);
    let candidate = rep.snapshot.clone();
    rep.evidence = results
        .iter()
        .map(|(id, pass)| loopgate_protocol::verdict::Evidence {
            output_excerpt: format!("{id}: {}", if *pass { "ok" } else { "wrong" }),
            ..evidence(&candidate, id, *pass)
        })
        .collect();
    apply(record, RunEvent::AuditFinished(rep))
}

fn two_checks(budget: &str) -> RunRecord {
    let text = format!(
        "goal = \"Create hello.py\"\n[[acceptance]]\nid = \"prints\"\ncheck = \"python3 \
         hello.py\"\n[[acceptance]]\nid = \"exits\"\ncheck = \"python3 hello.py; test $? = 0\"\n\
         [budget]\nmax_rounds = 6\nclause_steps = false\nbaseline_checks = false\n{budget}"
    );
    start_run("r1", parse_task_toml(&text).unwrap(), "base", 0).record
}

#[test]
fn a_candidate_that_loses_ground_is_set_aside_and_the_next_step_starts_from_the_better_one() {
    let s = reply(&two_checks(""), "Next: cli\nTask: write hello.py");
    let s = exec_done(&s.record, "c1");
    let s = audit_with(&s.record, &[("prints", true), ("exits", false)]);
    assert_eq!(s.record.snapshot, "c1");
    // The retry breaks what passed and fixes nothing: set aside, the artifact stays at c1.
    let s = exec_done(&s.record, "c2");
    let stagnant = s.record.streaks.stagnant_rounds;
    let s = audit_with(&s.record, &[("prints", false), ("exits", false)]);
    assert!(kinds(&s).contains(&"candidate_rejected"), "{:?}", kinds(&s));
    assert_eq!(s.record.snapshot, "c1");
    assert_eq!(s.record.streaks.stagnant_rounds, stagnant + 1);
    // The audit's log entry counts what passed on the candidate itself, the gate's on c1.
    let counts: Vec<(u32, u32)> = s
        .log
        .iter()
        .filter_map(|e| match &e.event {
            LogEvent::AuditReport {
                passing, checked, ..
            } => Some((*passing, *checked)),
            _ => None,
        })
        .collect();
    assert_eq!(counts, vec![(0, 2)]);
    assert_eq!(s.record.checks_passing(), (1, 2));
    let last = s.record.history.last().unwrap();
    assert!(
        last.set_aside
            .as_deref()
            .is_some_and(|w| w.contains("broke `prints`")),
        "{last:?}"
    );
    let ledger = ledger_lines(&s.record);
    assert!(ledger[1].contains("set aside"), "{ledger:?}");
    assert!(
        s.record.feedback.iter().any(|f| f.contains("set aside")),
        "{:?}",
        s.record.feedback
    );
    // The manager's next step starts from c1, and its executor sees what fails on c1.
    let s = reply(&s.record, "Next: cli\nTask: make hello.py exit 0");
    let req = exec_request(&s);
    assert_eq!(req.base_snapshot, "c1");
    let failing: Vec<&str> = req
        .feedback
        .failing
        .iter()
        .map(|f| f.criterion.as_str())
        .collect();
    assert_eq!(failing, vec!["exits"]);
    let rejected = req.feedback.rejected.as_deref().unwrap_or_default();
    assert!(rejected.contains("set aside"), "{rejected}");
}

#[test]
fn a_regression_is_kept_when_the_task_turns_the_rollback_off() {
    let s = reply(
        &two_checks("rollback_regressions = false\nstep_retries = 0"),
        "Next: cli\nTask: write hello.py",
    );
    let s = exec_done(&s.record, "c1");
    let s = audit_with(&s.record, &[("prints", true), ("exits", false)]);
    let s = reply(&s.record, "Next: cli\nTask: make hello.py exit 0");
    let s = exec_done(&s.record, "c2");
    let s = audit_with(&s.record, &[("prints", false), ("exits", false)]);
    assert!(
        !kinds(&s).contains(&"candidate_rejected"),
        "{:?}",
        kinds(&s)
    );
    assert_eq!(s.record.snapshot, "c2");
}

#[test]
fn a_regression_after_a_passing_gate_leaves_the_gate_open_for_done() {
    // Without completing on the gate, the manager asks for more work after a passing audit.
    let text = "complete_on_gate = false\n".to_string()
        + &TASK.replace("step_retries = 0", "step_retries = 0\nmax_rounds = 6");
    let text = text.replacen("max_rounds = 3\n", "", 1);
    let r = start_run("r1", parse_task_toml(&text).unwrap(), "base", 0).record;
    let s = reply(&r, "Next: cli\nTask: write hello.py");
    let s = exec_done(&s.record, "c1");
    let rep = report(&s.record, true, Integrity::Clean);
    let s = apply(&s.record, RunEvent::AuditFinished(rep));
    assert!(
        matches!(s.record.phase, Phase::Deciding { .. }),
        "{:?}",
        kinds(&s)
    );
    let s = reply(&s.record, "Next: cli\nTask: tidy hello.py");
    let s = exec_done(&s.record, "c2");
    let s = failing_audit(&s.record, "SyntaxError");
    assert!(kinds(&s).contains(&"candidate_rejected"), "{:?}", kinds(&s));
    assert_eq!(s.record.snapshot, "c1");
    assert!(s.record.audit.last_gate.as_ref().is_some_and(|g| g.passed));
    // `done` is judged on c1, whose audit passed: the final audit runs.
    let s = reply(&s.record, "Next: done\nTask: finished");
    assert!(kinds(&s).contains(&"audit_dispatched"), "{:?}", kinds(&s));
}
