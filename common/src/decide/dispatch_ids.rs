//! The ids a run's requests are sent under (`Nats-Msg-Id`, also the key a worker claims the
//! step by), derived from the record alone.

use loopgate_protocol::dispatch_id::{DispatchId, StepKey};
use loopgate_protocol::wire::{AuditPurpose, EpisodeRole};

use crate::state::{Phase, RunRecord};

/// The dedup id (`Nats-Msg-Id`) of the current round's exec request: also what a notice
/// scoped to that step names.
fn exec_dispatch_id(r: &RunRecord) -> String {
    DispatchId::exec(step_key(r)).into_string()
}

/// The dedup id of the current round's audit request of `purpose`.
pub(crate) fn audit_dispatch_id(r: &RunRecord, purpose: AuditPurpose) -> String {
    DispatchId::audit(step_key(r), purpose, r.decide_seq).into_string()
}

pub(crate) fn step_key(r: &RunRecord) -> StepKey<'_> {
    StepKey {
        run_id: &r.id,
        generation: r.generation,
        round: r.round,
    }
}

/// The role and dispatch id of the one episode a run waits for: its round's executor step, or
/// its audit. `None` in any other phase, and for a step of several attempts (each sibling has
/// its own id).
pub fn single_episode_in_flight(r: &RunRecord) -> Option<(EpisodeRole, String)> {
    match &r.phase {
        Phase::Executing { attempts, .. } if attempts.is_empty() => {
            Some((EpisodeRole::Executor, exec_dispatch_id(r)))
        }
        Phase::Auditing { purpose, .. } => {
            Some((EpisodeRole::Auditor, audit_dispatch_id(r, *purpose)))
        }
        _ => None,
    }
}
