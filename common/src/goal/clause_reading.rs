//! What a goal clause asks for, read mechanically where its words leave no doubt.
//!
//! The auditor's judge is a model, and a small one answers a plain question about a file it can
//! see no more reliably than a coin. So a clause whose words a rule can decide is decided by
//! the rule, and the judge is asked only about the rest:
//!
//! - **creates a file** ("Create fizzbuzz.py.", "Write a shell script count_errors.sh."): the
//!   clause names one file and says nothing else. A check that runs the file covers it; else its
//!   check is `test -f NAME`.
//! - **a command passes** ("... so that `python3 -m unittest test_pricing` passes"): the goal's
//!   own command, in backquotes, must exit 0; it becomes the clause's check. Not when the clause
//!   also restricts something ("without", "only", "not", ...), or the command holds a
//!   placeholder (`FILE`, `<name>`).
//! - **keeps files** ("Do not change test_pricing.py."): the files become protected paths, which
//!   the integrity verdict enforces mechanically on every candidate.
//! - **states the problem** ("The tests in test_pricing.py fail." before "Fix the bug ..."): a
//!   plain statement of a defect (no imperative, no must/should/only/..., a word like "fail",
//!   "wrong", "bug", "crash") before a clause that starts with "Fix" describes the starting
//!   workspace, not the result; the fix's own clauses are the
//!   requirement. It is listed with the contract's clauses and is not a criterion.
//! - **exact words a check already runs** ("For app.log it prints 3."): every name, quoted
//!   string and number of the clause is in one blocking check's command, and the clause says
//!   nothing else (only words like "for", "it", "prints"): that check covers it.
//!
//! Everything else is judged, one clause at a time. Pure.

use crate::goal::words::exact_words;
use loopgate_protocol::contract::Criterion;

/// What a clause asks for, as far as a rule can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClauseReading {
    /// Only that this file exists.
    CreatesFile(String),
    /// That the goal's own command exits 0.
    CommandPasses(String),
    /// That these files are not changed.
    KeepsFiles(Vec<String>),
    /// Nothing: it describes the problem the task fixes.
    StatesProblem,
    /// No rule decides it.
    Other,
}

/// Words that say nothing beyond "this file" in a clause that creates one.
const CREATE_FILLER: &[&str] = &[
    "a",
    "an",
    "the",
    "new",
    "empty",
    "file",
    "script",
    "shell",
    "bash",
    "python",
    "python3",
    "program",
    "module",
    "command-line",
    "cli",
    "tool",
    "called",
    "named",
    "small",
    "simple",
    "executable",
];

/// Words that say nothing beyond "these files" in a clause that keeps them.
const KEEP_FILLER: &[&str] = &[
    "do", "not", "don't", "never", "change", "modify", "edit", "touch", "alter", "rewrite", "the",
    "file", "files", "and", "or", "any", "of", "in", "way", "tests", "test",
];
const KEEP_VERBS: &[&str] = &["change", "modify", "edit", "touch", "alter", "rewrite"];

/// Words that say nothing beyond the exact words around them ("For app.log it prints 3.").
const OUTPUT_FILLER: &[&str] = &[
    "for", "it", "prints", "print", "outputs", "output", "returns", "return", "gives", "shows",
    "writes", "with", "on", "the", "a", "an", "and", "when", "given", "is", "run", "running",
    "then", "also", "must", "should",
];

/// A clause with one of these words restricts something a passing command does not show.
const RESTRICTING: &[&str] = &[
    "not", "no", "never", "without", "only", "don't", "doesn't", "except", "unless", "nothing",
    "instead",
];

/// What follows a backquoted command in a clause that asks it to succeed.
const PASS_PHRASES: &[&str] = &[
    "passes",
    "succeeds",
    "must pass",
    "must succeed",
    "should pass",
    "should succeed",
    "exits with code 0",
    "exits with status 0",
    "exits 0",
];

/// Words of a statement that describes a defect.
const DEFECTIVE: &[&str] = &[
    "fail",
    "fails",
    "failing",
    "wrong",
    "wrongly",
    "bug",
    "buggy",
    "broken",
    "crash",
    "crashes",
    "incorrect",
    "incorrectly",
    "error",
    "errors",
    "raises",
    "breaks",
];

/// First words of a clause that asks for something (an imperative).
const IMPERATIVES: &[&str] = &[
    "write",
    "create",
    "add",
    "fix",
    "make",
    "do",
    "don't",
    "keep",
    "use",
    "print",
    "return",
    "change",
    "rename",
    "move",
    "extract",
    "refactor",
    "implement",
    "ensure",
    "update",
    "remove",
    "delete",
    "put",
    "read",
    "run",
    "let",
    "give",
    "handle",
    "support",
    "accept",
    "output",
    "never",
    "always",
    "only",
];

/// Words that make a plain statement a requirement ("The output must be sorted.").
const REQUIRING: &[&str] = &[
    "must", "should", "shall", "need", "needs", "required", "always", "never", "only", "exactly",
    "stay", "stays", "remain", "remains", "keep", "keeps",
];

/// The clause's words, lowercased, with the punctuation around each trimmed (`checkage.py,` ->
/// `checkage.py`, `` `fizzbuzz.py` `` -> `fizzbuzz.py`).
fn words(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| "\"'`()[]{}<>,;:!?“”‘’".contains(c))
                .trim_end_matches('.')
                .to_lowercase()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// A name usable as a protected path or in a `test -f`: relative, inside the workspace.
fn workspace_name(name: &str) -> Option<String> {
    let name = name.strip_prefix("./").unwrap_or(name);
    let bare = name.trim_end_matches('/');
    loopgate_protocol::snapshot::validate_relative_path(bare).ok()?;
    Some(name.to_string())
}

/// Read clause `index` of `clauses` (the goal's clauses, in order: a problem statement is told
/// by the "Fix ..." clause after it).
pub fn read_clause(clauses: &[String], index: usize) -> ClauseReading {
    let Some(clause) = clauses.get(index) else {
        return ClauseReading::Other;
    };
    if let Some(name) = created_file(clause) {
        return ClauseReading::CreatesFile(name);
    }
    if let Some(names) = kept_files(clause) {
        return ClauseReading::KeepsFiles(names);
    }
    if let Some(command) = passing_command(clause) {
        return ClauseReading::CommandPasses(command);
    }
    let fix_follows = clauses[index + 1..]
        .iter()
        .any(|c| words(c).first().is_some_and(|w| w == "fix"));
    if fix_follows && states_defect(clause) {
        return ClauseReading::StatesProblem;
    }
    ClauseReading::Other
}

/// "Create fizzbuzz.py." -> `fizzbuzz.py`.
fn created_file(clause: &str) -> Option<String> {
    let words = words(clause);
    if !matches!(words.first()?.as_str(), "write" | "create") {
        return None;
    }
    let names = exact_words(clause).names;
    let [name] = names.as_slice() else {
        return None;
    };
    if name.ends_with('/') {
        return None;
    }
    let lower = name.to_lowercase();
    let rest_is_filler = words[1..]
        .iter()
        .all(|w| *w == lower || CREATE_FILLER.contains(&w.as_str()));
    rest_is_filler.then(|| workspace_name(name)).flatten()
}

/// "Do not change test_pricing.py." -> `[test_pricing.py]`.
fn kept_files(clause: &str) -> Option<Vec<String>> {
    let words = words(clause);
    let opens = match words.as_slice() {
        [first, second, verb, ..] if first == "do" && second == "not" => verb,
        [first, verb, ..] if first == "don't" || first == "never" => verb,
        _ => return None,
    };
    if !KEEP_VERBS.contains(&opens.as_str()) {
        return None;
    }
    let names = exact_words(clause).names;
    if names.is_empty() {
        return None;
    }
    let lowered: Vec<String> = names.iter().map(|n| n.to_lowercase()).collect();
    let rest_is_filler = words
        .iter()
        .all(|w| lowered.contains(w) || KEEP_FILLER.contains(&w.as_str()));
    if !rest_is_filler {
        return None;
    }
    names.iter().map(|n| workspace_name(n)).collect()
}

/// "... so that `python3 -m unittest test_pricing` passes" -> the command.
fn passing_command(clause: &str) -> Option<String> {
    if words(clause)
        .iter()
        .any(|w| RESTRICTING.contains(&w.as_str()))
    {
        return None;
    }
    let mut rest = clause;
    while let Some(open) = rest.find('`') {
        let after_open = &rest[open + 1..];
        let close = after_open.find('`')?;
        let command = after_open[..close].trim();
        let after = after_open[close + 1..].trim_start().to_lowercase();
        let passes = PASS_PHRASES.iter().any(|p| {
            after
                .strip_prefix(p)
                .is_some_and(|tail| tail.chars().next().is_none_or(|c| !c.is_alphanumeric()))
        });
        if passes && command.chars().count() >= 2 && !has_placeholder(command) {
            return Some(command.to_string());
        }
        rest = &after_open[close + 1..];
    }
    None
}

/// Programs a goal's backquoted text must start with to be run as a command.
const RUNNERS: &[&str] = &[
    "python3", "python", "sh", "bash", "node", "ruby", "perl", "make", "cargo", "go", "npm",
    "pytest", "php",
];
/// At most this many of a clause's commands are run for its judge.
pub const MAX_CLAUSE_COMMANDS: usize = 4;
/// At most this many ways the checks fill in one command's placeholder.
const MAX_INSTANCES: usize = 3;

/// A command a clause quotes, to run on a snapshot for its judge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClauseCommand {
    pub command: String,
    /// Filled in from a check (`sh count_errors.sh app.log` for `sh count_errors.sh FILE`): the
    /// files it names may be ones the check made first, so it is only worth running when they
    /// are in the snapshot.
    pub from_check: bool,
}

/// The commands a clause quotes that can run (`` `python3 fizzbuzz.py` ``; not `` `adult` ``):
/// as written, or, for one with a placeholder (`` `sh count_errors.sh FILE` ``), as the
/// contract's `checks` run it (`sh count_errors.sh app.log`), so the judge sees what they print
/// on the snapshot instead of guessing it from the code.
pub fn clause_commands(clause: &str, checks: &[&str]) -> Vec<ClauseCommand> {
    let mut found: Vec<ClauseCommand> = Vec::new();
    let push = |found: &mut Vec<ClauseCommand>, command: String, from_check: bool| {
        if found.len() < MAX_CLAUSE_COMMANDS && !found.iter().any(|c| c.command == command) {
            found.push(ClauseCommand {
                command,
                from_check,
            });
        }
    };
    let mut rest = clause;
    while let Some(open) = rest.find('`') {
        let after_open = &rest[open + 1..];
        let Some(close) = after_open.find('`') else {
            break;
        };
        let command = after_open[..close].trim();
        rest = &after_open[close + 1..];
        let first = command.split_whitespace().next().unwrap_or_default();
        if !(RUNNERS.contains(&first) || (first.starts_with("./") && first.len() > 2)) {
            continue;
        }
        if !has_placeholder(command) {
            push(&mut found, command.to_string(), false);
            continue;
        }
        for instance in instances(command, checks).into_iter().take(MAX_INSTANCES) {
            push(&mut found, instance, true);
        }
    }
    found
}

/// `python3 checkage.py AGE` as `checks` run it: each run of its words in a check's command
/// with a plain word (no quote, redirection or other shell syntax) where the placeholder is.
fn instances(command: &str, checks: &[&str]) -> Vec<String> {
    let pattern: Vec<&str> = command.split_whitespace().collect();
    let is_hole = |w: &str| {
        w.chars().count() >= 2 && w.chars().all(|c| c.is_ascii_uppercase() || c == '_')
            || (w.starts_with('<') && w.ends_with('>'))
    };
    let plain = |w: &str| {
        !w.is_empty()
            && w.chars()
                .all(|c| c.is_alphanumeric() || "._-/+=,:@%".contains(c))
            && !w.starts_with('-')
    };
    let mut out: Vec<String> = Vec::new();
    for check in checks {
        let spaced: String = check
            .chars()
            .map(|c| if "$()\"'`;|&{}".contains(c) { ' ' } else { c })
            .collect();
        // `>/dev/null` and `2>err.txt` stay whole words, never plain: a redirection is no
        // argument.
        let words: Vec<&str> = spaced.split_whitespace().collect();
        for window in words.windows(pattern.len()) {
            let fits = pattern
                .iter()
                .zip(window)
                .all(|(p, w)| if is_hole(p) { plain(w) } else { p == w });
            let instance = window.join(" ");
            if fits && !out.contains(&instance) {
                out.push(instance);
            }
        }
    }
    out
}

/// `sh count.sh DIR`, `greet.py <name>`: a word to be filled in, not run as written.
fn has_placeholder(command: &str) -> bool {
    command.contains('<') && command.contains('>')
        || command.split_whitespace().any(|w| {
            w.chars().count() >= 2 && w.chars().all(|c| c.is_ascii_uppercase() || c == '_')
        })
}

/// A plain statement of a defect: no imperative first word, nothing that makes it a
/// requirement, a word that says something is wrong.
fn states_defect(clause: &str) -> bool {
    let words = words(clause);
    let Some(first) = words.first() else {
        return false;
    };
    !IMPERATIVES.contains(&first.as_str())
        && !words.iter().any(|w| REQUIRING.contains(&w.as_str()))
        && words.iter().any(|w| DEFECTIVE.contains(&w.as_str()))
}

/// The check that a rule reads `clause` as: `test -f NAME` for a file to create, the goal's
/// own command for one that must pass.
pub fn mechanical_check(reading: &ClauseReading) -> Option<String> {
    match reading {
        ClauseReading::CreatesFile(name) => Some(format!("test -f '{name}'")),
        ClauseReading::CommandPasses(command) => Some(command.clone()),
        _ => None,
    }
}

/// The blocking criterion with a check that already decides `clause` (read as `reading`): for
/// a file to create, a check whose command names the file; for any other clause, a check whose
/// command holds every exact word of a clause that says nothing else.
pub fn covering_check<'a>(
    clause: &str,
    reading: &ClauseReading,
    criteria: &'a [Criterion],
) -> Option<&'a Criterion> {
    let checked = criteria.iter().filter(|c| c.blocking);
    let with_check = || {
        checked
            .clone()
            .filter_map(|c| Some((c, c.check.as_deref()?)))
    };
    match reading {
        ClauseReading::CreatesFile(name) => with_check()
            .find(|(_, cmd)| mentions(cmd, name))
            .map(|(c, _)| c),
        ClauseReading::Other => {
            let tokens = only_exact_words(clause)?;
            with_check()
                .find(|(_, cmd)| tokens.iter().all(|t| mentions(cmd, t)))
                .map(|(c, _)| c)
        }
        _ => None,
    }
}

/// The clause's names, quoted strings and numbers, when its other words are all
/// [`OUTPUT_FILLER`]; `None` when it says more, or has no exact word.
fn only_exact_words(clause: &str) -> Option<Vec<String>> {
    let exact = exact_words(clause);
    let mut rest = clause.to_string();
    for s in &exact.strings {
        rest = rest.replace(s.as_str(), " ");
    }
    let mut tokens: Vec<String> = exact.names.clone();
    tokens.extend(exact.strings.iter().cloned());
    for w in words(&rest) {
        let is_name = exact.names.iter().any(|n| n.to_lowercase() == w);
        if is_name || OUTPUT_FILLER.contains(&w.as_str()) {
            continue;
        }
        if !w.is_empty() && w.chars().all(|c| c.is_ascii_digit()) {
            tokens.push(w);
            continue;
        }
        return None;
    }
    (!tokens.is_empty()).then_some(tokens)
}

/// Does `command` hold `token` as a whole word: a number not inside a longer one (`3` is not
/// in `13`), a name not inside a longer name (`buzz.py` is not in `fizzbuzz.py` or
/// `src/buzz.py`, but is in `./buzz.py`), a quoted string anywhere.
fn mentions(command: &str, token: &str) -> bool {
    let number = token.chars().all(|c| c.is_ascii_digit());
    let name = exact_words(token).names.iter().any(|n| n == token);
    if !number && !name {
        return command.contains(token);
    }
    let continues = |c: char| {
        if number {
            c.is_ascii_digit()
        } else {
            c.is_alphanumeric() || "_-./".contains(c)
        }
    };
    command.match_indices(token).any(|(at, _)| {
        let before = &command[..at];
        let starts = match before.strip_suffix("./") {
            Some(outer) if name => outer.chars().next_back().is_none_or(|c| !continues(c)),
            _ => before.chars().next_back().is_none_or(|c| !continues(c)),
        };
        let mut after = command[at + token.len()..].chars();
        let ends = match after.next() {
            None => true,
            // A sentence's full stop or a shell's `;` ends a name; `.bak` does not.
            Some('.') => after.next().is_none_or(|c| !c.is_alphanumeric()),
            Some(c) => !continues(c),
        };
        starts && ends
    })
}

#[cfg(test)]
#[path = "clause_reading_tests.rs"]
mod tests;
