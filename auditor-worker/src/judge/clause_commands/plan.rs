//! What to run for the clause judge: the commands the clause questions quote and the goal's
//! calls of a function the snapshot defines, as criteria of a throwaway contract
//! (`clause-command-N`, not blocking).

use std::path::Path;

use loopgate_common::goal::clause_reading::clause_commands;
use loopgate_common::goal::derived_checks::SetAside;
use loopgate_common::goal::words::exact_words;
use loopgate_protocol::contract::{Criterion, CriterionSource};
use loopgate_protocol::snapshot::Manifest;
use loopgate_protocol::verdict::Evidence;

use super::section::CommandRun;
use crate::judge::clause_questions::{clause_questions, ClauseQuestion};
use crate::judge::goal_calls::{call_command, defines_function, goal_calls, module_name, GoalCall};
use crate::judge_context::JudgeContext;

/// Files a clause names that its command writes, shown after the command's output, and the
/// bytes shown of each.
const WRITTEN_FILES_SHOWN: usize = 3;
const WRITTEN_FILE_BYTES: usize = 400;
/// Each of a clause's own commands gets this long on the candidate.
const CLAUSE_COMMAND_SECS: u64 = 30;
/// Python files read to find where a goal's function is defined, and the largest one read.
const MAX_SOURCES: usize = 64;
const MAX_SOURCE_BYTES: u64 = 256 * 1024;

/// A command to run: a criterion of a throwaway contract (`clause-command-N`, not blocking).
#[derive(Debug, Clone)]
pub(crate) struct PlannedRun {
    /// The command as the judge is shown it (the criterion's check may add what prints the
    /// files it wrote).
    pub(crate) shown: String,
    pub(crate) criterion: Criterion,
    pub(crate) call: Option<String>,
    pub(crate) for_clauses: Vec<String>,
}

/// What to run for the clause questions of the audit (`set_aside`: the derived checks whose
/// clause is judged instead): the commands they quote
/// (`` `python3 fizzbuzz.py` ``) and the calls the goal writes out. Nothing when there is no
/// question or no judge model here to read what they print.
pub(crate) async fn plan_clause_commands(
    cx: &JudgeContext<'_>,
    manifest: &Manifest,
    set_aside: &[SetAside<'_>],
) -> Vec<PlannedRun> {
    let questions = clause_questions(cx.req, set_aside);
    if questions.is_empty() || cx.model.client().is_none() {
        return Vec::new();
    }
    let goal = &cx.req.contract.goal;
    let mut planned = command_criteria(&questions, &cx.req.contract.criteria, manifest);
    // The snapshot's sources are read only for a goal that writes calls out.
    let calls = goal_calls(goal);
    if !calls.is_empty() {
        let sources = python_sources(goal, cx.workspace, manifest).await;
        planned.extend(call_criteria(&calls, &questions, &sources, planned.len()));
    }
    planned
}

/// What each planned run printed, from the evidence of running them as checks; a run without
/// evidence is left out.
pub(crate) fn command_runs(planned: Vec<PlannedRun>, runs: &[Evidence]) -> Vec<CommandRun> {
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

/// Single-quoted for `sh`.
fn shell_quoted(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// `command`, then the first bytes of each of `files` that exists after it, under a line that
/// names it; the command's exit code is kept.
pub(super) fn command_with_written_files(command: &str, files: &[String]) -> String {
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
pub(super) fn command_criteria(
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
pub(super) fn call_criteria(
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
