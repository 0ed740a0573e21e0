//! Which [`RunState`] a run may be in for each [`Phase`]: the two overlap, and a record where
//! they disagree is never stored (`decide` refuses the transition, see
//! `Decision::Refused`).
//!
//! The rules, from every transition in `decide`:
//! - `queued` only while the run waits for an admission slot (`admission`) or its first
//!   decision is pending (`deciding`): a manager reply, a planned start, an answer and a resume
//!   all make the run `running` before anything is dispatched;
//! - `running` while the run waits for the manager, an executor or an auditor (`deciding`,
//!   `executing`, `auditing`);
//! - `paused` while the step in flight finishes (`deciding`, `executing`, `auditing`) and once
//!   it has, holding the next step (`paused`); only a paused run is in phase `paused`;
//! - `waiting_for_input` exactly while a question waits for its answer (`waiting_for_answer`);
//! - a terminal state exactly when the generation is `finished`.

use super::{Phase, RunRecord, RunState};

/// A record whose state and phase disagree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "run {run_id} is `{}` in phase `{phase}`, but a `{}` run can only be {}",
    state.as_str(),
    state.as_str(),
    either(phases_allowed(*state))
)]
pub struct InconsistentRecord {
    pub run_id: String,
    pub state: RunState,
    /// The phase's name (see [`Phase::name`]).
    pub phase: &'static str,
}

/// The phases (by [`Phase::name`]) a run in `state` may be in.
pub fn phases_allowed(state: RunState) -> &'static [&'static str] {
    match state {
        RunState::Queued => &["deciding", "admission"],
        RunState::Running => &["deciding", "executing", "auditing"],
        RunState::Paused => &["deciding", "executing", "auditing", "paused"],
        RunState::WaitingForInput => &["waiting_for_answer"],
        RunState::Completed
        | RunState::Blocked
        | RunState::BudgetExhausted
        | RunState::Cancelled
        | RunState::Failed => &["finished"],
    }
}

/// `a`, `a or b`, `a, b or c`.
fn either(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// Whether a run in `state` may be in `phase`.
pub fn state_agrees_with_phase(state: RunState, phase: &Phase) -> bool {
    phases_allowed(state).contains(&phase.name())
}

impl RunRecord {
    /// `Ok` when the record's state agrees with its phase.
    pub fn check_consistency(&self) -> Result<(), InconsistentRecord> {
        if state_agrees_with_phase(self.state, &self.phase) {
            return Ok(());
        }
        Err(InconsistentRecord {
            run_id: self.id.clone(),
            state: self.state,
            phase: self.phase.name(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopgate_protocol::subjects::Capability;
    use loopgate_protocol::wire::{AuditPurpose, Increment};

    fn phases() -> [Phase; 7] {
        [
            Phase::Deciding { seq: 3 },
            Phase::Executing {
                attempts: Vec::new(),
                round: 1,
                capability: Capability::Cli,
                increment: Increment {
                    objective: "o".into(),
                    instructions: "i".into(),
                    acceptance_checks: vec![],
                    write_scope: vec![],
                    goal_clauses: vec![],
                },
            },
            Phase::Auditing {
                round: 1,
                purpose: AuditPurpose::Round,
                candidate: "c".into(),
                objective: "o".into(),
                write_scope: vec![],
                checks_only: false,
            },
            Phase::WaitingForAnswer {
                question: "q?".into(),
            },
            Phase::Finished,
            Phase::Paused {
                held: crate::state::HeldStep::Decide,
            },
            Phase::Admission,
        ]
    }

    #[test]
    fn every_state_phase_combination() {
        use RunState::*;
        // Columns: deciding, executing, auditing, waiting_for_answer, finished, paused,
        // admission.
        let table: [(RunState, [bool; 7]); 9] = [
            (Queued, [true, false, false, false, false, false, true]),
            (Running, [true, true, true, false, false, false, false]),
            (Paused, [true, true, true, false, false, true, false]),
            (
                WaitingForInput,
                [false, false, false, true, false, false, false],
            ),
            (Completed, [false, false, false, false, true, false, false]),
            (Blocked, [false, false, false, false, true, false, false]),
            (
                BudgetExhausted,
                [false, false, false, false, true, false, false],
            ),
            (Cancelled, [false, false, false, false, true, false, false]),
            (Failed, [false, false, false, false, true, false, false]),
        ];
        assert_eq!(
            table.map(|(s, _)| s),
            RunState::ALL,
            "every state, in order"
        );
        for (state, legal) in table {
            for (phase, want) in phases().iter().zip(legal) {
                assert_eq!(
                    state_agrees_with_phase(state, phase),
                    want,
                    "{} / {}",
                    state.as_str(),
                    phase.name()
                );
            }
        }
    }

    #[test]
    fn phase_names_are_the_stored_tags() {
        for phase in phases() {
            let json = serde_json::to_value(&phase).unwrap();
            assert_eq!(json["type"], phase.name());
        }
    }

    #[test]
    fn the_error_names_the_run_the_pair_and_what_is_allowed() {
        let err = InconsistentRecord {
            run_id: "r1".into(),
            state: RunState::Running,
            phase: "finished",
        };
        assert_eq!(
            err.to_string(),
            "run r1 is `running` in phase `finished`, but a `running` run can only be \
             deciding, executing or auditing"
        );
    }
}
