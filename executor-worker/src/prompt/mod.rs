//! The executor's prompt: the contract, the goal's own words for the step, what the last audit
//! found on the workspace, and the increment. Never the manager's reasoning.

pub(crate) mod path_hints;

use self::path_hints::missing_path_hints;
use loopgate_protocol::wire::{EpisodeKind, ExecFeedback, ExecRequest};

/// No nested example path: with `a nested one is like src/app.py` here, the 1.5B model put a
/// root file (`wordcount.py`, `checkage.py`) under an invented `src/` in 4 of the 9 suite
/// episodes it ran on 2026-12-02 before this changed, while the checks use it from the root
/// (and later episodes went on editing that copy).
pub(crate) const SYSTEM: &str = "You are a coding agent. Your current directory is the project's \
root. Do exactly the step you are given, using the tools: write_file, read_file, edit_file, \
list_dir, shell, finish. A path is relative to the current directory: a top-level file is \
just its name, such as `app.py`, with no directory in front. Use each file at exactly the path \
the goal, the checks and the workspace list give it. Write complete file contents. When the \
step is done, call finish with a one-line summary. Do not edit acceptance tests and do not \
hard-code expected output.";

/// Workspace paths listed in the prompt.
const FILES_SHOWN: usize = 60;
/// Changed paths listed in the prompt.
const CHANGED_SHOWN: usize = 20;
/// At most this many files' current contents in the first prompt.
const PREVIEW_FILES: usize = 4;
/// A file over this many bytes is never shown whole (the agent reads it with `read_file`).
pub(crate) const PREVIEW_FILE_BYTES: u64 = 3 * 1024;
/// All shown contents together.
const PREVIEW_TOTAL_BYTES: u64 = 4 * 1024;

/// A workspace file's current text, shown in the first prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FilePreview {
    pub(crate) path: String,
    pub(crate) text: String,
}

/// The workspace files (path, size) whose current contents the first prompt shows: the small
/// files the goal, the step or a check names, and in a workspace of at most a few files every
/// small file; at most `PREVIEW_FILES`, `PREVIEW_FILE_BYTES` each and `PREVIEW_TOTAL_BYTES`
/// in all. Small models that are told to complete a file and never call `read_file` otherwise
/// overwrite it with an invented one.
///
/// Not previewed: a file the run added that a failing check names ([`withheld_previews`]).
pub(crate) fn preview_paths(req: &ExecRequest, entries: &[(String, u64)]) -> Vec<String> {
    let mut named_in = vec![req.contract.goal.as_str(), req.increment.objective.as_str()];
    named_in.extend(req.increment.goal_clauses.iter().map(String::as_str));
    for c in &req.contract.criteria {
        named_in.push(c.description.as_str());
        named_in.extend(c.check.as_deref());
    }
    let named = |path: &str| named_in.iter().any(|text| names_path(text, path));
    let small_workspace = entries.len() <= PREVIEW_FILES;
    let mut order: Vec<&(String, u64)> = entries.iter().filter(|(p, _)| named(p)).collect();
    if small_workspace {
        order.extend(entries.iter().filter(|(p, _)| !named(p)));
    }
    let withheld = withheld_previews(&req.feedback);
    let mut total = 0u64;
    let mut shown = Vec::new();
    for (path, size) in order {
        if shown.len() == PREVIEW_FILES {
            break;
        }
        if withheld.contains(&path.as_str()) {
            continue;
        }
        if *size == 0 || *size > PREVIEW_FILE_BYTES || total + size > PREVIEW_TOTAL_BYTES {
            continue;
        }
        total += size;
        shown.push(path.clone());
    }
    shown
}

/// The files whose contents a retry's prompt does not show: those the run added that a failing
/// check names, in its command or its output. Shown its failing file, the 1.5B model copied it.
/// Replaying `csv-to-json`'s round-2 request (its round-1 `to_json.py` previewed, the failing
/// checks' output under it), 8 of 8 answers wrote that same file again, at the episode's
/// temperature 0.5; without the preview, 8 of 8 wrote a different one and 1 passed. A file the
/// task started with keeps its preview: it carries what the task gave (a docstring, the code
/// around a bug). So does one the run added that no failing check names (work that holds).
pub(crate) fn withheld_previews(feedback: &ExecFeedback) -> Vec<&str> {
    feedback
        .added_paths
        .iter()
        .filter(|path| {
            feedback.failing.iter().any(|f| {
                f.check.as_deref().is_some_and(|c| names_path(c, path))
                    || names_path(&f.output_excerpt, path)
            })
        })
        .map(String::as_str)
        .collect()
}

/// Whether `text` names `path` as a whole word: `solution.py` names it, `my_solution.py` and
/// `solution.pyc` do not.
fn names_path(text: &str, path: &str) -> bool {
    let part_of_name = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/');
    text.match_indices(path).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + path.len()..].chars().next();
        before.is_none_or(|c| !part_of_name(c))
            && after.is_none_or(|c| {
                !part_of_name(c)
                    || c == '.' && {
                        // A sentence's full stop after the name still names it.
                        text[at + path.len() + 1..]
                            .chars()
                            .next()
                            .is_none_or(char::is_whitespace)
                    }
            })
    })
}

/// The first user message of an episode. `files` lists the workspace's paths; `previews`
/// are the current contents of the few files `preview_paths` chose.
pub(crate) fn task_prompt(req: &ExecRequest, files: &[String], previews: &[FilePreview]) -> String {
    let mut s = String::new();
    s.push_str(&format!("Goal: {}\n\n", req.contract.goal));
    match req.episode {
        EpisodeKind::Step if req.self_checks > 0 => s.push_str(&format!(
            "Acceptance checks of contract spec {} (frozen; run on a copy of your workspace when you call finish, then by an independent auditor):\n",
            req.contract.short_hash()
        )),
        EpisodeKind::Step => s.push_str(&format!(
            "Acceptance checks of contract spec {} (frozen; run by an independent auditor after you finish):\n",
            req.contract.short_hash()
        )),
        EpisodeKind::Plan | EpisodeKind::Propose => {
            s.push_str("You are planning: there is no contract yet, and no code is written in this step.\n")
        }
    }
    for c in &req.contract.criteria {
        match &c.check {
            Some(check) => s.push_str(&format!(
                "- {}: {} (check: `{}`)\n",
                c.id, c.description, check
            )),
            None => s.push_str(&format!("- {}: {}\n", c.id, c.description)),
        }
    }
    if !req.contract.protected_paths.is_empty() {
        s.push_str(&format!(
            "Do not change: {}\n",
            req.contract.protected_paths.join(", ")
        ));
    }
    push_files(&mut s, files);
    push_previews(&mut s, previews);
    push_feedback(&mut s, &req.feedback, files);
    let clauses = &req.increment.goal_clauses;
    if clauses.is_empty() {
        s.push_str(&format!("\nYour step: {}\n", req.increment.objective));
    } else {
        // The goal's own words are the step: small models follow them where a paraphrase
        // loses exact names and formats.
        let step = clauses.join(" ");
        s.push_str(&format!("\nYour step: {step}\n"));
        // Compared word by word: a manager's reply parser collapses runs of spaces, and a
        // note that only re-spaces the goal's words would repeat them (and read as a change).
        if !req
            .increment
            .objective
            .split_whitespace()
            .eq(step.split_whitespace())
        {
            s.push_str(&format!(
                "The manager's note on how to go about it (where it differs from the goal's \
                 words above, the goal's words win): {}\n",
                req.increment.objective
            ));
        }
    }
    if !req.increment.write_scope.is_empty() {
        s.push_str(&format!(
            "You may only create or change: {}\n",
            req.increment.write_scope.join(", ")
        ));
    }
    if !req.increment.instructions.is_empty()
        && req.increment.instructions != req.increment.objective
    {
        s.push_str(&format!("{}\n", req.increment.instructions));
    }
    s
}

fn push_files(s: &mut String, files: &[String]) {
    if files.is_empty() {
        s.push_str("\nWorkspace files: (empty)\n");
        return;
    }
    s.push_str(
        "\nWorkspace files (exact paths, relative to the workspace root; use them as written):\n",
    );
    for f in files.iter().take(FILES_SHOWN) {
        s.push_str(&format!("- {f}\n"));
    }
    if files.len() > FILES_SHOWN {
        s.push_str(&format!("… and {} more\n", files.len() - FILES_SHOWN));
    }
}

fn push_previews(s: &mut String, previews: &[FilePreview]) {
    for p in previews {
        s.push_str(&format!("\nCurrent contents of {}:\n```\n", p.path));
        s.push_str(&p.text);
        if !p.text.ends_with('\n') {
            s.push('\n');
        }
        s.push_str("```\n");
    }
}

/// What the last audit found on the workspace, under its own heading; a failing check that
/// names a file the workspace has only elsewhere gets a hint (`path_hints`).
fn push_feedback(s: &mut String, feedback: &ExecFeedback, files: &[String]) {
    if feedback.is_empty() {
        return;
    }
    let snapshot = feedback
        .audited_snapshot
        .as_deref()
        .map(|id| format!(" (snapshot {})", id.get(..12).unwrap_or(id)))
        .unwrap_or_default();
    s.push_str(&format!("\nWhat the last audit found{snapshot}:\n"));
    if let Some(rejected) = &feedback.rejected {
        s.push_str(&format!("- {rejected}\n"));
    }
    for f in &feedback.failing {
        let exit = f
            .exit_code
            .map(|c| format!("exit {c}"))
            .unwrap_or_else(|| format!("{:?}", f.verdict).to_lowercase());
        let check = f
            .check
            .as_deref()
            .map(|c| format!(": `{c}`"))
            .unwrap_or_default();
        if f.check.is_some() {
            s.push_str(&format!(
                "- check `{}` failed ({exit}){check}\n",
                f.criterion
            ));
        } else {
            // A goal clause judged by the auditor: its evidence quotes the clause.
            s.push_str(&format!(
                "- criterion `{}` is not met ({exit})\n",
                f.criterion
            ));
        }
        if !f.output_excerpt.trim().is_empty() {
            s.push_str("  output:\n");
            for line in f.output_excerpt.trim().lines() {
                s.push_str(&format!("    {line}\n"));
            }
        }
        if let Some(check) = &f.check {
            for hint in missing_path_hints(check, &f.output_excerpt, files) {
                s.push_str(&format!("  {hint}\n"));
            }
        }
    }
    if !feedback.gate_reasons.is_empty() {
        s.push_str(&format!(
            "- the completion gate is closed: {}\n",
            feedback.gate_reasons.join("; ")
        ));
    }
    if !feedback.changed_paths.is_empty() {
        let shown: Vec<&str> = feedback
            .changed_paths
            .iter()
            .take(CHANGED_SHOWN)
            .map(String::as_str)
            .collect();
        s.push_str(&format!("- the last round changed: {}\n", shown.join(", ")));
    }
    let withheld = withheld_previews(feedback);
    if !withheld.is_empty() {
        s.push_str(&format!(
            "- {} was written in this run, and the checks above fail with it: write it anew \
             from the goal instead of repeating it (read_file shows it as it is)\n",
            withheld
                .iter()
                .map(|p| format!("`{p}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !feedback.attempts.is_empty() {
        s.push_str("Earlier attempts that did not work; take a different approach:\n");
        for a in &feedback.attempts {
            s.push_str(&format!("- {a}\n"));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]
    use super::*;
    use loopgate_protocol::contract::Contract;
    use loopgate_protocol::contract::Criterion;
    use loopgate_protocol::subjects::Capability;
    use loopgate_protocol::verdict::CheckVerdict;
    use loopgate_protocol::wire::{FailingCheck, Increment};

    fn request(increment: Increment, feedback: ExecFeedback) -> ExecRequest {
        ExecRequest {
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
}
