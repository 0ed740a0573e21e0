//! The goal's clauses as criteria of the contract. Every clause of the goal (see
//! [`goal_clauses`]) is either covered (by a criterion that quotes it, `clause = "..."`,
//! written by the task's author or the proposer; by a check or a protected path that decides
//! it, or as a statement of the problem: see [`crate::goal::clause_reading`]) or becomes a criterion
//! of its own with `source = "goal"`: checked mechanically where a rule reads the clause as a
//! file to create or a command that must pass, else judged by the auditor's model one clause at
//! a time (`met | unmet | unknown`). When a derived check is *broken* (decided from the check
//! itself, never from a candidate's run: [`crate::goal::derived_checks`]) its clause is judged
//! instead. Pure.

use crate::goal::clause_reading::{covering_check, mechanical_check, read_clause, ClauseReading};
use crate::goal::requirements::requirements;
use crate::goal::value_checks::value_check;
use crate::goal::words::goal_clauses;
use crate::task::{Task, DEFAULT_CHECK_TIMEOUT_SECS, MAX_CRITERIA};
use loopgate_protocol::contract::Contract;
use loopgate_protocol::contract::{Criterion, CriterionSource};
use loopgate_protocol::verdict::CheckVerdict;

/// At most this many clauses become criteria (the rest are covered by the judge's holistic
/// verdict, as before).
pub const MAX_DERIVED: usize = 12;
/// Characters of a judged clause's reason kept in its evidence.
pub const MAX_REASON_CHARS: usize = 300;

/// Clauses compare equal when they read the same, ignoring case, spacing and the final stop.
pub fn same_clause(a: &str, b: &str) -> bool {
    normalize(a) == normalize(b)
}

fn normalize(text: &str) -> String {
    let words: Vec<String> = text
        .split_whitespace()
        .map(str::to_lowercase)
        .collect::<Vec<_>>();
    words
        .join(" ")
        .trim_end_matches(['.', '!', '?', ';', ','])
        .trim()
        .to_string()
}

/// Does the task derive criteria from its goal? Only with a judge to answer the clauses.
pub fn derives(task: &Task) -> bool {
    task.derive_criteria && task.roles.auditor.is_some()
}

/// The contract a run starts with: the task's own, and with [`derives`], the files the goal
/// says not to change as protected paths and a criterion (`source = "goal"`) for each goal
/// clause nothing covers.
pub fn contract_for(task: &Task) -> Contract {
    let mut contract = task.contract();
    if derives(task) {
        for path in goal_kept_paths(&task.goal) {
            if !contract.protected_paths.contains(&path) {
                contract.protected_paths.push(path);
            }
        }
        let derived =
            derive_goal_criteria(&task.goal, &contract.criteria, &contract.protected_paths);
        contract.criteria.extend(derived);
        contract.spec_hash = contract.compute_hash();
    }
    contract
}

/// The files the goal's clauses say not to change ("Do not change test_pricing.py."), which a
/// deriving contract protects.
pub fn goal_kept_paths(goal: &str) -> Vec<String> {
    let clauses = goal_clauses(goal);
    let mut paths: Vec<String> = Vec::new();
    for i in 0..clauses.len() {
        if let ClauseReading::KeepsFiles(names) = read_clause(&clauses, i) {
            for name in names {
                if !paths.contains(&name) {
                    paths.push(name);
                }
            }
        }
    }
    paths
}

/// What covers one goal clause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClauseCover {
    /// This criterion quotes the clause, or its check runs the clause's exact words.
    Criterion(String),
    /// The clause keeps these files, which the contract protects.
    ProtectedPaths(Vec<String>),
    /// The clause states the problem the task fixes: not a requirement of its own.
    StatesProblem,
    /// Nothing: a derived criterion is due.
    Uncovered,
}

/// One goal clause, what a rule reads it as, and what covers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClauseCoverage {
    pub clause: String,
    /// Its place in the goal: `1` for the first sentence, `1a`, `1b`, ... for the requirements
    /// of a sentence split at them ([`crate::goal::requirements`]).
    pub label: String,
    /// The goal sentence the clause is (part of).
    pub sentence: String,
    pub reading: ClauseReading,
    pub cover: ClauseCover,
}

impl ClauseCoverage {
    /// The criterion covering the clause, if one does.
    pub fn criterion(&self) -> Option<&str> {
        match &self.cover {
            ClauseCover::Criterion(id) => Some(id),
            _ => None,
        }
    }
}

/// Each clause of `goal` with what covers it, in the goal's order: a criterion that quotes it,
/// the protected paths for a clause that keeps files, nothing for one that states the problem,
/// a blocking check that already runs its exact words (see [`crate::goal::clause_reading`]).
/// A sentence nothing covers whole is split at its requirements (`1a`, `1b`, ...), each
/// covered or not on its own.
pub fn clause_coverage(
    goal: &str,
    criteria: &[Criterion],
    protected_paths: &[String],
) -> Vec<ClauseCoverage> {
    let clauses = goal_clauses(goal);
    let mut out = Vec::new();
    for (i, sentence) in clauses.iter().enumerate() {
        let whole = cover_of(&clauses, i, criteria, protected_paths, (i + 1).to_string());
        let parts = requirements(sentence);
        if whole.cover != ClauseCover::Uncovered || parts.len() < 2 {
            out.push(ClauseCoverage {
                sentence: sentence.clone(),
                ..whole
            });
            continue;
        }
        for (j, letter) in (0..parts.len()).zip('a'..='z') {
            let label = format!("{}{letter}", i + 1);
            out.push(ClauseCoverage {
                sentence: sentence.clone(),
                ..cover_of(&parts, j, criteria, protected_paths, label)
            });
        }
    }
    out
}

/// What covers clause `i` of `clauses` (its `sentence` is left empty).
fn cover_of(
    clauses: &[String],
    i: usize,
    criteria: &[Criterion],
    protected_paths: &[String],
    label: String,
) -> ClauseCoverage {
    let clause = clauses[i].clone();
    let reading = read_clause(clauses, i);
    let quoted = criteria
        .iter()
        .find(|c| c.clause.as_deref().is_some_and(|q| same_clause(q, &clause)));
    let cover = if let Some(c) = quoted {
        ClauseCover::Criterion(c.id.clone())
    } else {
        match &reading {
            ClauseReading::KeepsFiles(names)
                if names.iter().all(|n| protected_paths.contains(n)) =>
            {
                ClauseCover::ProtectedPaths(names.clone())
            }
            ClauseReading::StatesProblem => ClauseCover::StatesProblem,
            _ => covering_check(&clause, &reading, criteria).map_or(ClauseCover::Uncovered, |c| {
                ClauseCover::Criterion(c.id.clone())
            }),
        }
    };
    ClauseCoverage {
        clause,
        label,
        sentence: String::new(),
        reading,
        cover,
    }
}

/// The criteria to add for the clauses of `goal` that nothing in `existing` (or the protected
/// paths) covers: `goal-1`, `goal-2`, ... (numbered by the clause's place in the goal; the
/// requirements of a split sentence `goal-1a`, `goal-1b`, ...),
/// blocking. A clause a rule reads as a file to create or a command that must pass gets that
/// check ([`mechanical_check`]), one that names a value a command can compare (a header, an
/// order, a count, a string) a value check ([`value_check`]); any other is judged by the
/// auditor's model.
pub fn derive_goal_criteria(
    goal: &str,
    existing: &[Criterion],
    protected_paths: &[String],
) -> Vec<Criterion> {
    let room = MAX_CRITERIA.saturating_sub(existing.len());
    let mut derived: Vec<Criterion> = Vec::new();
    for cover in clause_coverage(goal, existing, protected_paths) {
        if cover.cover != ClauseCover::Uncovered || derived.len() >= room.min(MAX_DERIVED) {
            continue;
        }
        let mut id = format!("goal-{}", cover.label);
        while existing.iter().chain(&derived).any(|c| c.id == id) {
            id.push('x');
        }
        derived.push(Criterion {
            id,
            description: format!("the goal's clause holds: {}", cover.clause),
            check: mechanical_check(&cover.reading)
                .or_else(|| value_check(&cover.clause, &cover.sentence)),
            blocking: true,
            timeout_secs: DEFAULT_CHECK_TIMEOUT_SECS,
            source: CriterionSource::Goal,
            clause: Some(cover.clause),
        });
    }
    derived
}

/// Is `c`'s check the one a rule reads its clause as (the goal's own command, or `test -f` of
/// the file it creates)? Such a check is the goal's words, not a proposer's guess.
pub fn is_mechanical(c: &Criterion) -> bool {
    let (Some(clause), Some(check)) = (c.clause.as_deref(), c.check.as_deref()) else {
        return false;
    };
    let clauses = goal_clauses(clause);
    (0..clauses.len())
        .any(|i| mechanical_check(&read_clause(&clauses, i)).as_deref() == Some(check))
}

/// The criteria the auditor's judge answers one by one on a candidate: every blocking goal
/// criterion without a check.
pub fn judged_clauses(criteria: &[Criterion]) -> impl Iterator<Item = &Criterion> {
    criteria
        .iter()
        .filter(|c| c.source == CriterionSource::Goal && c.blocking && c.check.is_none())
}

/// The judge's answer to one clause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClauseVerdict {
    Met,
    Unmet,
    Unknown,
}

impl ClauseVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            ClauseVerdict::Met => "met",
            ClauseVerdict::Unmet => "unmet",
            ClauseVerdict::Unknown => "unknown",
        }
    }
    /// As evidence: `met` passes, `unmet` fails, `unknown` is inconclusive (and so blocks).
    pub fn check_verdict(self) -> CheckVerdict {
        match self {
            ClauseVerdict::Met => CheckVerdict::Pass,
            ClauseVerdict::Unmet => CheckVerdict::Fail,
            ClauseVerdict::Unknown => CheckVerdict::Inconclusive,
        }
    }
}

/// Read `met|unmet|unknown - <reason>` from a judge's reply: the first line that starts with
/// one of the words (after list marks, quotes, `**`, `Answer:`). `None`: no such line.
pub fn parse_clause_answer(text: &str) -> Option<(ClauseVerdict, String)> {
    for raw in text.lines() {
        let mut line = raw
            .trim()
            .trim_start_matches(['-', '*', '>', '#', ' ', '`', '"']);
        for prefix in ["answer:", "verdict:"] {
            if line.to_lowercase().starts_with(prefix) {
                line = line[prefix.len()..].trim_start_matches(['*', ' ', '`', '"']);
            }
        }
        let word: String = line.chars().take_while(|c| c.is_alphabetic()).collect();
        let verdict = match word.to_lowercase().as_str() {
            "met" => ClauseVerdict::Met,
            "unmet" => ClauseVerdict::Unmet,
            "unknown" => ClauseVerdict::Unknown,
            _ => continue,
        };
        let rest = line[word.len()..]
            .trim_start_matches(|c: char| c == '*' || c == '`' || c == '"' || c.is_whitespace())
            .trim_start_matches(['-', ':', '–', '—', ','])
            .trim();
        let reason = match rest.char_indices().nth(MAX_REASON_CHARS) {
            Some((cut, _)) => format!("{}…", &rest[..cut]),
            None => rest.to_string(),
        };
        return Some((verdict, reason));
    }
    None
}

/// The evidence text of a judged clause: the quoted clause, the answer and its reason, so an
/// executor reading its failing evidence sees which words of the goal its work breaks.
pub fn clause_excerpt(clause: &str, verdict: ClauseVerdict, reason: &str) -> String {
    let reason = if reason.is_empty() {
        "(no reason given)"
    } else {
        reason
    };
    format!(
        "goal clause \"{clause}\" judged {}: {reason}",
        verdict.as_str()
    )
}

#[cfg(test)]
#[path = "criteria_tests.rs"]
mod tests;
