//! A run's first step, once it has started (after the starting workspace's checks, when it
//! has them).

use super::clause_step;
use super::tx::Tx;
use crate::state::{PlanningStage, RunState};

/// A run's first step: planning when the task asks for it, the goal's first clause when the
/// clause policy gives it (see `clause_step`), else its first decision.
pub(super) fn begin_steps(tx: &mut Tx) {
    if tx.record.task.plan {
        tx.record.state = RunState::Running;
        tx.record.planning.stage = Some(PlanningStage::Spec);
    }
    match clause_step::first_step(&tx.record) {
        Some(step) => clause_step::dispatch_clause_step(tx, step),
        None => tx.continue_work(),
    }
}
