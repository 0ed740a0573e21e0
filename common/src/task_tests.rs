//! Task file parsing and validation.
use super::*;

const HELLO: &str = r#"
goal = "Create hello.py that prints exactly: hello, loopgate"
[[acceptance]]
id = "prints-greeting"
description = "python3 hello.py prints the greeting"
check = "test \"$(python3 hello.py)\" = 'hello, loopgate'"
blocking = true
[roles]
manager = "local"
executor = "local"
auditor = "local"
[budget]
max_rounds = 8
"#;

#[test]
fn hello_task_parses() {
    let task = parse_task_toml(HELLO).unwrap();
    assert_eq!(task.acceptance.len(), 1);
    assert_eq!(task.budget.max_rounds, 8);
    assert_eq!(task.roles.auditor.as_deref(), Some("local"));
    assert!(task.complete_on_gate);
}

#[test]
fn bad_task_files_name_the_field() {
    let cases: &[(&str, Option<&str>)] = &[
        ("goal = \"\"\n[[acceptance]]\nid=\"a\"\ncheck=\"true\"", Some("goal")),
        ("goal = \"x\"", Some("acceptance")),
        ("goal = \"x\"\n[[acceptance]]\nid=\"a b\"\ncheck=\"true\"", Some("acceptance[0].id")),
        (
            "goal = \"x\"\n[[acceptance]]\nid=\"a\"\ncheck=\"true\"\n[[acceptance]]\nid=\"a\"\ncheck=\"true\"",
            Some("acceptance[1].id"),
        ),
        ("goal = \"x\"\n[[acceptance]]\nid=\"a\"", Some("acceptance[0].check")),
        ("goal = \"x\"\n[[acceptance]]\nid=\"a\"\ncheck=\"  \"", Some("acceptance[0].check")),
        (
            "goal = \"x\"\n[[acceptance]]\nid=\"a\"\ncheck=\"true\"\n[budget]\nmax_rounds = 0",
            Some("budget.max_rounds"),
        ),
        (
            "goal = \"x\"\n[[acceptance]]\nid=\"a\"\ncheck=\"true\"\n[budget]\nmax_rounds = 5000",
            Some("budget.max_rounds"),
        ),
        (
            "goal = \"x\"\nprotected_paths = [\"../etc\"]\n[[acceptance]]\nid=\"a\"\ncheck=\"true\"",
            Some("protected_paths[0]"),
        ),
        ("goal = \"x\"\nbogus = 1", None),
        ("goal = ", None),
    ];
    for (text, field) in cases {
        let err = parse_task_toml(text).unwrap_err();
        assert_eq!(err.field_name(), *field, "{text}: {err}");
    }
}

#[test]
fn unknown_key_is_reported_by_name() {
    let err = parse_task_toml("goal = \"x\"\nbogus = 1").unwrap_err();
    assert!(matches!(err, TaskError::Syntax(ref m) if m.contains("bogus")));
}

#[test]
fn ignore_patterns() {
    let t = parse_task_toml(
        "goal=\"x\"\nignore=[\"build/\", \"*.log\"]\n[[acceptance]]\nid=\"a\"\ncheck=\"true\"",
    )
    .unwrap();
    assert_eq!(t.ignore, vec!["build/".to_string(), "*.log".to_string()]);
    for bad in ["\"\"", "\"/etc\"", "\"a/../b\""] {
        let text = format!("goal=\"x\"\nignore=[{bad}]\n[[acceptance]]\nid=\"a\"\ncheck=\"true\"");
        assert_eq!(
            parse_task_toml(&text).unwrap_err().field_name(),
            Some("ignore[0]"),
            "{bad}"
        );
    }
}

#[test]
fn executor_ladder() {
    let t = parse_task_toml("goal=\"x\"\n[[acceptance]]\nid=\"a\"\ncheck=\"true\"\n[roles]\nexecutor=[\"cheap\",\"strong\"]").unwrap();
    assert_eq!(t.roles.executor, "cheap");
    assert_eq!(t.roles.executor_escalation, vec!["strong".to_string()]);
    for bad in ["[]", "[\"a\",\"a\"]", "[\"a b\"]"] {
        let text = format!(
            "goal=\"x\"\n[[acceptance]]\nid=\"a\"\ncheck=\"true\"\n[roles]\nexecutor={bad}"
        );
        let err = parse_task_toml(&text).unwrap_err();
        assert!(
            err.field_name()
                .is_some_and(|f| f.starts_with("roles.executor")),
            "{bad}: {err}"
        );
    }
}

#[test]
fn planning_and_rubric_fields() {
    let t = parse_task_toml("goal = \"x\"\nplan = true\nrequire_approval = true").unwrap();
    assert!(t.plan && t.require_approval && t.acceptance.is_empty());
    let t = parse_task_toml(
        "goal = \"x\"\nthreshold = 8.5\n[[acceptance]]\nid=\"a\"\ncheck=\"true\"\n[[rubric]]\nname = \"clarity\"\nweight = 2\n[roles]\nauditor = \"judge\"",
    )
    .unwrap();
    let rubric = t.rubric.unwrap();
    assert_eq!(rubric.threshold, 8.5);
    assert_eq!(rubric.dimensions[0].weight, 2.0);
    let defaulted = parse_task_toml(
        "goal = \"x\"\n[[acceptance]]\nid=\"a\"\ncheck=\"true\"\n[[rubric]]\nname = \"c\"\n[roles]\nauditor = \"j\"",
    )
    .unwrap();
    assert_eq!(
        defaulted.rubric.unwrap().threshold,
        DEFAULT_RUBRIC_THRESHOLD
    );
    let bad: &[(&str, &str)] = &[
        ("goal = \"x\"\nrequire_approval = true\n[[acceptance]]\nid=\"a\"\ncheck=\"true\"", "require_approval"),
        ("goal = \"x\"\n[[acceptance]]\nid=\"a\"\ncheck=\"true\"\n[[rubric]]\nname = \"c\"", "roles.auditor"),
        ("goal = \"x\"\nrubric_threshold = 11\n[[acceptance]]\nid=\"a\"\ncheck=\"true\"\n[[rubric]]\nname = \"c\"\n[roles]\nauditor = \"j\"", "rubric_threshold"),
        ("goal = \"x\"\nrubric_threshold = 8\n[[acceptance]]\nid=\"a\"\ncheck=\"true\"", "rubric_threshold"),
        ("goal = \"x\"\n[[acceptance]]\nid=\"a\"\ncheck=\"true\"\n[[rubric]]\nname = \"c\"\n[[rubric]]\nname = \"C\"\n[roles]\nauditor = \"j\"", "rubric"),
        ("goal = \"x\"\n[[acceptance]]\nid=\"rubric\"\ncheck=\"true\"", "acceptance[0].id"),
    ];
    for (text, field) in bad {
        let err = parse_task_toml(text).unwrap_err();
        assert_eq!(err.field_name(), Some(*field), "{text}: {err}");
    }
}

#[test]
fn non_blocking_criterion_may_omit_check() {
    let t = parse_task_toml(
        "goal=\"x\"\n[[acceptance]]\nid=\"a\"\ncheck=\"true\"\n[[acceptance]]\nid=\"b\"\nblocking=false",
    )
    .unwrap();
    assert!(!t.acceptance[1].blocking);
    assert_eq!(t.roles.manager, "local");
}

#[test]
fn self_checks_key_parses_and_is_validated() {
    let task = |budget: &str| {
        parse_task_toml(&format!(
            "goal=\"x\"\n[[acceptance]]\nid=\"a\"\ncheck=\"true\"\n[budget]\n{budget}"
        ))
    };
    let cases: &[(&str, Result<u32, Option<&str>>)] = &[
        ("", Ok(crate::budget::DEFAULT_SELF_CHECKS)),
        ("self_checks = 0", Ok(0)),
        ("self_checks = 5", Ok(5)),
        ("self_checks = 999", Err(Some("budget.self_checks"))),
        ("self_checks = -1", Err(None)),
        ("self_checks = \"two\"", Err(None)),
    ];
    for (budget, want) in cases {
        let got = task(budget)
            .map(|t| t.budget.self_checks)
            .map_err(|e| e.field_name().map(str::to_string));
        assert_eq!(got, want.map_err(|f| f.map(str::to_string)), "{budget}");
    }
}

#[test]
fn with_goal_validates_the_goal_and_keeps_the_rest() {
    let task =
        parse_task_toml("goal = \"a\"\n[[acceptance]]\nid = \"x\"\ncheck = \"true\"\n").unwrap();
    let long = "g".repeat(MAX_GOAL_CHARS + 1);
    let cases: [(&str, Option<&str>); 3] = [(" b ", Some("b")), ("  ", None), (&long, None)];
    for (goal, want) in cases {
        match (task.with_goal(goal), want) {
            (Ok(t), Some(want)) => {
                assert_eq!(t.goal, want);
                assert_eq!(t.acceptance, task.acceptance);
            }
            (Err(e), None) => assert!(e.to_string().contains("goal"), "{e}"),
            (got, want) => panic!("{goal:?}: {got:?} / {want:?}"),
        }
    }
}

#[test]
fn writable_paths_are_the_authors_and_reach_the_contract() {
    let base = "goal = \"x\"\n[[acceptance]]\nid=\"a\"\ncheck=\"true\"\n";
    let task = parse_task_toml(&format!(
        "writable_paths = [\"conftest.py\", \"tests/\"]\n{base}"
    ))
    .unwrap();
    assert_eq!(task.writable_paths, vec!["conftest.py", "tests/"]);
    let contract = task.contract();
    assert_eq!(contract.writable_paths, task.writable_paths);
    assert!(contract.names_writable("conftest.py"));
    assert!(contract.names_writable("tests/conftest.py"));
    assert!(!contract.names_writable("pytest.ini"));
    // Without any, the spec hash is what it was before the key existed.
    let plain = parse_task_toml(base).unwrap().contract();
    assert!(plain.writable_paths.is_empty());
    assert!(!serde_json::to_string(&plain)
        .unwrap()
        .contains("writable_paths"));
    assert_ne!(plain.spec_hash, contract.spec_hash);
    let cases = [
        ("writable_paths = [\"../x\"]\n", "writable_paths[0]"),
        ("writable_paths = [\"ok.py\", \"*\"]\n", "writable_paths[1]"),
        ("writable_paths = [\".\"]\n", "writable_paths[0]"),
        (
            "protected_paths = [\"conftest.py\"]\nwritable_paths = [\"conftest.py\"]\n",
            "writable_paths[0]",
        ),
    ];
    for (extra, field) in cases {
        let err = parse_task_toml(&format!("{extra}{base}")).unwrap_err();
        assert_eq!(err.field_name(), Some(field), "{extra}: {err}");
    }
}

#[test]
fn judge_quotes_defaults_on_and_reaches_the_audit_request_as_unquoted_met() {
    for (extra, want) in [
        ("", true),
        ("judge_quotes = true\n", true),
        ("judge_quotes = false\n", false),
    ] {
        let task = parse_task_toml(&format!("{extra}{HELLO}")).unwrap();
        assert_eq!(task.judge_quotes, want, "{extra:?}");
        // Serialized, the default is left out, so stored records from before read the same.
        let json = serde_json::to_value(&task).unwrap();
        assert_eq!(json.get("judge_quotes").is_none(), want, "{extra:?}");
        let back: Task = serde_json::from_value(json).unwrap();
        assert_eq!(back.judge_quotes, want);
    }
}
