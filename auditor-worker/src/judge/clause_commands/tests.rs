//! What is planned for the clause judge, and how what it printed reads in the prompt.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use loopgate_protocol::snapshot::Manifest;

use super::plan::{call_criteria, command_criteria, command_with_written_files};
use super::section::{commands_section, CommandRun};
use crate::judge::clause_questions::ClauseQuestion;
use crate::judge::goal_calls::goal_calls;
use crate::prompt_text::fixtures::goal_criterion;

/// A snapshot manifest of one-byte files at `paths`.
fn manifest_of(paths: &[&str]) -> Manifest {
    Manifest {
        v: 1,
        entries: paths
            .iter()
            .map(|path| loopgate_protocol::snapshot::ManifestEntry {
                path: path.to_string(),
                mode: 420,
                size: 1,
                sha256: String::new(),
            })
            .collect(),
    }
}

fn run(command: &str, for_clause: &str, exit_code: Option<i32>, output: &str) -> CommandRun {
    CommandRun {
        command: command.into(),
        call: None,
        for_clauses: vec![for_clause.into()],
        exit_code,
        output: output.into(),
    }
}

#[test]
fn the_prompt_shows_what_the_clauses_own_commands_print() {
    let clause = "Running `python3 fizzbuzz.py` prints 1 to 3, Fizz for 3.";
    let c = goal_criterion("goal-2", clause);
    let q = ClauseQuestion {
        criterion: &c,
        clause,
        broken: None,
    };
    let commands = [
        run("python3 fizzbuzz.py", "goal-2", Some(0), "1\n2\nFizz\n"),
        run("python3 other.py", "goal-9", Some(1), "not this clause's"),
    ];
    let p = commands_section("goal-2", &commands);
    assert!(
        p.contains("`python3 fizzbuzz.py` (exit 0) printed:\n```\n1\n2\nFizz\n```"),
        "{p}"
    );
    assert!(!p.contains("other.py"), "{p}");
    let timed_out = [run("python3 fizzbuzz.py", "goal-2", None, "")];
    assert!(commands_section("goal-2", &timed_out).contains("(did not finish)"));
    // The commands to run are those of the clauses asked about, once each.
    let mut other = c.clone();
    other.id = "goal-3".into();
    let q3 = ClauseQuestion {
        criterion: &other,
        clause,
        broken: None,
    };
    let planned = command_criteria(&[q.clone(), q3], &[], &manifest_of(&[]));
    assert_eq!(planned.len(), 1);
    assert_eq!(
        planned[0].criterion.check.as_deref(),
        Some("python3 fizzbuzz.py")
    );
    assert!(!planned[0].criterion.blocking);
    assert_eq!(
        planned[0].for_clauses,
        vec!["goal-2".to_string(), "goal-3".to_string()]
    );
    // Filled in from a check: run only when the files it names are in the snapshot.
    let placeholder = "`sh count.sh FILE` prints the count.";
    let q = ClauseQuestion {
        criterion: &c,
        clause: placeholder,
        broken: None,
    };
    let mut checks = vec![c.clone(), c.clone()];
    checks[0].check = Some("test \"$(sh count.sh app.log)\" = 3".into());
    checks[1].check = Some("printf 'x' > new.log; test \"$(sh count.sh new.log)\" = 0".into());
    let manifest = manifest_of(&["count.sh", "app.log"]);
    let planned = command_criteria(std::slice::from_ref(&q), &checks, &manifest);
    let commands: Vec<&str> = planned
        .iter()
        .filter_map(|r| r.criterion.check.as_deref())
        .collect();
    assert_eq!(commands, vec!["sh count.sh app.log"]);
}

#[test]
fn the_goals_calls_are_evaluated_where_a_file_defines_their_function() {
    let goal = "count_words in wordcount.py gives wrong answers: count_words('a  b') returns \
                3 and print('x') is prose. Fix it so it returns 0 for an empty string.";
    let c = goal_criterion("goal-2", "Fix it so it returns 0 for an empty string.");
    let d = goal_criterion("goal-3", "keeping it short");
    let questions = [
        ClauseQuestion {
            criterion: &c,
            clause: "Fix it so it returns 0 for an empty string.",
            broken: None,
        },
        ClauseQuestion {
            criterion: &d,
            clause: "keeping it short",
            broken: None,
        },
    ];
    let sources = vec![
        ("notes/readme.py".to_string(), "x = 1\n".to_string()),
        (
            "wordcount.py".to_string(),
            "def count_words(text):\n    return len(text.split())\n".to_string(),
        ),
    ];
    let calls = goal_calls(goal);
    let planned = call_criteria(&calls, &questions, &sources, 2);
    assert_eq!(planned.len(), 1, "{planned:?}");
    assert_eq!(planned[0].criterion.id, "clause-command-3");
    assert_eq!(planned[0].call.as_deref(), Some("count_words('a  b')"));
    assert!(planned[0]
        .criterion
        .check
        .as_deref()
        .unwrap()
        .starts_with("python3 -c 'from wordcount import count_words;"));
    assert_eq!(planned[0].for_clauses, vec!["goal-2", "goal-3"]);
    // No question, nothing to evaluate.
    assert!(call_criteria(&calls, &[], &sources, 0).is_empty());

    let call = |exit_code, output: &str| CommandRun {
        call: Some("count_words('a  b')".into()),
        ..run("python3 -c ...", "goal-2", exit_code, output)
    };
    let p = commands_section("goal-2", &[call(Some(0), "2\n")]);
    assert!(
        p.contains("## What the goal's calls return on this snapshot"),
        "{p}"
    );
    assert!(p.contains("- `count_words('a  b')` returns `2`"), "{p}");
    assert!(!p.contains("python3 -c"), "{p}");
    let p = commands_section("goal-2", &[call(Some(1), "Traceback\nNameError: x")]);
    assert!(
        p.contains("(exit 1):\n```\nTraceback\nNameError: x\n```"),
        "{p}"
    );
    assert!(commands_section("goal-9", &[call(Some(0), "2")]).is_empty());
}

#[test]
fn a_command_that_writes_a_file_the_clause_names_shows_that_file() {
    let clause = "`python3 to_json.py` reads people.csv (columns name, age, city) and \
                  writes people.json: a JSON array with one object per row.";
    let c = goal_criterion("goal-2", clause);
    let q = ClauseQuestion {
        criterion: &c,
        clause,
        broken: None,
    };
    let manifest = manifest_of(&["to_json.py", "people.csv"]);
    let planned = command_criteria(std::slice::from_ref(&q), &[], &manifest);
    assert_eq!(planned.len(), 1);
    // The judge is shown the command as the clause quotes it; the run adds people.json
    // (not in the snapshot), not people.csv (in it) or to_json.py (the command's own).
    assert_eq!(planned[0].shown, "python3 to_json.py");
    let check = planned[0].criterion.check.clone().unwrap();
    assert_eq!(
        check,
        command_with_written_files("python3 to_json.py", &["people.json".to_string()])
    );
    assert!(!check.contains("people.csv"), "{check}");
}

#[test]
fn the_written_files_follow_the_output_and_the_exit_code_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let files = ["out.json".to_string(), "it's missing.txt".to_string()];
    // (command, exit code, what the output must hold, what it must not)
    let cases = [
        (
            "echo ran; printf '[1, 2]' > out.json",
            0,
            "ran\n\n--- out.json, as the command left it:\n[1, 2]",
            "missing",
        ),
        ("printf x > out.json; exit 3", 3, "--- out.json", "missing"),
        ("rm -f out.json; true", 0, "", "---"),
    ];
    for (command, code, holds, lacks) in cases {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(command_with_written_files(command, &files))
            .current_dir(dir.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(code), "{command}: {text}");
        assert!(text.contains(holds), "{command}: {text}");
        assert!(!text.contains(lacks), "{command}: {text}");
    }
    assert_eq!(command_with_written_files("true", &[]), "true");
}
