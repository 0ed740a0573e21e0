use super::*;

fn criterion(id: &str, clause: Option<&str>) -> Criterion {
    Criterion {
        id: id.into(),
        description: String::new(),
        check: Some("true".into()),
        blocking: true,
        timeout_secs: 5,
        source: CriterionSource::Task,
        clause: clause.map(str::to_string),
    }
}

const DEDUPE: &str = "Write dedupe.py that reads lines from stdin and prints them without \
    duplicates, keeping the order of first occurrence. Do not print empty lines.";

#[test]
fn uncovered_clauses_become_judged_criteria() {
    // (existing criteria, derived ids, derived clauses' first words)
    let cases: Vec<(Vec<Criterion>, Vec<&str>)> = vec![
        // The loose check covers nothing: both clauses are judged.
        (vec![criterion("two-lines", None)], vec!["goal-1", "goal-2"]),
        // A criterion quoting a clause (case and final stop aside) covers it.
        (
            vec![criterion("no-empty", Some("do not print EMPTY lines"))],
            vec!["goal-1"],
        ),
        // An id already taken is not reused.
        (vec![criterion("goal-1", None)], vec!["goal-1x", "goal-2"]),
    ];
    for (existing, want) in cases {
        let derived = derive_goal_criteria(DEDUPE, &existing, &[]);
        let ids: Vec<&str> = derived.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, want, "{existing:?}");
        for c in &derived {
            assert_eq!(c.source, CriterionSource::Goal);
            assert!(c.blocking && c.check.is_none());
            assert!(DEDUPE.contains(c.clause.as_deref().unwrap().trim_end_matches('.')));
        }
    }
    assert!(derive_goal_criteria("", &[], &[]).is_empty());
    let coverage = clause_coverage(
        DEDUPE,
        &[criterion("no-empty", Some("Do not print empty lines."))],
        &[],
    );
    assert_eq!(coverage.len(), 2);
    assert_eq!(coverage[0].cover, ClauseCover::Uncovered);
    assert_eq!(coverage[1].criterion(), Some("no-empty"));
}

/// The suite's own tasks, with a judge: what each clause becomes.
#[test]
fn suite_goals_derive_checks_where_their_words_decide() {
    use crate::task::parse_task_toml;
    // (task file, per clause: the covering criterion, `+check` for a derived one with a
    // check, `judged` for a derived one without, or the other covers)
    let cases: &[(&str, &[&str])] = &[
        (
            include_str!("../../../examples/suite/fix-failing-test/task.toml"),
            &["problem", "goal-2 +check", "protected"],
        ),
        (
            include_str!("../../../examples/suite/shell-count-errors/task.toml"),
            &["app-log", "goal-2 judged", "app-log"],
        ),
        (
            include_str!("../../../examples/suite/write-fizzbuzz/task.toml"),
            &["prints-fizzbuzz", "goal-2 judged"],
        ),
        (
            include_str!("../../../examples/suite/bugfix-wordcount/task.toml"),
            &["problem", "goal-2 judged"],
        ),
        (
            include_str!("../../../examples/loose/count-top-level/task.toml"),
            &["two-files", "goal-2 judged", "goal-3 judged"],
        ),
        (
            include_str!("../../../examples/loose/greet-exact/task.toml"),
            &["names-the-person", "goal-2 judged", "goal-3 judged"],
        ),
    ];
    for (text, want) in cases {
        let text = if text.contains("auditor = ") {
            text.to_string()
        } else {
            text.replace("[roles]\n", "[roles]\nauditor = 'judge'\n")
        };
        let task = parse_task_toml(&text).unwrap();
        let contract = contract_for(&task);
        let got = cover_labels(&contract);
        assert_eq!(got, *want, "{}", task.goal);
        assert!(contract.is_intact());
    }
}

/// What covers each clause of the contract's goal: the covering criterion, `+check` for a
/// derived one with a check, `judged` for a derived one without, or the other covers.
fn cover_labels(contract: &Contract) -> Vec<String> {
    clause_coverage(
        &contract.goal,
        &contract.criteria,
        &contract.protected_paths,
    )
    .iter()
    .map(|cover| match &cover.cover {
        ClauseCover::Criterion(id) => {
            let c = contract.criteria.iter().find(|c| &c.id == id).unwrap();
            match (c.source, &c.check) {
                (CriterionSource::Task, _) => id.clone(),
                (CriterionSource::Goal, Some(_)) => format!("{id} +check"),
                (CriterionSource::Goal, None) => format!("{id} judged"),
            }
        }
        ClauseCover::ProtectedPaths(_) => "protected".into(),
        ClauseCover::StatesProblem => "problem".into(),
        ClauseCover::Uncovered => "uncovered".into(),
    })
    .collect()
}

/// The goal's own command is the derived check, and a kept file is protected even when the
/// task did not protect it.
#[test]
fn a_goals_command_is_its_check_and_its_kept_file_protected() {
    use crate::task::parse_task_toml;
    let task = parse_task_toml(
        r#"goal = "The tests fail. Fix it so that `python3 -m unittest` passes. Do not change test_x.py."
[[acceptance]]
id = "a"
check = "true"
[roles]
auditor = "judge"
"#,
    )
    .unwrap();
    let contract = contract_for(&task);
    assert_eq!(contract.protected_paths, vec!["test_x.py".to_string()]);
    let derived: Vec<_> = contract
        .criteria
        .iter()
        .filter(|c| c.id.starts_with("goal-"))
        .collect();
    assert_eq!(derived.len(), 1);
    assert_eq!(derived[0].check.as_deref(), Some("python3 -m unittest"));
    assert!(is_mechanical(derived[0]));
    assert_eq!(judged_clauses(&contract.criteria).count(), 0);
    let shown = crate::contract_proposal::contract_to_toml(&contract);
    assert!(
        shown.contains("(states the problem the task fixes; not a criterion)"),
        "{shown}"
    );
    assert!(shown.contains("-> protected_paths (test_x.py)"), "{shown}");
    // Off, nothing is derived or protected.
    let off = parse_task_toml(
        r#"derive_criteria = false
goal = "Do not change test_x.py."
[[acceptance]]
id = "a"
check = "true"
[roles]
auditor = "judge"
"#,
    );
    let off = contract_for(&off.unwrap());
    assert!(off.protected_paths.is_empty() && off.criteria.len() == 1);
}

#[test]
fn the_frozen_contract_holds_the_clauses_unless_derivation_is_off() {
    use crate::contract_proposal::{contract_from_proposal, contract_to_toml};
    use crate::task::parse_task_toml;
    let task = |extra: &str| {
        parse_task_toml(&format!(
            "goal = \"{DEDUPE}\"\n{extra}\n[[acceptance]]\nid = \"two-lines\"\n\
             check = \"true\"\n[roles]\nauditor = \"judge\"\n"
        ))
        .unwrap()
    };
    // (task extra, criteria in the frozen contract)
    let cases = [
        ("", 3),
        ("derive_criteria = false", 1),
        ("derive_criteria = true", 3),
    ];
    for (extra, want) in cases {
        let contract = contract_for(&task(extra));
        assert_eq!(contract.criteria.len(), want, "{extra}");
        assert!(contract.is_intact());
    }
    // No judge, nothing to judge clauses with: the task's criteria only, as before.
    let no_judge = parse_task_toml(&format!(
        "goal = \"{DEDUPE}\"\n[[acceptance]]\nid = \"a\"\ncheck = \"true\""
    ))
    .unwrap();
    assert_eq!(contract_for(&no_judge).criteria.len(), 1);
    // Derivation changes the spec hash; the task's own contract hashes as it always did.
    let off = contract_for(&task("derive_criteria = false"));
    let on = contract_for(&task(""));
    assert_eq!(off, task("derive_criteria = false").contract());
    assert_ne!(off.spec_hash, on.spec_hash);
    // Shown and round-tripped by `loopgate contract RUN` / `approve --edit`.
    let text = contract_to_toml(&on);
    assert!(text.contains("source = \"goal\""), "{text}");
    assert!(text.contains("-> goal-1"), "{text}");
    assert!(
        text.contains("clause = \"Do not print empty lines.\""),
        "{text}"
    );
    let planned = parse_task_toml(&format!(
        "goal = \"{DEDUPE}\"\nplan = true\n[roles]\nauditor = \"judge\"\n"
    ))
    .unwrap();
    let again = contract_from_proposal(&text, &planned).unwrap();
    assert_eq!(again.criteria, on.criteria);
    // A person opts a clause out with blocking = false: it is not judged, not re-derived.
    let opted = text.replacen(
        "blocking = true\ntimeout_secs = 120\nsource",
        "blocking = false\ntimeout_secs = 120\nsource",
        1,
    );
    let opted = contract_from_proposal(&opted, &planned).unwrap();
    assert_eq!(opted.criteria.len(), 3);
    assert_eq!(judged_clauses(&opted.criteria).count(), 1);
}

#[test]
fn judged_clauses_need_a_judge() {
    use crate::task::parse_task_toml;
    let base = "goal = \"x\"\n[[acceptance]]\nid = \"a\"\ncheck = \"true\"\n\
                [[acceptance]]\nid = \"g\"\nsource = \"goal\"\n";
    let cases: &[(&str, Result<(), &str>)] = &[
        ("clause = \"x\"\n[roles]\nauditor = \"j\"", Ok(())),
        ("clause = \"x\"", Err("acceptance[1].check")),
        ("clause = \"x\"\nblocking = false", Ok(())),
        ("[roles]\nauditor = \"j\"", Err("acceptance[1].clause")),
    ];
    for (extra, want) in cases {
        let got = parse_task_toml(&format!("{base}{extra}")).map(|_| ());
        assert_eq!(
            got.map_err(|e| e.field_name().unwrap_or("?").to_string()),
            want.map_err(str::to_string),
            "{extra}"
        );
    }
}

#[test]
fn many_clauses_are_capped() {
    let goal: String = (0..30)
        .map(|i| format!("Rule number {i} holds. "))
        .collect();
    assert_eq!(derive_goal_criteria(&goal, &[], &[]).len(), MAX_DERIVED);
}

#[test]
fn clause_answers_parse() {
    use ClauseVerdict::*;
    let cases: &[(&str, Option<(ClauseVerdict, &str)>)] = &[
        ("met - the order is kept", Some((Met, "the order is kept"))),
        (
            "UNMET: the lines are sorted",
            Some((Unmet, "the lines are sorted")),
        ),
        ("**unmet** — sorted()", Some((Unmet, "sorted()"))),
        (
            "Answer: unknown - cannot tell",
            Some((Unknown, "cannot tell")),
        ),
        ("Let me look.\n- met", Some((Met, ""))),
        ("meticulous work", None),
        ("Status: complete", None),
        ("", None),
    ];
    for (text, want) in cases {
        let got = parse_clause_answer(text);
        assert_eq!(
            got.as_ref().map(|(v, r)| (*v, r.as_str())),
            *want,
            "{text:?}"
        );
    }
    let long = format!("unmet - {}", "x".repeat(1000));
    assert!(parse_clause_answer(&long).unwrap().1.chars().count() <= MAX_REASON_CHARS + 1);
    assert_eq!(Unknown.check_verdict(), CheckVerdict::Inconclusive);
    assert!(clause_excerpt("keep order", Unmet, "sorted").contains("\"keep order\" judged unmet"));
}

/// The issue's CSV sentence: a file, a header, one row per entry and an order, each its own
/// criterion; a criterion quoting the whole sentence still covers it whole, and one quoting a
/// part covers that part.
#[test]
fn a_sentence_nothing_covers_is_split_at_its_requirements() {
    const CSV: &str = "Write people.csv from people.txt with a header name,age and one row \
        per person, sorted by age.";
    let cases: Vec<(Vec<Criterion>, Vec<(&str, &str)>)> = vec![
        (
            vec![criterion("rows", None)],
            vec![
                ("goal-1a", "Write people.csv from people.txt"),
                ("goal-1b", "with a header name,age"),
                ("goal-1c", "one row per person"),
                ("goal-1d", "sorted by age"),
            ],
        ),
        (vec![criterion("whole", Some(CSV))], vec![]),
        (
            vec![criterion("order", Some("sorted by age"))],
            vec![
                ("goal-1a", "Write people.csv from people.txt"),
                ("goal-1b", "with a header name,age"),
                ("goal-1c", "one row per person"),
            ],
        ),
    ];
    for (existing, want) in cases {
        let derived = derive_goal_criteria(CSV, &existing, &[]);
        let got: Vec<(&str, &str)> = derived
            .iter()
            .map(|c| (c.id.as_str(), c.clause.as_deref().unwrap_or_default()))
            .collect();
        assert_eq!(got, want, "{existing:?}");
    }
    // The header and the order get value checks; the file and the rows per entry are judged
    // (the head names two files and more than one).
    let derived = derive_goal_criteria(CSV, &[], &[]);
    let checked: Vec<bool> = derived.iter().map(|c| c.check.is_some()).collect();
    assert_eq!(checked, vec![false, true, false, true], "{derived:#?}");
    assert!(derived.iter().all(|c| !is_mechanical(c)));
    let coverage = clause_coverage(CSV, &[], &[]);
    let labels: Vec<&str> = coverage.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(labels, vec!["1a", "1b", "1c", "1d"]);
    assert!(coverage.iter().all(|c| c.sentence == CSV));
}
