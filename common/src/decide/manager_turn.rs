//! The manager's reply: parse defensively, then route (cli, gui, done, blocked, ask, invalid);
//! a `cli`/`gui` step is reviewed (see `step_review`) before it is dispatched.

use super::exec_feedback::exec_feedback;
use super::step_review::{
    ask_without_question, copies_the_manager_prompt, goal_words_step, send_back, step_to_send_back,
};
use super::transition::{Decision, RAW_LOG_CHARS};
use super::tx::Tx;
use crate::goal::words::clauses_for_step;
use crate::next_step::{parse_next_step, NextStep, NextStepError, Route};
use crate::state::{LogEvent, Phase, RunRecord, RunState};
use loopgate_protocol::subjects::Capability;
use loopgate_protocol::usage::Usage;
use loopgate_protocol::wire::{EpisodeKind, Increment};

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
    let steps: Vec<&str> = record
        .history
        .iter()
        .map(|h| h.objective.as_str())
        .collect();
    let step = match usable_step(raw, gui_offered, &tx.record.contract.goal, &steps) {
        Ok(step) => step,
        Err(error) => {
            refuse_unusable_reply(&mut tx, seq, raw, &error);
            return tx.finish();
        }
    };
    accept_decision(&mut tx, seq, &step);
    match step.route {
        Route::Cli | Route::Gui => take_step(&mut tx, seq, step),
        Route::Done => check_done(&mut tx),
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

/// The manager's reply as a step the run can take: it parses, names a real route, that route
/// is offered here, and an `ask` asks something neither the goal nor an earlier step (`steps`)
/// already says.
fn usable_step(
    raw: &str,
    gui_offered: bool,
    goal: &str,
    steps: &[&str],
) -> Result<NextStep, NextStepError> {
    parse_next_step(raw).and_then(|step| match step.route {
        Route::Ask => match ask_without_question(goal, steps, &step.task) {
            Some(why) => Err(NextStepError::NotAQuestion { why }),
            None => Ok(step),
        },
        Route::Invalid => Err(NextStepError::UnknownRoute {
            word: format!("invalid ({})", step.task),
        }),
        Route::Gui if !gui_offered => Err(NextStepError::RouteNotOffered {
            route: "gui".to_string(),
        }),
        _ => Ok(step),
    })
}

/// A reply the run cannot use: the manager is asked again with the error, within
/// `max_invalid_outputs` in a row; past that the run is blocked.
fn refuse_unusable_reply(tx: &mut Tx, seq: u32, raw: &str, error: &NextStepError) {
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
                "the manager's reply was not usable {} times in a row; last error: {error}",
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
}

/// A usable decision ends the invalid-reply streak (and, unless it is `done` again, the
/// refused-`done` streak), keeps the manager's task state and is logged.
fn accept_decision(tx: &mut Tx, seq: u32, step: &NextStep) {
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
}

/// A `cli` or `gui` step: the round budget ends the run, a step that alters the goal's words
/// or repeats a failed round goes back to the manager, and otherwise it is dispatched (as the
/// goal's own words when the sends-back are spent).
fn take_step(tx: &mut Tx, seq: u32, step: NextStep) {
    let max = tx.record.task.budget.max_rounds;
    if tx.record.rounds_this_generation() >= max {
        tx.terminal(
            RunState::BudgetExhausted,
            format!("max_rounds ({max}) reached without passing the gate"),
        );
        return;
    }
    let capability = if step.route == Route::Gui {
        Capability::Gui
    } else {
        Capability::Cli
    };
    if let Some(reason) = step_to_send_back(&tx.record, &step.task) {
        send_back(tx, seq, reason);
        return;
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
    dispatch_step(tx, capability, task, None);
}

/// `done`: with the gate open the final audit is dispatched; otherwise it is refused and the
/// manager asked again, and a manager that keeps claiming success without a passing gate
/// (more than `max_done_refusals` in a row) blocks the run instead of looping forever.
fn check_done(tx: &mut Tx) {
    let Some(gate) = tx.final_audit_if_gate_passes() else {
        return;
    };
    tx.log(LogEvent::DoneRefused {
        reasons: gate.reasons.clone(),
    });
    tx.record.streaks.done_refusals += 1;
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
        return;
    }
    tx.feedback(format!(
        "`done` was refused: the completion gate is closed because {}. Reply `Next: cli` with a \
         Task that makes the failing checks pass.",
        gate.reasons.join("; ")
    ));
    tx.request_decision();
}

/// What a step of one part of the goal is about: its goal clause and the criteria its episode
/// checks itself against.
pub(super) struct StepFocus<'a> {
    pub clause: &'a str,
    pub targets: &'a [String],
}

/// Dispatch `task` as the next round's step: the increment carries the goal clauses it serves
/// and targets every criterion, and the executor gets the last audit's evidence. A step with a
/// `focus` serves that clause only and targets its criteria.
pub(super) fn dispatch_step(
    tx: &mut Tx,
    capability: Capability,
    task: String,
    focus: Option<StepFocus>,
) {
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
    let (goal_clauses, acceptance_checks) = match focus {
        Some(f) => (vec![f.clause.to_string()], f.targets.to_vec()),
        None => (
            clauses_for_step(&tx.record.contract.goal, &task),
            tx.record
                .contract
                .criteria
                .iter()
                .map(|c| c.id.clone())
                .collect(),
        ),
    };
    let feedback = exec_feedback(&tx.record);
    let increment = Increment {
        objective: task.clone(),
        instructions: task,
        acceptance_checks,
        write_scope: Vec::new(),
        goal_clauses,
    };
    tx.dispatch_exec(capability, increment, EpisodeKind::Step, feedback);
}
