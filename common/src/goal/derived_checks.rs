//! When a derived check (a `source = "goal"` criterion's check: the goal's own command, a
//! `test -f` of a file it creates, the proposer's check for a clause) does not decide, and its
//! clause is judged instead. That is decided from the check itself, never from what a run of it
//! printed on a candidate: the code under test writes that output, and an artifact that prints
//! "syntax error" and exits 1 must fail, not be handed to a judge it can talk to.
//!
//! Two moments decide it:
//! - **the proposal** (`plan = true`): the auditor runs the proposed checks once on the
//!   planning snapshot (the starting workspace plus `spec.md` and `contract.toml`, nothing
//!   else: the plan audit's strict scope). A derived check that errors out on its own there (the
//!   shell cannot parse it, it calls a command that does not exist) gets the proposal refused
//!   with the reason ([`broken_on_start`]); the proposer writes another.
//! - **the check's text**, on every audit: the auditor asks its checks' shell to parse the
//!   check without running it (`sh -n`) and looks up the bare command the check starts with on
//!   the checks' `PATH` (see [`first_command_name`]). Neither reads the candidate: each answer is
//!   the same for every candidate of the run. A check found broken so is set aside
//!   ([`set_aside_checks`]): its clause is judged, and the report says why.
//!
//! A derived check that parses and names commands that exist decides like any other check: its
//! failure on a candidate, whatever it printed, keeps the gate closed. Pure.

use loopgate_protocol::contract::{Contract, Criterion, CriterionSource};
use loopgate_protocol::verdict::{CheckVerdict, Evidence};

use crate::goal::criteria::{derive_goal_criteria, is_mechanical};

/// What the checks' shell makes of a check's text, found without running the check (nothing of
/// the candidate is read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckText {
    /// It parses, and the command it starts with exists (or is not a bare name).
    Sound,
    /// The shell cannot parse it (`sh -n`): its message.
    DoesNotParse(String),
    /// It starts with a bare command name that is not a builtin and is on no directory of the
    /// checks' `PATH`.
    MissingCommand(String),
    /// The shell could not be asked (it did not start, or timed out): the check decides.
    Unknown(String),
}

impl CheckText {
    /// Why a check with this text is broken, if it is.
    pub fn broken(&self) -> Option<String> {
        match self {
            CheckText::DoesNotParse(message) => Some(format!(
                "the shell cannot parse the check ({})",
                first_line(message)
            )),
            CheckText::MissingCommand(name) => Some(format!(
                "the check calls `{name}`, which does not exist on the checks' PATH"
            )),
            CheckText::Sound | CheckText::Unknown(_) => None,
        }
    }
}

fn first_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("no message")
}

/// A derived check set aside: it does not decide, its clause is judged instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetAside<'a> {
    pub criterion: &'a Criterion,
    pub clause: &'a str,
    /// Why (from [`CheckText::broken`]).
    pub why: String,
}

/// The derived checks of `criteria` the auditor examines: `source = "goal"` criteria with a
/// check and the clause they cover. The author's own checks (`source = "task"`) always decide
/// as written.
pub fn derived_checks(criteria: &[Criterion]) -> impl Iterator<Item = (&Criterion, &str, &str)> {
    criteria.iter().filter_map(|c| {
        if c.source != CriterionSource::Goal {
            return None;
        }
        Some((c, c.check.as_deref()?, c.clause.as_deref()?))
    })
}

/// The derived checks of `criteria` to set aside, given what the checks' shell makes of each
/// check's text (`text`, asked once per check). Takes no evidence: no run of the check on any
/// snapshot can set it aside.
pub fn set_aside_checks<'a>(
    criteria: &'a [Criterion],
    mut text: impl FnMut(&str) -> CheckText,
) -> Vec<SetAside<'a>> {
    derived_checks(criteria)
        .filter_map(|(criterion, check, clause)| {
            text(check).broken().map(|why| SetAside {
                criterion,
                clause,
                why,
            })
        })
        .collect()
}

/// Shell words that are not commands on `PATH` (keywords and the POSIX special and regular
/// builtins a check may start with).
const SHELL_WORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "in", "alias", "bg", "break", "cd", "command", "continue", "eval", "exec", "exit", "export",
    "false", "fc", "fg", "getopts", "hash", "jobs", "kill", "local", "read", "readonly", "return",
    "set", "shift", "times", "trap", "true", "type", "ulimit", "umask", "unalias", "unset", "wait",
    "echo", "printf", "test", "pwd", "source",
];

/// The bare command name `check` starts with, when it is one a `PATH` lookup can decide: a
/// plain word of letters, digits and `_ . + -` (no quote, `$`, `/`, `=` or glob), not a shell
/// keyword or builtin, followed by a blank, `;`, `|`, `&` or the end. `None` otherwise (a path
/// like `./run.sh`, an assignment, a subshell, a function definition...): then nothing is
/// looked up.
pub fn first_command_name(check: &str) -> Option<&str> {
    let rest = check.trim_start();
    let end = rest
        .find(|c: char| c.is_whitespace() || matches!(c, ';' | '|' | '&'))
        .unwrap_or(rest.len());
    let word = &rest[..end];
    let plain = !word.is_empty()
        && !word.starts_with(['-', '.'])
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '+' | '-'));
    (plain && !SHELL_WORDS.contains(&word)).then_some(word)
}

/// Why a run of a check *on the starting workspace* shows the check broken on its own, if it
/// does: the shell could not parse it (exit 2 with a syntax error), or it calls a command that
/// does not exist (exit 127, `not found`, for a bare command name: a missing workspace file like
/// `./run.sh` or `python3 x.py` is the work's failure, not the check's). Reads the run's output,
/// so it is only ever applied to the planning snapshot (which the work has not touched), never
/// to a candidate's run.
fn broken_on_start_run(exit_code: Option<i32>, output: &str) -> Option<String> {
    let lower = output.to_lowercase();
    let first = |needle: &str| {
        output
            .lines()
            .find(|l| l.to_lowercase().contains(needle))
            .map(|l| l.trim().to_string())
            .unwrap_or_default()
    };
    match exit_code {
        Some(2) | Some(1)
            if [
                "syntax error",
                "unexpected eof",
                "unterminated quoted string",
                "bad substitution",
                "unexpected end of file",
            ]
            .iter()
            .any(|n| lower.contains(n)) =>
        {
            let line = first("syntax error");
            let line = if line.is_empty() {
                first("unexpected")
            } else {
                line
            };
            Some(format!("the shell cannot parse the check ({line})"))
        }
        Some(127) => {
            let line = output
                .lines()
                .find(|l| l.contains("not found") || l.contains("command not found"))?;
            // `sh: 1: jq: not found` / `bash: line 1: jq: command not found`
            let name = line
                .split(':')
                .rev()
                .nth(1)
                .map(str::trim)
                .unwrap_or_default();
            (!name.is_empty() && !name.contains('/') && !name.contains('.')).then(|| {
                format!(
                    "the check calls `{name}`, which does not exist here ({})",
                    line.trim()
                )
            })
        }
        _ => None,
    }
}

/// A proposal's derived checks broken before any work, from their evidence on the planning
/// snapshot (the starting workspace: the plan audit lets the proposer change nothing but
/// `spec.md` and `contract.toml`): the manager refuses such a proposal (a check must fail
/// there, never error on its own). One line per broken check. The goal's own mechanical
/// checks are the goal's words and are not second-guessed here.
pub fn broken_on_start(criteria: &[Criterion], evidence: &[Evidence]) -> Vec<String> {
    criteria
        .iter()
        .filter(|c| c.source == CriterionSource::Goal && c.check.is_some() && !is_mechanical(c))
        .filter_map(|c| {
            let e = evidence.iter().find(|e| e.check_id == c.id)?;
            if e.verdict == CheckVerdict::Pass {
                return None;
            }
            broken_on_start_run(e.exit_code, &e.output_excerpt)
                .map(|why| format!("{}: {why}", c.id))
        })
        .collect()
}

/// The value checks a run's contract will derive for the goal clauses a proposal (`proposed`,
/// its criteria) leaves uncovered, for the plan audit to run with the proposal's own on the
/// starting workspace: one that errors out there gets the proposal refused, as the proposer's
/// own derived checks do. `contract` is the run's contract while it plans (the task's criteria,
/// and the goal's derived ones when it derives any; none: nothing is derived).
pub fn proposal_value_checks(contract: &Contract, proposed: &[Criterion]) -> Vec<Criterion> {
    if !contract
        .criteria
        .iter()
        .any(|c| c.source == CriterionSource::Goal)
    {
        return Vec::new();
    }
    let mut known: Vec<Criterion> = contract
        .criteria
        .iter()
        .filter(|c| c.source == CriterionSource::Task)
        .cloned()
        .collect();
    known.extend(proposed.iter().cloned());
    derive_goal_criteria(&contract.goal, &known, &contract.protected_paths)
        .into_iter()
        .filter(|c| c.check.is_some() && !is_mechanical(c))
        .collect()
}

#[cfg(test)]
#[path = "derived_checks_tests.rs"]
mod tests;
