#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]
use crate::prompt::previews::{preview_paths, FilePreview, PREVIEW_FILE_BYTES};
use crate::prompt::task::task_prompt;
use loopgate_protocol::contract::Contract;
use loopgate_protocol::contract::Criterion;
use loopgate_protocol::subjects::Capability;
use loopgate_protocol::verdict::CheckVerdict;
use loopgate_protocol::wire::{EpisodeKind, ExecFeedback, ExecRequest, FailingCheck, Increment};

fn request(increment: Increment, feedback: ExecFeedback) -> ExecRequest {
    ExecRequest {
        attempt: 1,
        run_id: "r".into(),
        generation: 1,
        round: 2,
        capability: Capability::Cli,
        contract: Contract {
            goal: "Create hello.py that prints exactly: hello, loopgate".into(),
            criteria: vec![Criterion {
                id: "prints".into(),
                description: "prints the greeting".into(),
                check: Some("test \"$(python3 hello.py)\" = 'hello, loopgate'".into()),
                blocking: true,
                timeout_secs: 120,
                source: Default::default(),
                clause: None,
            }],
            protected_paths: vec![],
            writable_paths: Vec::new(),
            spec_hash: "h".repeat(64),
            rubric: None,
        },
        increment,
        base_snapshot: "b".into(),
        executor_profile: "p".into(),
        episode_secs: 60,
        max_steps: 8,
        start_by_ms: None,
        ignore: vec![],
        episode: EpisodeKind::Step,
        feedback,
        self_checks: 2,
        max_tokens: None,
        gui: None,
    }
}

#[test]
fn the_goal_words_are_the_step_and_the_audit_comes_with_its_output() {
    let increment = Increment {
        objective: "Create hello.py with the content 'hello, loopgate'".into(),
        instructions: String::new(),
        acceptance_checks: vec!["prints".into()],
        write_scope: vec![],
        goal_clauses: vec!["Create hello.py that prints exactly: hello, loopgate".into()],
    };
    let feedback = ExecFeedback {
        audited_snapshot: Some("3cc0b541aaaabbbbcccc".into()),
        failing: vec![
            FailingCheck {
                criterion: "prints".into(),
                check: Some("python3 hello.py".into()),
                verdict: CheckVerdict::Fail,
                exit_code: Some(2),
                output_excerpt: "python3: can't open file 'hello.py'".into(),
            },
            FailingCheck {
                criterion: "goal-1".into(),
                check: None,
                verdict: CheckVerdict::Fail,
                exit_code: None,
                output_excerpt: "goal clause \"prints exactly\" judged unmet: it prints Hello"
                    .into(),
            },
        ],
        gate_reasons: vec!["`prints` has no passing evidence".into()],
        changed_paths: vec!["workspace/hello.py".into()],
        added_paths: vec![],
        rejected: None,
        attempts: vec![],
    };
    let prompt = task_prompt(
        &request(increment, feedback),
        &["workspace/hello.py".into()],
        &[],
    );
    let step = prompt
        .find("Your step: Create hello.py that prints exactly: hello, loopgate")
        .expect("the goal's words are the step");
    let note = prompt.find("The manager's note").unwrap();
    let audit = prompt
        .find("What the last audit found (snapshot 3cc0b541aaaa)")
        .unwrap();
    assert!(audit < step && step < note, "{prompt}");
    for needle in [
        "- check `prints` failed (exit 2): `python3 hello.py`",
        // A judged goal clause: no check command, the clause and the reason.
        "- criterion `goal-1` is not met (fail)",
        "    goal clause \"prints exactly\" judged unmet: it prints Hello",
        "    python3: can't open file 'hello.py'",
        "the completion gate is closed",
        "the last round changed: workspace/hello.py",
        "- workspace/hello.py\n",
        // The check looks for hello.py at the root; the workspace has it elsewhere.
        "    python3: can't open file 'hello.py'\n  hint: the check runs from the workspace \
         root and needs `hello.py` there, but the workspace has `workspace/hello.py`",
    ] {
        assert!(prompt.contains(needle), "missing {needle}:\n{prompt}");
    }
}

#[test]
fn without_goal_clauses_or_feedback_the_step_is_the_objective() {
    let increment = Increment {
        objective: "write hello.py".into(),
        instructions: String::new(),
        acceptance_checks: vec![],
        write_scope: vec![],
        goal_clauses: vec![],
    };
    let prompt = task_prompt(&request(increment, ExecFeedback::default()), &[], &[]);
    assert!(prompt.contains("\nYour step: write hello.py\n"), "{prompt}");
    assert!(!prompt.contains("What the last audit found"), "{prompt}");
    assert!(prompt.contains("Workspace files: (empty)"), "{prompt}");
}

#[test]
fn a_note_that_only_respaces_the_goal_words_is_not_shown() {
    // (the manager's objective, whether its note is shown)
    let cases = [
        ("f('a b') returns 3. Fix it.", false),
        ("  f('a  b')   returns 3.\nFix it. ", false),
        ("Fix f in f.py.", true),
    ];
    for (objective, shown) in cases {
        let increment = Increment {
            objective: objective.into(),
            instructions: String::new(),
            acceptance_checks: vec![],
            write_scope: vec![],
            goal_clauses: vec!["f('a  b') returns 3.".into(), "Fix it.".into()],
        };
        let prompt = task_prompt(&request(increment, ExecFeedback::default()), &[], &[]);
        assert!(
            prompt.contains("Your step: f('a  b') returns 3. Fix it.\n"),
            "{prompt}"
        );
        assert_eq!(
            prompt.contains("The manager's note"),
            shown,
            "{objective:?}\n{prompt}"
        );
    }
}

#[test]
fn a_retry_does_not_preview_the_file_its_failed_round_added() {
    let failing = |criterion: &str| FailingCheck {
        criterion: criterion.into(),
        check: Some("python3 to_json.py".into()),
        verdict: CheckVerdict::Fail,
        exit_code: Some(1),
        output_excerpt: "AssertionError".into(),
    };
    let feedback = |failing: Vec<FailingCheck>, added: &[&str]| ExecFeedback {
        failing,
        changed_paths: vec!["to_json.py".into(), "solution.py".into()],
        added_paths: added.iter().map(|p| p.to_string()).collect(),
        ..ExecFeedback::default()
    };
    let workspace: Vec<(String, u64)> = vec![
        ("people.csv".into(), 60),
        ("to_json.py".into(), 166),
        ("solution.py".into(), 300),
    ];
    // (feedback, previewed, whether the prompt says the added file is not shown)
    let cases = vec![
        // The run added to_json.py, which a failing check runs: not shown; solution.py
        // (a file the task started with) is.
        (
            feedback(vec![failing("people-json")], &["to_json.py"]),
            vec!["people.csv", "solution.py"],
            true,
        ),
        // Nothing failed: everything is shown (the named file first).
        (
            feedback(vec![], &["to_json.py"]),
            vec!["to_json.py", "people.csv", "solution.py"],
            false,
        ),
        // Failing, but the run added nothing (it modified files the task had).
        (
            feedback(vec![failing("people-json")], &[]),
            vec!["to_json.py", "people.csv", "solution.py"],
            false,
        ),
        // The run added people.csv too, but no failing check names it: it is shown.
        (
            feedback(vec![failing("people-json")], &["to_json.py", "people.csv"]),
            vec!["people.csv", "solution.py"],
            true,
        ),
    ];
    for (feedback, want, said) in cases {
        let increment = Increment {
            objective: "Write to_json.py.".into(),
            instructions: String::new(),
            acceptance_checks: vec![],
            write_scope: vec![],
            goal_clauses: vec![],
        };
        let req = request(increment, feedback);
        assert_eq!(preview_paths(&req, &workspace), want);
        let prompt = task_prompt(&req, &["to_json.py".into()], &[]);
        assert_eq!(
            prompt.contains(
                "- `to_json.py` was written in this run, and the checks above fail with it"
            ),
            said,
            "{prompt}"
        );
    }
}

#[test]
fn previews_show_the_small_files_the_task_names_or_a_tiny_workspace_has() {
    let increment = |objective: &str| Increment {
        objective: objective.into(),
        instructions: String::new(),
        acceptance_checks: vec![],
        write_scope: vec![],
        goal_clauses: vec![],
    };
    let entries = |list: &[(&str, u64)]| -> Vec<(String, u64)> {
        list.iter().map(|(p, n)| (p.to_string(), *n)).collect()
    };
    // (step, workspace, shown)
    let cases: Vec<(&str, Vec<(String, u64)>, Vec<&str>)> = vec![
        // A tiny workspace: every small file, named ones first.
        (
            "Complete the function in solution.py.",
            entries(&[("notes.md", 10), ("solution.py", 500)]),
            vec!["solution.py", "notes.md"],
        ),
        // A bigger one: only what the task names (the goal names hello.py).
        (
            "fix the parser",
            entries(&[
                ("a.txt", 1),
                ("b.txt", 1),
                ("c.txt", 1),
                ("d.txt", 1),
                ("hello.py", 30),
            ]),
            vec!["hello.py"],
        ),
        // Too big to show whole, or empty.
        (
            "edit solution.py",
            entries(&[("solution.py", PREVIEW_FILE_BYTES + 1), ("empty.py", 0)]),
            vec![],
        ),
        // Names are whole words: my_solution.py is not solution.py.
        (
            "edit my_solution.py",
            entries(&[
                ("solution.py", 10),
                ("my_solution.py", 10),
                ("x1", 1),
                ("x2", 1),
                ("x3", 1),
            ]),
            vec!["my_solution.py"],
        ),
        // The total cap: the second 3 KiB file does not fit.
        (
            "merge a.py and b.py",
            entries(&[("a.py", 3000), ("b.py", 3000)]),
            vec!["a.py"],
        ),
    ];
    for (step, workspace, want) in cases {
        let req = request(increment(step), ExecFeedback::default());
        assert_eq!(preview_paths(&req, &workspace), want, "{step}");
    }
    let req = request(increment("x"), ExecFeedback::default());
    let prompt = task_prompt(
        &req,
        &["solution.py".into()],
        &[FilePreview {
            path: "solution.py".into(),
            text: "def f():\n    \"\"\"Doc.\"\"\"".into(),
        }],
    );
    assert!(
        prompt.contains(
            "Current contents of solution.py:\n```\ndef f():\n    \"\"\"Doc.\"\"\"\n```\n"
        ),
        "{prompt}"
    );
}

#[test]
fn a_step_of_one_part_of_the_goal_shows_that_part_and_its_checks_only() {
    let criterion = |id: &str| Criterion {
        id: id.into(),
        description: format!("{id} works"),
        check: Some(format!("python3 -m unittest test_{id}")),
        blocking: true,
        timeout_secs: 60,
        source: Default::default(),
        clause: None,
    };
    let failing = |id: &str| FailingCheck {
        criterion: id.into(),
        check: Some(format!("python3 -m unittest test_{id}")),
        verdict: CheckVerdict::Fail,
        exit_code: Some(1),
        output_excerpt: format!("NameError: {id}"),
    };
    let feedback = ExecFeedback {
        failing: vec![failing("slugify"), failing("words")],
        gate_reasons: vec!["blocking criterion 'words' fails".into()],
        ..Default::default()
    };
    // (targets, whether the step is one part of the goal)
    let cases: [(&[&str], bool); 3] = [
        (&["strip", "slugify"], true),
        (&["strip", "slugify", "words"], false),
        (&[], false),
    ];
    for (targets, part) in cases {
        let mut req = request(
            Increment {
                objective: "In textkit.py, `slugify(s)` ...".into(),
                instructions: String::new(),
                acceptance_checks: targets.iter().map(|t| t.to_string()).collect(),
                write_scope: vec![],
                goal_clauses: vec!["In textkit.py, `slugify(s)` ...".into()],
            },
            feedback.clone(),
        );
        req.contract.goal = "In textkit.py, `strip_accents(s)` ... In textkit.py, `slugify(s)` \
                             ... In textkit.py, `words(s)` ..."
            .into();
        req.contract.criteria = vec![criterion("strip"), criterion("slugify"), criterion("words")];
        let prompt = task_prompt(&req, &[], &[]);
        let goal_line = prompt.lines().next().unwrap_or_default();
        assert_eq!(
            goal_line.contains("strip_accents"),
            !part,
            "{targets:?}\n{prompt}"
        );
        assert_eq!(
            prompt.contains("One part of a larger task"),
            part,
            "{prompt}"
        );
        assert!(prompt.contains("- slugify: slugify works"), "{prompt}");
        assert!(prompt.contains("NameError: slugify"), "{prompt}");
        // The later clause's criterion, its failing output and the gate's reasons about it
        // belong to a step of the whole goal only.
        for later in [
            "- words: words works",
            "NameError: words",
            "completion gate",
        ] {
            assert_eq!(
                prompt.contains(later),
                !part,
                "{later} {targets:?}\n{prompt}"
            );
        }
    }
}
