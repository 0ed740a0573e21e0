//! The review a manager's step gets before any executor runs: it goes back to the manager when
//! it alters the goal's exact words or repeats a failed round's instruction, and the goal's own
//! clauses replace it when it alters them past the sends-back, or when it copies the manager's
//! own instructions.

use super::exec_feedback::ledger_lines;
use super::tx::Tx;
use crate::goal::words::{altered_words, clauses_for_step, Alteration};
use crate::state::{LogEvent, RunRecord};
use loopgate_protocol::verdict::{AuditStatus, ContractVerdict, Integrity};

/// The goal's exact names, paths, strings and counts that `task` alters (the criteria's check
/// commands may name more).
fn goal_word_alterations(record: &RunRecord, task: &str) -> Vec<Alteration> {
    let checks: Vec<&str> = record
        .contract
        .criteria
        .iter()
        .filter_map(|c| c.check.as_deref())
        .collect();
    altered_words(&record.contract.goal, task, &checks.join("\n"))
}

/// The step the executor gets instead of `task` when `task` still alters the goal's exact
/// words once the sends-back are spent: the goal's own clauses for the step. A paraphrase
/// that renames the goal's file poisons a small executor even below the goal's words (it
/// writes the renamed file, or the name as content); the goal's words alone do not.
pub(super) fn goal_words_step(record: &RunRecord, task: &str) -> Option<String> {
    if goal_word_alterations(record, task).is_empty() {
        return None;
    }
    let clauses = clauses_for_step(&record.contract.goal, task);
    (!clauses.is_empty()).then(|| clauses.join(" "))
}

/// Why the manager's step goes back to it before any executor runs, if it does: it alters the
/// goal's exact names, paths, strings or counts (while sends-back stay within
/// `max_invalid_outputs` in a row; past that the executor gets the goal's own words as its
/// step, see [`goal_words_step`]), or it repeats verbatim the instruction of the round that
/// just failed (sent back once).
pub(super) fn step_to_send_back(record: &RunRecord, task: &str) -> Option<String> {
    let sent_back = record.streaks.steps_sent_back;
    let altered = goal_word_alterations(record, task);
    if !altered.is_empty() && sent_back < record.task.budget.max_invalid_outputs {
        let list: Vec<String> = altered.iter().map(ToString::to_string).collect();
        return Some(format!(
            "Your step changes the goal's exact words ({}). Use the goal's exact names, paths \
             and strings in the Task.",
            list.join("; ")
        ));
    }
    let normalize = |s: &str| {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
    };
    let last = record.history.last()?;
    let passed = last.failing.is_empty()
        && last.verdicts.is_some_and(|v| {
            v.status == AuditStatus::Complete
                && v.integrity == Integrity::Clean
                && v.contract == ContractVerdict::Aligned
        });
    if sent_back == 0 && !passed && normalize(&last.objective) == normalize(task) {
        let failure = last
            .failing
            .first()
            .map(|(id, excerpt)| format!("`{id}` failed: {}", excerpt.trim()))
            .unwrap_or_else(|| last.exec_summary.clone());
        return Some(format!(
            "Your step repeats round {}'s instruction word for word, and that round failed ({failure}). \
             Attempts so far:\n{}\nGive a different instruction that addresses the failure.",
            last.round,
            ledger_lines(record).join("\n")
        ));
    }
    None
}

/// The step goes back to the manager with the reason; the decision is asked again.
pub(super) fn send_back(tx: &mut Tx, seq: u32, reason: String) {
    tx.record.streaks.steps_sent_back += 1;
    tx.log(LogEvent::StepSentBack {
        seq,
        reason: reason.clone(),
    });
    tx.feedback(reason);
    tx.request_decision();
}

/// Is `task` a copy of the manager's own instructions rather than a step: five words or more,
/// all of them a run of the system prompt's words (a small manager may answer with the
/// prompt's line for `cli`, `Task: Give the executor one bounded instruction ...`)? Such a
/// task says nothing about this one; `dispatch_step` sends the goal's clauses for it instead.
pub(super) fn copies_the_manager_prompt(task: &str) -> bool {
    let task = words(task).join(" ");
    task.split(' ').count() >= 5
        && words(&crate::decide::manager_prompt::system_prompt(true))
            .join(" ")
            .contains(&task)
}

/// Why an `ask` is not a question for a person, if it is not: it repeats the goal (the person
/// wrote the goal; asking it back answers nothing), repeats a step the run already gave an
/// executor (an instruction, not a question), copies the manager's own prompt, or is an
/// instruction itself (it asks nothing and opens with a work verb).
pub(super) fn ask_without_question(goal: &str, steps: &[&str], question: &str) -> Option<String> {
    if copies_the_manager_prompt(question) {
        return Some("copies the instructions the manager was given".to_string());
    }
    let asked = words(question);
    if asked.len() >= 6 {
        if repeats_text(&asked, &words(goal)) {
            return Some("repeats the goal".to_string());
        }
        if steps.iter().any(|step| repeats_text(&asked, &words(step))) {
            return Some("repeats a step the run already gave an executor".to_string());
        }
    }
    is_an_instruction(question, &asked).then(|| {
        "gives the executor an instruction and asks nothing (work is a `cli` step)".to_string()
    })
}

/// Verbs that open an instruction for an executor, not a question for a person.
const WORK_VERBS: &[&str] = &[
    "add",
    "build",
    "change",
    "complete",
    "correct",
    "create",
    "delete",
    "edit",
    "ensure",
    "finish",
    "fix",
    "implement",
    "install",
    "make",
    "modify",
    "move",
    "refactor",
    "remove",
    "rename",
    "replace",
    "rewrite",
    "run",
    "update",
    "write",
];

/// Whether `text` (its [`words`]: `asked`) is an instruction, not a question: it asks nothing
/// (no `?`) and opens with a work verb (after an optional "please"), like "Fix the count_words
/// function to ...".
fn is_an_instruction(text: &str, asked: &[String]) -> bool {
    if text.contains('?') {
        return false;
    }
    let first = match asked.first().map(String::as_str) {
        Some("please") => asked.get(1),
        _ => asked.first(),
    };
    first.is_some_and(|w| WORK_VERBS.contains(&w.as_str()))
}

/// Lower-cased words of `t`.
fn words(t: &str) -> Vec<String> {
    t.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Whether the words `asked` repeat `text`: one holds the other, or nine in ten of ten or more
/// asked words are `text`'s.
fn repeats_text(asked: &[String], text: &[String]) -> bool {
    if text.is_empty() {
        return false;
    }
    let joined = |w: &[String]| format!(" {} ", w.join(" "));
    let (asked_text, text_joined) = (joined(asked), joined(text));
    text_joined.contains(&asked_text) || (text.len() >= 6 && asked_text.contains(&text_joined)) || {
        let known: std::collections::HashSet<&String> = text.iter().collect();
        let shared = asked.iter().filter(|w| known.contains(w)).count();
        asked.len() >= 10 && shared * 10 >= asked.len() * 9
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ask_that_repeats_the_goal_is_not_a_question() {
        let goal = "Add a --json flag to the report command of report.py so that it prints the \
                    totals as one JSON object, and keep the text output unchanged.";
        let cases = [
            // The goal verbatim, or a part of it.
            (goal, true),
            ("add a --json flag to the report command of report.py", true),
            // The goal with a few words around it.
            (
                "Task: Add a --json flag to the report command of report.py so that it prints \
                 the totals as one JSON object, and keep the text output unchanged. Please.",
                true,
            ),
            // Mostly the goal's words, reshuffled.
            (
                "the report command of report.py prints the totals: add a --json flag, keep \
                 the text output unchanged",
                true,
            ),
            // Real questions.
            (
                "Should the JSON keys be sorted, or kept in the text output's order?",
                false,
            ),
            ("Which Python version must report.py support?", false),
            ("Is it json?", false),
            (
                "Give the executor one bounded instruction to carry out in the workspace with \
                 shell and file tools",
                true,
            ),
        ];
        for (question, junk) in cases {
            assert_eq!(
                ask_without_question(goal, &[], question).is_some(),
                junk,
                "{question:?}"
            );
        }
    }

    #[test]
    fn an_ask_that_gives_an_instruction_is_not_a_question() {
        let goal = "count_words in wordcount.py gives wrong answers. Fix it so it returns the \
                    number of words separated by any whitespace, and 0 for an empty string.";
        let cases = [
            // A 1.5B manager's `ask` (examples/suite sitting u): the run waited for a person.
            (
                "Fix the count_words function to count words separated by any whitespace and \
                 return 0 for an empty or blank string.",
                true,
            ),
            ("Please add a test for tabs.", true),
            ("Write it", true),
            // Questions, and requests for what only a person has.
            ("Should tabs count as separators?", false),
            ("Fix the tests too, or only count_words?", false),
            (
                "Please provide the API token for the staging server.",
                false,
            ),
            ("The spec says nothing about unicode spaces.", false),
        ];
        for (question, junk) in cases {
            assert_eq!(
                ask_without_question(goal, &[], question).is_some(),
                junk,
                "{question:?}"
            );
        }
    }

    #[test]
    fn an_ask_that_repeats_an_earlier_step_is_not_a_question() {
        let goal = "Add every_nth(iterable, n) to more_itertools: it yields every n-th item \
                    starting with the first, and from more_itertools import every_nth works";
        let steps = [
            "Add every_nth(iterable, n) to more_itertools",
            "Add the `every_nth` function to the `more_itertools` package and ensure it works \
             correctly.",
        ];
        let cases = [
            // The manager's own round-3 step handed back as its question (a 1.5B run).
            (
                "Add the `every_nth` function to the `more_itertools` package and ensure it \
                 works correctly.",
                Some("repeats a step the run already gave an executor"),
            ),
            (
                "Should every_nth raise ValueError for n < 1, or yield nothing?",
                None,
            ),
        ];
        for (question, why) in cases {
            assert_eq!(
                ask_without_question(goal, &steps, question).as_deref(),
                why,
                "{question:?}"
            );
        }
    }

    #[test]
    fn a_task_copied_from_the_manager_prompt_is_not_a_step() {
        let cases = [
            (
                "Give the executor one bounded instruction to carry out in the workspace with \
                 shell and file tools",
                true,
            ),
            ("give the executor one bounded instruction.", true),
            (
                "Fix apply_discount in pricing.py: divide percent by 100.",
                false,
            ),
            // Too short to tell a copy from a real step.
            ("cli", false),
            ("Preserve exact names", false),
        ];
        for (task, copied) in cases {
            assert_eq!(copies_the_manager_prompt(task), copied, "{task:?}");
        }
    }
}
