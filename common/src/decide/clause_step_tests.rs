//! The clause policy (`budget.clause_steps`) and a run without a manager (`budget.manager =
//! false`) through the state machine.

use super::tests::{apply, evidence, exec_done, kinds, reply, report};
use super::*;
use crate::state::Target;
use crate::task::parse_task_toml;
use loopgate_protocol::subjects::Capability;
use loopgate_protocol::verdict::Integrity;
use loopgate_protocol::wire::{Increment, Message};

/// Two clauses, a check for each; `extra` goes under `[budget]`, `more` after the criteria.
fn task(budget: &str, more: &str) -> Task {
    let toml = format!(
        "goal = \"Create a.py. Create b.py.\"\n[[acceptance]]\nid = \"a\"\ncheck = \"python3 \
         a.py\"\n[[acceptance]]\nid = \"b\"\ncheck = \"python3 b.py\"\n{more}\n[budget]\nbaseline_checks = false\n\
         max_rounds = 10\nmax_failed_rounds = 20\n{budget}"
    );
    parse_task_toml(&toml).unwrap()
}

/// The objective of the exec request `step` sends.
fn objective(step: &Step) -> String {
    step.outgoing()
        .iter()
        .find_map(|o| match &o.message {
            Message::ExecRequest(r) => Some(r.increment.objective.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no exec request: {:?}", kinds(step)))
}

/// The criteria the exec request `step` sends targets (its self-check's checks).
fn targets(step: &Step) -> Vec<String> {
    increment(step).acceptance_checks
}

/// The increment of the exec request `step` sends.
fn increment(step: &Step) -> Increment {
    step.outgoing()
        .iter()
        .find_map(|o| match &o.message {
            Message::ExecRequest(r) => Some(r.increment.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no exec request: {:?}", kinds(step)))
}

/// Finish the round in flight with these checks passing (`a`, `b`, `c` as present).
fn round(record: &RunRecord, candidate: &str, passing: &[&str]) -> Step {
    let s = exec_done(record, candidate);
    let all = record.contract.criteria.len() == passing.len();
    let mut report = report(&s.record, all, Integrity::Clean);
    report.evidence = record
        .contract
        .criteria
        .iter()
        .map(|c| evidence(candidate, &c.id, passing.contains(&c.id.as_str())))
        .collect();
    apply(&s.record, RunEvent::AuditFinished(report))
}

fn deciding(step: &Step) -> bool {
    matches!(step.record.phase, Phase::Deciding { .. })
}

#[test]
fn each_clause_goes_out_in_turn_without_a_manager_decision() {
    let s = start_run("r", task("", ""), "base", 0);
    assert_eq!(
        kinds(&s),
        vec!["submitted", "exec_dispatched", "clause_step"]
    );
    assert_eq!(s.log[2].round, 1);
    assert_eq!(s.record.state, RunState::Running);
    assert!(
        objective(&s).starts_with("Create a.py.\n"),
        "{}",
        objective(&s)
    );
    assert!(objective(&s).contains("`python3 a.py`"));
    let s = round(&s.record, "c1", &["a"]);
    assert!(
        kinds(&s).ends_with(&["exec_dispatched", "clause_step"]),
        "{:?}",
        kinds(&s)
    );
    let step = objective(&s);
    assert!(step.starts_with("Create b.py.\n"), "{step}");
    assert!(step.contains("\"Create a.py.\""), "{step}");
    let s = round(&s.record, "c2", &["a", "b"]);
    assert_eq!(s.record.state, RunState::Completed);
}

#[test]
fn a_clause_failing_twice_is_set_aside_for_the_next_and_then_the_manager_decides() {
    // (budget, the kinds that send the second try)
    let cases = [
        ("step_retries = 0", "clause_step"),
        ("step_retries = 1", "step_retried"),
    ];
    for (budget, second) in cases {
        let s = start_run("r", task(budget, ""), "base", 0);
        let s = round(&s.record, "c1", &[]);
        assert!(kinds(&s).contains(&second), "{budget}: {:?}", kinds(&s));
        assert_eq!(s.record.streaks.clause_tries.map(|t| t.tries), Some(2));
        // Clause a had its tries: clause b is the step, a is set aside.
        let s = round(&s.record, "c2", &[]);
        assert!(!deciding(&s), "{budget}: {:?}", kinds(&s));
        assert!(
            objective(&s).starts_with("Create b.py."),
            "{}",
            objective(&s)
        );
        assert_eq!(s.record.streaks.clauses_set_aside, vec![0]);
        let headline = s.log.last().map(|e| e.event.headline()).unwrap_or_default();
        assert!(headline.contains("clause 1 set aside"), "{headline}");
        // b passes; a is still set aside, so nothing is left for the policy: the manager.
        let s = round(&s.record, "c3", &["b"]);
        assert!(deciding(&s), "{budget}: {:?}", kinds(&s));
        // The manager's step fails with clause a still failing: it stays the manager's (tried
        // again as a step retry, where one is allowed).
        let mut s = reply(&s.record, "Next: cli\nTask: fix a.py");
        while !deciding(&s) {
            s = round(&s.record, &format!("c4-{}", s.record.round), &["b"]);
            assert!(
                !kinds(&s).contains(&"clause_step"),
                "{budget}: {:?}",
                kinds(&s)
            );
        }
        let s = reply(&s.record, "Next: cli\nTask: fix a.py again");
        let s = round(&s.record, "c5", &["a", "b"]);
        assert_eq!(s.record.state, RunState::Completed, "{budget}");
    }
}

#[test]
fn a_clause_passing_on_its_last_try_is_not_set_aside() {
    // As in the bughunt-shop run of 2026-12-06: clause 2 passed on its second try, and the
    // next clause's step said "clause 2 set aside, still failing after its tries".
    let s = start_run("r", task("step_retries = 0", ""), "base", 0);
    let s = round(&s.record, "c1", &[]);
    assert_eq!(s.record.streaks.clause_tries.map(|t| t.tries), Some(2));
    let s = round(&s.record, "c2", &["a"]);
    assert!(
        objective(&s).starts_with("Create b.py."),
        "{}",
        objective(&s)
    );
    assert!(s.record.streaks.clauses_set_aside.is_empty());
    let headline = s.log.last().map(|e| e.event.headline()).unwrap_or_default();
    assert!(!headline.contains("set aside"), "{headline}");
}

#[test]
fn both_clauses_failing_their_tries_go_to_the_manager() {
    // (Identical failures would escalate as stagnation after three rounds: not this test's.)
    let s = start_run(
        "r",
        task("step_retries = 0\nstagnation_rounds = 10", ""),
        "base",
        0,
    );
    let mut s = round(&s.record, "c1", &[]);
    for n in 2..=4 {
        assert!(!deciding(&s), "round {n}: {:?}", kinds(&s));
        s = round(&s.record, &format!("c{n}"), &[]);
    }
    assert!(deciding(&s), "{:?}", kinds(&s));
    assert_eq!(s.record.streaks.clauses_set_aside, vec![0]);
}

#[test]
fn every_clause_passing_with_the_gate_closed_asks_the_manager() {
    let more = "[[acceptance]]\nid = \"c\"\ncheck = \"python3 -m pyflakes .\"";
    let s = start_run("r", task("", more), "base", 0);
    let s = round(&s.record, "c1", &["a", "b"]);
    assert!(deciding(&s), "{:?}", kinds(&s));
}

#[test]
fn a_clause_step_whose_clause_passed_is_not_retried() {
    let s = start_run("r", task("step_retries = 3", ""), "base", 0);
    let s = round(&s.record, "c1", &["a"]);
    assert!(!kinds(&s).contains(&"step_retried"), "{:?}", kinds(&s));
    assert!(objective(&s).starts_with("Create b.py."));
}

/// The capability of the exec request `step` sends.
fn capability(step: &Step) -> Capability {
    step.outgoing()
        .iter()
        .find_map(|o| match &o.message {
            Message::ExecRequest(r) => Some(r.capability),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no exec request: {:?}", kinds(step)))
}

/// A `[gui]` task's first step is the manager's (whether the work needs the browser, and
/// whether the deployment offers it, is its call); the clause steps after it take its route.
#[test]
fn a_gui_tasks_clause_steps_take_the_route_the_manager_chose() {
    let gui = "[gui]\nserve = \"python3 -m http.server 8765\"\nurl = \"http://127.0.0.1:8765\"";
    for route in [Capability::Gui, Capability::Cli] {
        let s = start_run("r", task("", gui), "base", 0);
        assert_eq!(kinds(&s), vec!["submitted"], "{route:?}");
        assert_eq!(s.outgoing()[0].target, Target::Decide);
        let s = reply(
            &s.record,
            &format!("Next: {}\nTask: write a.py", route.as_str()),
        );
        assert_eq!(capability(&s), route);
        let s = round(&s.record, "c1", &["a"]);
        assert_eq!(kinds(&s).last(), Some(&"clause_step"), "{:?}", kinds(&s));
        assert!(objective(&s).starts_with("Create b.py."));
        assert_eq!(
            capability(&s),
            route,
            "the clause step keeps the manager's route"
        );
        let carried = s
            .outgoing()
            .iter()
            .any(|o| matches!(&o.message, Message::ExecRequest(r) if r.gui.is_some()));
        assert!(carried, "the step carries the task's [gui]");
    }
}

#[test]
fn turned_off_the_manager_decides_every_step() {
    let s = start_run(
        "r",
        task("clause_steps = false\nstep_retries = 0", ""),
        "base",
        0,
    );
    assert_eq!(kinds(&s), vec!["submitted"]);
    assert_eq!(s.outgoing()[0].target, Target::Decide);
    let s = reply(&s.record, "Next: cli\nTask: write a.py");
    let s = round(&s.record, "c1", &["a"]);
    assert!(deciding(&s), "{:?}", kinds(&s));
}

#[test]
fn an_instruction_during_a_clause_step_goes_to_the_manager() {
    let s = start_run("r", task("", ""), "base", 0);
    let s = apply(
        &s.record,
        RunEvent::Instruct {
            text: "use argparse".into(),
        },
    );
    let s = round(&s.record, "c1", &["a"]);
    assert!(deciding(&s), "{:?}", kinds(&s));
}

#[test]
fn without_a_manager_every_step_is_the_goal_and_the_gate_ends_the_run() {
    let s = start_run(
        "r",
        task("manager = false\nstep_retries = 0", ""),
        "base",
        0,
    );
    assert_eq!(kinds(&s), vec!["submitted", "exec_dispatched"]);
    assert_eq!(objective(&s), "Create a.py. Create b.py.");
    let s = round(&s.record, "c1", &["a"]);
    assert_eq!(objective(&s), "Create a.py. Create b.py.");
    assert!(!s.outgoing().iter().any(|o| o.target == Target::Decide));
    let s = round(&s.record, "c2", &["a", "b"]);
    assert_eq!(s.record.state, RunState::Completed);
}

#[test]
fn without_a_manager_a_passing_gate_gets_its_final_audit_and_the_rounds_run_out() {
    let mut t = task("manager = false\nstep_retries = 0", "");
    t.budget.max_rounds = 1;
    t.complete_on_gate = false;
    let s = start_run("r", t.clone(), "base", 0);
    let s = round(&s.record, "c1", &["a", "b"]);
    assert!(
        matches!(s.outgoing()[0].message, Message::AuditRequest(ref a) if a.purpose == loopgate_protocol::wire::AuditPurpose::Final),
        "{:?}",
        kinds(&s)
    );
    let s = start_run("r", t, "base", 0);
    let s = round(&s.record, "c1", &["a"]);
    assert_eq!(s.record.state, RunState::BudgetExhausted, "{:?}", kinds(&s));
}

#[test]
fn a_goal_of_one_unchecked_clause_is_the_first_step_and_is_retried_like_any_step() {
    let toml = "goal = \"Make the tests pass.\"\n[[acceptance]]\nid = \"a\"\ncheck = \
                \"python3 -m unittest\"\n[budget]\nmax_rounds = 6\nbaseline_checks = false\n";
    let s = start_run("r", parse_task_toml(toml).unwrap(), "base", 0);
    assert_eq!(
        kinds(&s),
        vec!["submitted", "exec_dispatched", "clause_step"]
    );
    assert_eq!(objective(&s), "Make the tests pass.");
    let s = round(&s.record, "c1", &[]);
    assert!(kinds(&s).contains(&"step_retried"), "{:?}", kinds(&s));
    let s = round(&s.record, "c2", &[]);
    assert!(deciding(&s), "{:?}", kinds(&s));
}

#[test]
fn a_resumed_run_gives_its_set_aside_clauses_fresh_tries() {
    let s = start_run(
        "r",
        task("step_retries = 0\nstagnation_rounds = 10", ""),
        "base",
        0,
    );
    let s = round(&s.record, "c1", &[]);
    let s = round(&s.record, "c2", &[]);
    assert_eq!(s.record.streaks.clauses_set_aside, vec![0]);
    let s = apply(
        &s.record,
        RunEvent::Cancel {
            reason: "stop".into(),
        },
    );
    assert!(s.record.state.is_terminal(), "{:?}", kinds(&s));
    let budget = s.record.task.budget.clone();
    let s = apply(&s.record, RunEvent::Resume { budget });
    assert!(
        s.record.streaks.clauses_set_aside.is_empty(),
        "{:?}",
        kinds(&s)
    );
}

#[test]
fn a_clause_step_targets_its_clause_and_the_earlier_clauses_that_pass() {
    // Three clauses: a step's episode checks itself against its own clause and the ground
    // already won, never against the clauses still to come.
    let toml = "goal = \"Create a.py. Create b.py. Create c.py.\"\n[[acceptance]]\nid = \"a\"\n\
                check = \"python3 a.py\"\n[[acceptance]]\nid = \"b\"\ncheck = \"python3 b.py\"\n\
                [[acceptance]]\nid = \"c\"\ncheck = \"python3 c.py\"\n[budget]\nmax_rounds = 10\n\
                max_failed_rounds = 20\nstep_retries = 1\nstagnation_rounds = 0\nbaseline_checks = false\n";
    let s = start_run("r", parse_task_toml(toml).unwrap(), "base", 0);
    assert_eq!(targets(&s), vec!["a"]);
    // It serves its own clause only (not every clause sharing two words with its step).
    assert_eq!(increment(&s).goal_clauses, vec!["Create a.py."]);
    // a passes: b is the step, keeping a.
    let s = round(&s.record, "c1", &["a"]);
    assert_eq!(targets(&s), vec!["a", "b"]);
    // b fails: its step retry targets the same.
    let s = round(&s.record, "c2", &["a"]);
    assert!(kinds(&s).contains(&"step_retried"), "{:?}", kinds(&s));
    assert_eq!(targets(&s), vec!["a", "b"]);
    // b had its tries: set aside, c is the step and keeps a, not the failing b.
    let s = round(&s.record, "c3", &["a"]);
    assert!(
        objective(&s).starts_with("Create c.py."),
        "{}",
        objective(&s)
    );
    assert_eq!(targets(&s), vec!["a", "c"]);
    assert_eq!(increment(&s).goal_clauses, vec!["Create c.py."]);
    // Everything passes but b: the manager's step targets every criterion.
    let s = round(&s.record, "c4", &["a", "c"]);
    assert!(deciding(&s), "{:?}", kinds(&s));
    let s = reply(&s.record, "Next: cli\nTask: fix b.py");
    assert_eq!(targets(&s), vec!["a", "b", "c"]);
}

#[test]
fn with_goal_first_the_goal_is_the_first_step_and_the_clauses_failing_after_it_follow() {
    let s = start_run("r", task("goal_first = true", ""), "base", 0);
    assert_eq!(kinds(&s), vec!["submitted", "exec_dispatched", "goal_step"]);
    assert_eq!(s.log[2].round, 1);
    assert_eq!(s.record.state, RunState::Running);
    assert_eq!(objective(&s), "Create a.py. Create b.py.");
    assert_eq!(targets(&s), vec!["a".to_string(), "b".to_string()]);
    // The goal step is no clause's try.
    assert_eq!(s.record.streaks.clause_tries, None);
    // a passes, b fails: b is the next step, its first try, not a retry of the goal.
    let s = round(&s.record, "c1", &["a"]);
    assert!(
        kinds(&s).ends_with(&["exec_dispatched", "clause_step"]),
        "{:?}",
        kinds(&s)
    );
    assert!(
        objective(&s).starts_with("Create b.py.\n"),
        "{}",
        objective(&s)
    );
    assert_eq!(
        s.record.streaks.clause_tries.map(|t| (t.clause, t.tries)),
        Some((1, 1))
    );
    let s = round(&s.record, "c2", &["a", "b"]);
    assert_eq!(s.record.state, RunState::Completed);
}

#[test]
fn goal_first_gives_way_where_the_clause_policy_would() {
    // (budget, whether the manager decides the first step, else the objective's start)
    let cases = [
        ("goal_first = false", false, "Create a.py.\n"),
        ("goal_first = true\nclause_steps = false", true, ""),
        (
            "goal_first = true\nmanager = false",
            false,
            "Create a.py. Create b.py.",
        ),
    ];
    for (budget, decides, starts) in cases {
        let s = start_run("r", task(budget, ""), "base", 0);
        assert!(
            !kinds(&s).contains(&"goal_step"),
            "{budget}: {:?}",
            kinds(&s)
        );
        assert_eq!(deciding(&s), decides, "{budget}: {:?}", kinds(&s));
        if !decides {
            assert!(
                objective(&s).starts_with(starts),
                "{budget}: {}",
                objective(&s)
            );
        }
    }
    // One clause that asks for something: the goal was the first step already.
    let toml = "goal = \"Create a.py.\"\n[[acceptance]]\nid = \"a\"\ncheck = \"python3 a.py\"\n\
                [budget]\nbaseline_checks = false\ngoal_first = true";
    let s = start_run("r", parse_task_toml(toml).unwrap(), "base", 0);
    assert_eq!(
        kinds(&s),
        vec!["submitted", "exec_dispatched", "clause_step"]
    );
}
