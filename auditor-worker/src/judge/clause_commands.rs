//! What the clause judge is shown besides the files: the commands a clause quotes
//! (`` `python3 fizzbuzz.py` ``) and the function calls the goal writes out
//! (`count_words('a  b')`), each run on the candidate in the checks' sandbox. A small judge
//! that reads code guesses what it prints or returns; it is far better at comparing a printed
//! result with the requirement. A command that writes a file the clause names
//! (`` `python3 to_json.py` `` writes people.json) shows that file too: in suite sitting r the
//! 1.5B judge, shown only the empty output of a correct `to_json.py`, judged "writes
//! people.json: a JSON array ..." unmet because "the snapshot does not produce any JSON
//! output", in two rounds whose checks all passed. Never evidence: only checks and judgments
//! are.

use std::fmt::Write as _;
use std::path::Path;

use crate::judge::goal_calls::{call_command, defines_function, goal_calls, module_name, GoalCall};
use loopgate_common::goal::clause_reading::clause_commands;
use loopgate_common::goal::words::exact_words;
use loopgate_protocol::contract::{Criterion, CriterionSource};
use loopgate_protocol::snapshot::Manifest;
use loopgate_protocol::verdict::Evidence;
use loopgate_protocol::wire::AuditRequest;

use crate::audit::Auditor;
use crate::judge::clause_questions::{clause_questions, ClauseQuestion};
use crate::judge::prompt::tail_chars;

/// Characters of a clause command's output shown with its clause.
const COMMAND_OUTPUT_CHARS: usize = 600;
/// Files a clause names that its command writes, shown after the command's output, and the
/// bytes shown of each.
const WRITTEN_FILES_SHOWN: usize = 3;
const WRITTEN_FILE_BYTES: usize = 400;
/// Each of a clause's own commands gets this long on the candidate.
const CLAUSE_COMMAND_SECS: u64 = 30;
/// Python files read to find where a goal's function is defined, and the largest one read.
const MAX_SOURCES: usize = 64;
const MAX_SOURCE_BYTES: u64 = 256 * 1024;

/// What one command printed on the candidate, for the judge to read.
#[derive(Debug, Clone)]
pub(crate) struct CommandRun {
    pub command: String,
    /// The goal's call this command evaluates (`count_words('a  b')`), shown instead of it.
    pub call: Option<String>,
    /// The criteria whose judge is shown it.
    pub for_clauses: Vec<String>,
    pub exit_code: Option<i32>,
    pub output: String,
}

/// A command to run: a criterion of a throwaway contract (`clause-command-N`, not blocking).
#[derive(Debug, Clone)]
pub(crate) struct PlannedRun {
    /// The command as the judge is shown it (the criterion's check may add what prints the
    /// files it wrote).
    pub shown: String,
    pub criterion: Criterion,
    pub call: Option<String>,
    pub for_clauses: Vec<String>,
}

/// Single-quoted for `sh`.
fn shell_quoted(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// `command`, then the first bytes of each of `files` that exists after it, under a line that
/// names it; the command's exit code is kept.
pub(crate) fn command_with_written_files(command: &str, files: &[String]) -> String {
    if files.is_empty() {
        return command.to_string();
    }
    let list: Vec<String> = files.iter().map(|f| shell_quoted(f)).collect();
    format!(
        "( {command} ); rc=$?; for f in {}; do if [ -f \"$f\" ]; then printf '\\n--- %s, as \
         the command left it:\\n' \"$f\"; head -c {WRITTEN_FILE_BYTES} \"$f\"; echo; fi; done; \
         exit $rc",
        list.join(" ")
    )
}

/// The files `clause` names that are not in the snapshot and that `command` does not name
/// itself: what the command is to write (people.json for `python3 to_json.py`).
fn files_to_write(clause: &str, command: &str, manifest: &Manifest) -> Vec<String> {
    let in_command = exact_words(command).names;
    exact_words(clause)
        .names
        .into_iter()
        .filter(|n| !n.ends_with('/') && !in_command.contains(n))
        .filter(|n| !manifest.entries.iter().any(|e| e.path == *n))
        .take(WRITTEN_FILES_SHOWN)
        .collect()
}

fn planned_criterion(index: usize, command: String, description: &str) -> Criterion {
    Criterion {
        id: format!("clause-command-{}", index + 1),
        description: description.to_string(),
        check: Some(command),
        blocking: false,
        timeout_secs: CLAUSE_COMMAND_SECS,
        source: CriterionSource::Task,
        clause: None,
    }
}

/// The runs of each command the clause questions quote, each with the criteria whose clause
/// quotes it. A command filled in from a check runs only when every file it names is in
/// `manifest`.
pub(crate) fn command_criteria(
    questions: &[ClauseQuestion<'_>],
    criteria: &[Criterion],
    manifest: &Manifest,
) -> Vec<PlannedRun> {
    let checks: Vec<&str> = criteria.iter().filter_map(|c| c.check.as_deref()).collect();
    let present = |command: &str| {
        exact_words(command)
            .names
            .iter()
            .all(|n| manifest.entries.iter().any(|e| e.path == *n))
    };
    // (command, files it is to write, clauses) in first-seen order.
    let mut found: Vec<(String, Vec<String>, Vec<String>)> = Vec::new();
    for q in questions {
        for c in clause_commands(q.clause, &checks) {
            if c.from_check && !present(&c.command) {
                continue;
            }
            let id = q.criterion.id.clone();
            let files = files_to_write(q.clause, &c.command, manifest);
            match found.iter_mut().find(|(command, ..)| *command == c.command) {
                Some((_, written, clauses)) => {
                    for f in files {
                        if !written.contains(&f) && written.len() < WRITTEN_FILES_SHOWN {
                            written.push(f);
                        }
                    }
                    if !clauses.contains(&id) {
                        clauses.push(id);
                    }
                }
                None => found.push((c.command, files, vec![id])),
            }
        }
    }
    found
        .into_iter()
        .enumerate()
        .map(|(i, (command, files, for_clauses))| PlannedRun {
            criterion: planned_criterion(
                i,
                command_with_written_files(&command, &files),
                "a command a goal clause quotes, run for its judge",
            ),
            shown: command,
            call: None,
            for_clauses,
        })
        .collect()
}

/// The runs that evaluate each of the goal's `calls` (`goal_calls`), for every clause
/// question: a call of a function that one of `sources` (path, text: the snapshot's Python
/// files, those the goal names first) defines at its top level. Numbered after `first`.
pub(crate) fn call_criteria(
    calls: &[GoalCall],
    questions: &[ClauseQuestion<'_>],
    sources: &[(String, String)],
    first: usize,
) -> Vec<PlannedRun> {
    if questions.is_empty() {
        return Vec::new();
    }
    let for_clauses: Vec<String> = questions.iter().map(|q| q.criterion.id.clone()).collect();
    calls
        .iter()
        .filter_map(|call| {
            let module = sources.iter().find_map(|(path, text)| {
                defines_function(text, &call.function)
                    .then(|| module_name(path))
                    .flatten()
            })?;
            Some((call_command(&module, call), call.call.clone()))
        })
        .enumerate()
        .map(|(i, (command, call))| PlannedRun {
            shown: command.clone(),
            criterion: planned_criterion(
                first + i,
                command,
                "a call the goal writes out, evaluated for the clause judge",
            ),
            call: Some(call),
            for_clauses: for_clauses.clone(),
        })
        .collect()
}

/// The prompt's sections for criterion `id`: what the requirement's commands printed, and what
/// the goal's calls returned. Empty when there is nothing for it.
pub(crate) fn commands_section(id: &str, commands: &[CommandRun]) -> String {
    let mut p = String::new();
    let mine = |call: bool| {
        commands
            .iter()
            .filter(move |r| r.call.is_some() == call && r.for_clauses.iter().any(|c| c == id))
    };
    let exit_of = |r: &CommandRun| {
        r.exit_code
            .map_or("did not finish".to_string(), |c| format!("exit {c}"))
    };
    for (i, r) in mine(false).enumerate() {
        if i == 0 {
            let _ = writeln!(p, "\n## The requirement's commands, run on this snapshot");
        }
        let out = tail_chars(r.output.trim_end(), COMMAND_OUTPUT_CHARS);
        let _ = writeln!(
            p,
            "`{}` ({}) printed:\n```\n{out}\n```",
            r.command,
            exit_of(r)
        );
    }
    for (i, r) in mine(true).enumerate() {
        if i == 0 {
            let _ = writeln!(
                p,
                "\n## What the goal's calls return on this snapshot (evaluated with Python)"
            );
        }
        let call = r.call.as_deref().unwrap_or_default();
        let out = tail_chars(r.output.trim(), COMMAND_OUTPUT_CHARS);
        if r.exit_code == Some(0) && !out.contains('\n') {
            let _ = writeln!(p, "- `{call}` returns `{out}`");
        } else {
            let _ = writeln!(p, "- `{call}` ({}):\n```\n{out}\n```", exit_of(r));
        }
    }
    p
}

/// The snapshot's Python files as (path, text), those `goal` names first, at most
/// `MAX_SOURCES`, each at most `MAX_SOURCE_BYTES`; unreadable ones are skipped.
async fn python_sources(goal: &str, pristine: &Path, manifest: &Manifest) -> Vec<(String, String)> {
    let named = exact_words(goal).names;
    let mut paths: Vec<&str> = manifest
        .entries
        .iter()
        .filter(|e| e.path.ends_with(".py") && e.size <= MAX_SOURCE_BYTES)
        .map(|e| e.path.as_str())
        .collect();
    paths.sort_by_key(|p| !named.iter().any(|n| n == p));
    let mut out = Vec::new();
    for path in paths.into_iter().take(MAX_SOURCES) {
        if let Ok(text) = tokio::fs::read_to_string(pristine.join(path)).await {
            out.push((path.to_string(), text));
        }
    }
    out
}

impl Auditor {
    /// Run the commands the clause questions quote (`` `python3 fizzbuzz.py` ``) and the calls
    /// the goal writes out on the candidate, each in its own sandboxed copy like a check, under
    /// `scratch/clause-commands`. A failure to run them leaves the judge without them (logged),
    /// never fails the audit.
    pub(crate) async fn run_clause_commands(
        &self,
        req: &AuditRequest,
        scratch: &Path,
        pristine: &Path,
        manifest: &Manifest,
        evidence: &[Evidence],
    ) -> Vec<CommandRun> {
        let judged_here = req
            .auditor_profile
            .as_ref()
            .is_some_and(|n| self.judges.contains_key(n));
        let questions = clause_questions(req, evidence);
        if questions.is_empty() || !judged_here {
            return Vec::new();
        }
        let mut planned = command_criteria(&questions, &req.contract.criteria, manifest);
        // The snapshot's sources are read only for a goal that writes calls out.
        let calls = goal_calls(&req.contract.goal);
        if !calls.is_empty() {
            let sources = python_sources(&req.contract.goal, pristine, manifest).await;
            planned.extend(call_criteria(&calls, &questions, &sources, planned.len()));
        }
        if planned.is_empty() {
            return Vec::new();
        }
        let dir = scratch.join("clause-commands");
        if let Err(err) = tokio::fs::create_dir_all(&dir).await {
            tracing::warn!(error = %err, "preparing to run the clauses' commands; skipped");
            return Vec::new();
        }
        let mut probe = req.clone();
        probe.contract.criteria = planned.iter().map(|r| r.criterion.clone()).collect();
        let mut gaps = Vec::new();
        let runs = match self
            .run_checks(&probe, &dir, pristine, manifest, &mut gaps)
            .await
        {
            Ok(runs) => runs,
            Err(err) => {
                tracing::warn!(error = %err, "running the clauses' commands; skipped");
                return Vec::new();
            }
        };
        planned
            .into_iter()
            .filter_map(|r| {
                let run = runs.iter().find(|e| e.check_id == r.criterion.id)?;
                Some(CommandRun {
                    command: r.shown,
                    call: r.call,
                    for_clauses: r.for_clauses,
                    exit_code: run.exit_code,
                    output: run.output_excerpt.clone(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn goal_criterion(id: &str, clause: &str) -> Criterion {
        Criterion {
            id: id.into(),
            description: String::new(),
            check: None,
            blocking: true,
            timeout_secs: 5,
            source: CriterionSource::Goal,
            clause: Some(clause.into()),
        }
    }

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
}
