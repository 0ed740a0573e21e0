//! A run's first step, once it has started (after the starting workspace's checks, when it
//! has them).

use super::clause_step::{self, clause_route, policy_clauses};
use super::manager_turn::dispatch_step;
use super::tx::Tx;
use crate::state::{LogEvent, PlanningStage, RunState};
use loopgate_protocol::subjects::Capability;

/// A run's first step: planning when the task asks for it; the whole goal when
/// `budget.goal_first` gives it (see [`goal_first`]); the goal's first clause when the clause
/// policy gives it (see `clause_step`); else its first decision.
pub(super) fn begin_steps(tx: &mut Tx) {
    if tx.record.task.plan {
        tx.record.state = RunState::Running;
        tx.record.planning.stage = Some(PlanningStage::Spec);
    }
    if let Some(of) = goal_first(tx) {
        dispatch_goal_step(tx, of);
        return;
    }
    match clause_step::first_step(&tx.record) {
        Some(step) => clause_step::dispatch_clause_step(tx, step),
        None => tx.continue_work(),
    }
}

/// With `budget.goal_first`, the goal's clause count when the whole goal is the first step:
/// the clause policy could give a step and the goal has more than one clause that asks for
/// something (one such clause is the goal already).
fn goal_first(tx: &Tx) -> Option<usize> {
    if !tx.record.task.budget.goal_first {
        return None;
    }
    let (asking, of) = policy_clauses(&tx.record)?;
    (asking > 1).then_some(of)
}

/// The goal as one step, checked against every criterion. It counts as no clause's try, so
/// after a failed audit the clause policy's first failing clause is the step (see
/// `step_retry::after_failure`).
fn dispatch_goal_step(tx: &mut Tx, of: usize) {
    if tx.record.state == RunState::Queued {
        tx.record.state = RunState::Running;
    }
    tx.record.streaks.step_retries = 0;
    let route = clause_route(&tx.record).unwrap_or(Capability::Cli);
    let goal = tx.record.contract.goal.clone();
    dispatch_step(tx, route, goal, None);
    // Logged in the step's round.
    tx.log(LogEvent::GoalStep { of: of as u32 });
}
