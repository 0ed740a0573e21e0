//! The manager's reply: parse defensively, then route (cli, gui, done, blocked, ask, invalid).

use super::progress::{exec_feedback, ledger_lines};
use super::transition::{Decision, RAW_LOG_CHARS};
use super::tx::Tx;
use crate::gate::evaluate_gate;
use crate::goal::words::{altered_words, clauses_for_step};
use crate::next_step::{parse_next_step, NextStepError, Route};
use crate::state::{LogEvent, Phase, RunRecord, RunState};
use loopgate_protocol::subjects::Capability;
use loopgate_protocol::usage::Usage;
use loopgate_protocol::verdict::{AuditStatus, ContractVerdict, Integrity};
use loopgate_protocol::wire::{AuditPurpose, EpisodeKind, Increment};

fn expecting_decision(record: &RunRecord, generation: u32, seq: u32) -> Result<(), String> {
    if generation != record.generation {
        return Err(format!(
            "stale generation {generation} (run is at {})",
            record.generation
        ));
    }
    match record.phase {
        Phase::Deciding { seq: want } if want == seq => Ok(()),
        _ => Err(format!("no decision {seq} is pending")),
    }
}

pub(super) fn on_manager_failed(
    record: &RunRecord,
    generation: u32,
    seq: u32,
    error: &str,
    usage: Usage,
    now: i64,
) -> Decision {
    if let Err(why) = expecting_decision(record, generation, seq) {
        return Decision::Ignore(why);
    }
    let mut tx = Tx::new(record, now);
    tx.record.accounting.usage.manager.add(usage);
    tx.log(LogEvent::ManagerError {
        seq,
        error: error.to_string(),
    });
    manager_miss(&mut tx, format!("the manager model failed: {error}"));
    tx.finish()
}

/// A decision that produced nothing usable (model error, timeout): retry within the
/// invalid-output budget, else the run fails with the last reason.
pub(super) fn manager_miss(tx: &mut Tx, reason: String) {
    tx.record.streaks.invalid_decisions += 1;
    if tx.record.streaks.invalid_decisions > tx.record.task.budget.max_invalid_outputs {
        let n = tx.record.streaks.invalid_decisions;
        tx.terminal(
            RunState::Failed,
            format!("no usable manager decision {n} times in a row; last: {reason}"),
        );
    } else if !tx.check_spend_budget() {
        tx.request_decision();
    }
}

pub(super) fn on_manager_reply(
    record: &RunRecord,
    generation: u32,
    seq: u32,
    raw: &str,
    usage: Usage,
    gui_offered: bool,
    now: i64,
) -> Decision {
    if let Err(why) = expecting_decision(record, generation, seq) {
        return Decision::Ignore(why);
    }
    let mut tx = Tx::new(record, now);
    tx.record.accounting.usage.manager.add(usage);
    if tx.record.state == RunState::Queued {
        tx.record.state = RunState::Running;
    }
    if tx.check_spend_budget() {
        return tx.finish();
    }
    let parsed = parse_next_step(raw).and_then(|step| match step.route {
        Route::Invalid => Err(NextStepError::UnknownRoute {
            word: format!("invalid ({})", step.task),
        }),
        Route::Gui if !gui_offered => Err(NextStepError::RouteNotOffered {
            route: "gui".to_string(),
        }),
        _ => Ok(step),
    });
    let step = match parsed {
        Ok(step) => step,
        Err(error) => {
            tx.record.streaks.invalid_decisions += 1;
            tx.log(LogEvent::InvalidOutput {
                seq,
                error: error.to_string(),
                raw: raw.chars().take(RAW_LOG_CHARS).collect(),
            });
            if tx.record.streaks.invalid_decisions > tx.record.task.budget.max_invalid_outputs {
                tx.terminal(
                    RunState::Blocked,
                    format!(
                        "the manager's reply could not be parsed {} times in a row; last error: {error}",
                        tx.record.streaks.invalid_decisions
                    ),
                );
            } else {
                tx.feedback(format!(
                    "Your previous reply could not be used: {error}. Answer with the three lines \
                     `Current task state:`, `Next:` and `Task:` exactly as described."
                ));
                tx.request_decision();
            }
            return tx.finish();
        }
    };
    tx.record.streaks.invalid_decisions = 0;
    if step.route != Route::Done {
        tx.record.streaks.done_refusals = 0;
    }
    if step.task_state.is_some() {
        tx.record.task_state = step.task_state.clone();
    }
    tx.log(LogEvent::Decision {
        seq,
        route: step.route,
        task: step.task.clone(),
        task_state: step.task_state.clone(),
    });
    match step.route {
        Route::Cli | Route::Gui => {
            let max = tx.record.task.budget.max_rounds;
            if tx.record.rounds_this_generation() >= max {
                tx.terminal(
                    RunState::BudgetExhausted,
                    format!("max_rounds ({max}) reached without passing the gate"),
                );
                return tx.finish();
            }
            let capability = if step.route == Route::Gui {
                Capability::Gui
            } else {
                Capability::Cli
            };
            if let Some(reason) = step_to_send_back(&tx.record, &step.task) {
                send_back(&mut tx, seq, reason);
                return tx.finish();
            }
            tx.record.streaks.steps_sent_back = 0;
            let task = match goal_words_step(&tx.record, &step.task) {
                Some(words) => {
                    tx.log(LogEvent::StepReplaced {
                        seq,
                        dropped: step.task.clone(),
                        step: words.clone(),
                    });
                    words
                }
                None => step.task,
            };
            tx.record.streaks.step_retries = 0;
            dispatch_step(&mut tx, capability, task);
        }
        Route::Done => {
            let r = &tx.record;
            let verdicts = r.audit.last_verdicts.as_ref().map(|(v, s)| (v, s.as_str()));
            let gate = evaluate_gate(&r.contract, verdicts, &r.audit.evidence, &r.snapshot);
            if gate.passed {
                let snapshot = r.snapshot.clone();
                tx.dispatch_audit(
                    AuditPurpose::Final,
                    snapshot,
                    "final audit before completion".into(),
                    Vec::new(),
                );
            } else {
                tx.log(LogEvent::DoneRefused {
                    reasons: gate.reasons.clone(),
                });
                // A refused `done` is not progress: a manager that keeps claiming success cannot
                // loop forever.
                tx.record.streaks.done_refusals = record.streaks.done_refusals + 1;
                let max = tx.record.task.budget.max_done_refusals;
                if tx.record.streaks.done_refusals > max {
                    let n = tx.record.streaks.done_refusals;
                    tx.terminal(
                        RunState::Blocked,
                        format!(
                            "the manager said `done` {n} times in a row without a passing gate; last gate: {}",
                            gate.reasons.join("; ")
                        ),
                    );
                    return tx.finish();
                }
                tx.feedback(format!(
                    "`done` was refused: the completion gate is closed because {}. Reply `Next: cli` with a \
                     Task that makes the failing checks pass.",
                    gate.reasons.join("; ")
                ));
                tx.request_decision();
            }
        }
        Route::Blocked => {
            let reason = if step.task.is_empty() {
                "the manager declared the task blocked".to_string()
            } else {
                format!("the manager declared the task blocked: {}", step.task)
            };
            tx.terminal(RunState::Blocked, reason);
        }
        Route::Ask => tx.ask(step.task),
        Route::Invalid => {}
    }
    tx.finish()
}

/// The goal's exact names, paths, strings and counts that `task` alters (the criteria's check
/// commands may name more).
fn goal_word_alterations(record: &RunRecord, task: &str) -> Vec<crate::goal::words::Alteration> {
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
fn goal_words_step(record: &RunRecord, task: &str) -> Option<String> {
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
fn step_to_send_back(record: &RunRecord, task: &str) -> Option<String> {
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
fn send_back(tx: &mut Tx, seq: u32, reason: String) {
    tx.record.streaks.steps_sent_back += 1;
    tx.log(LogEvent::StepSentBack {
        seq,
        reason: reason.clone(),
    });
    tx.feedback(reason);
    tx.request_decision();
}

/// Is `task` a copy of the manager's own instructions rather than a step? In the 2026-12-02
/// suite sitting the 1.5B manager answered `Task: Give the executor one bounded instruction to
/// carry out in the workspace with shell and file tools` (its system prompt's line for `cli`),
/// and the executor got that as the manager's note. Such a task says nothing about this one.
fn copies_the_manager_prompt(task: &str) -> bool {
    let words = |t: &str| {
        t.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let task = words(task);
    task.split(' ').count() >= 5
        && words(&crate::decide::manager_prompt::system_prompt(true)).contains(&task)
}

/// Dispatch `task` as the next round's step: the increment carries the goal clauses it serves,
/// targets every criterion, and the executor gets the last audit's evidence.
pub(super) fn dispatch_step(tx: &mut Tx, capability: Capability, task: String) {
    let task = if copies_the_manager_prompt(&task) {
        let clauses = clauses_for_step(&tx.record.contract.goal, &task);
        if clauses.is_empty() {
            task
        } else {
            clauses.join(" ")
        }
    } else {
        task
    };
    let goal_clauses = clauses_for_step(&tx.record.contract.goal, &task);
    let feedback = exec_feedback(&tx.record);
    let increment = Increment {
        objective: task.clone(),
        instructions: task,
        acceptance_checks: tx
            .record
            .contract
            .criteria
            .iter()
            .map(|c| c.id.clone())
            .collect(),
        write_scope: Vec::new(),
        goal_clauses,
    };
    tx.dispatch_exec(capability, increment, EpisodeKind::Step, feedback);
}

#[cfg(test)]
mod tests {
    use super::*;

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
