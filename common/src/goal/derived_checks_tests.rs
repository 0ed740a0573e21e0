#![allow(clippy::unwrap_used)]
use super::*;

fn criterion(id: &str, source: CriterionSource, check: Option<&str>) -> Criterion {
    Criterion {
        id: id.into(),
        description: String::new(),
        check: check.map(str::to_string),
        blocking: true,
        timeout_secs: 5,
        source,
        clause: Some(format!("the clause of {id}")),
    }
}

fn ev(id: &str, verdict: CheckVerdict, code: Option<i32>, out: &str) -> Evidence {
    Evidence {
        artifact_version: "s".into(),
        check_id: id.into(),
        verdict,
        produced_at: 0,
        log_digest: None,
        exit_code: code,
        duration_ms: 0,
        output_excerpt: out.into(),
        isolated: None,
        screenshots: Vec::new(),
    }
}

/// The shell's answer for each check text of the tests, as the auditor's `sh -n` and `PATH`
/// lookup would give it.
fn shell(check: &str) -> CheckText {
    if check.contains("'b\"") {
        CheckText::DoesNotParse("sh: 1: Syntax error: Unterminated quoted string\n".into())
    } else if first_command_name(check) == Some("jq") {
        CheckText::MissingCommand("jq".into())
    } else if check.starts_with("slow") {
        CheckText::Unknown("timed out".into())
    } else {
        CheckText::Sound
    }
}

#[test]
fn only_the_check_text_sets_a_derived_check_aside() {
    let criteria = vec![
        criterion("order", CriterionSource::Goal, Some("test \"$(x)\" = 'b\"")),
        criterion("json", CriterionSource::Goal, Some("jq . out.json")),
        criterion("runs", CriterionSource::Goal, Some("python3 dedupe.py")),
        criterion("slow", CriterionSource::Goal, Some("slow-parse")),
        criterion("judged", CriterionSource::Goal, None),
        // The author's own check decides as written, whatever its text.
        criterion("own", CriterionSource::Task, Some("test \"$(x)\" = 'b\"")),
    ];
    let aside = set_aside_checks(&criteria, shell);
    let got: Vec<(&str, &str)> = aside
        .iter()
        .map(|s| (s.criterion.id.as_str(), s.why.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "order",
                "the shell cannot parse the check (sh: 1: Syntax error: Unterminated quoted string)"
            ),
            (
                "json",
                "the check calls `jq`, which does not exist on the checks' PATH"
            ),
        ]
    );
    assert_eq!(aside[0].clause, "the clause of order");
}

/// The red-team case: a derived check that parses fails on a candidate that printed "syntax
/// error" and "not found". The decision takes no evidence at all, so nothing of that run reaches
/// it: the check is not set aside, and its failure stands (the gate stays closed).
#[test]
fn a_candidates_output_cannot_set_a_check_aside() {
    let criteria = vec![criterion(
        "order",
        CriterionSource::Goal,
        Some("test \"$(printf 'b\\na\\n' | python3 dedupe.py | head -1)\" = b"),
    )];
    assert!(set_aside_checks(&criteria, shell).is_empty());
    assert!(set_aside_checks(&criteria, |_| CheckText::Sound).is_empty());
}

#[test]
fn the_first_command_name_is_looked_up_only_when_plain() {
    let cases: &[(&str, Option<&str>)] = &[
        ("jq . out.json", Some("jq")),
        ("  python3 -m pytest -q", Some("python3")),
        ("pytest;echo", Some("pytest")),
        ("node-gyp|cat", Some("node-gyp")),
        ("g++ -o x x.cc", Some("g++")),
        ("./run.sh", None),
        ("/usr/bin/jq .", None),
        ("FOO=1 jq .", None),
        ("\"jq\" .", None),
        ("$JQ .", None),
        ("(cd x && jq .)", None),
        ("f() { :; }; f", None),
        ("test -f out.txt", None),
        ("cd tests && pytest", None),
        ("if true; then :; fi", None),
        ("-x", None),
        ("", None),
    ];
    for (check, want) in cases {
        assert_eq!(first_command_name(check), *want, "{check}");
    }
}

#[test]
fn derived_checks_broken_before_any_work_are_named() {
    let derived = criterion("goal-1", CriterionSource::Goal, Some("true"));
    let own = criterion("own", CriterionSource::Task, Some("true"));
    let broken = "sh: 1: Syntax error: Unterminated quoted string";
    let cases = [
        (ev("goal-1", CheckVerdict::Fail, Some(2), broken), 1),
        (ev("goal-1", CheckVerdict::Fail, Some(1), "not sorted"), 0),
        (ev("goal-1", CheckVerdict::Pass, Some(0), ""), 0),
        // The author's own checks are never second-guessed.
        (ev("own", CheckVerdict::Fail, Some(2), broken), 0),
    ];
    for (e, want) in cases {
        let got = broken_on_start(&[derived.clone(), own.clone()], std::slice::from_ref(&e));
        assert_eq!(got.len(), want, "{e:?}");
    }
}

#[test]
fn a_start_run_shows_the_checks_own_failures() {
    let cases: &[(Option<i32>, &str, bool)] = &[
        (
            Some(2),
            "sh: 1: Syntax error: Unterminated quoted string",
            true,
        ),
        (Some(2), "sh: 1: Syntax error: \"(\" unexpected", true),
        (
            Some(1),
            "bash: -c: line 1: syntax error near unexpected token `)'",
            true,
        ),
        (Some(127), "sh: 1: jq: not found", true),
        (Some(127), "bash: line 1: jq: command not found", true),
        // The work's failures, not the check's.
        (Some(127), "sh: 1: ./dedupe.sh: not found", false),
        (
            Some(2),
            "python3: can't open file '/w/dedupe.py': [Errno 2]",
            false,
        ),
        (Some(1), "AssertionError: b != a", false),
        (Some(1), "", false),
        (None, "timed out", false),
    ];
    for (code, output, broken) in cases {
        assert_eq!(
            broken_on_start_run(*code, output).is_some(),
            *broken,
            "{code:?} {output}"
        );
    }
}

#[test]
fn check_texts_say_why_they_are_broken() {
    assert_eq!(CheckText::Sound.broken(), None);
    assert_eq!(CheckText::Unknown("no sh".into()).broken(), None);
    assert!(CheckText::DoesNotParse(String::new())
        .broken()
        .unwrap()
        .contains("(no message)"));
}

#[test]
fn a_proposal_is_run_with_the_value_checks_its_contract_will_derive() {
    use loopgate_protocol::contract::{Contract, Criterion, CriterionSource};
    let goal_criterion = |id: &str, clause: &str| Criterion {
        id: id.into(),
        description: String::new(),
        check: None,
        blocking: true,
        timeout_secs: 5,
        source: CriterionSource::Goal,
        clause: Some(clause.into()),
    };
    let mut contract = Contract {
        goal: "Write people.csv from people.txt with a header name,age and one row per person, sorted by age.".into(),
        criteria: vec![goal_criterion(
            "goal-1a",
            "Write people.csv from people.txt",
        )],
        protected_paths: vec![],
        rubric: None,
        writable_paths: vec![],
        spec_hash: String::new(),
    };
    let ids = |proposed: &[Criterion], contract: &Contract| -> Vec<String> {
        proposal_value_checks(contract, proposed)
            .into_iter()
            .map(|c| c.id)
            .collect()
    };
    assert_eq!(ids(&[], &contract), vec!["goal-1b", "goal-1d"]);
    // A proposal that quotes the order covers it: its own check runs instead.
    let mut order = goal_criterion("order", "sorted by age");
    order.check = Some("true".into());
    assert_eq!(ids(&[order], &contract), vec!["goal-1b"]);
    // A run that derives nothing (derive_criteria = false) runs none.
    contract.criteria.clear();
    assert!(ids(&[], &contract).is_empty());
}
