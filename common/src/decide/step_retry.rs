//! A failed step tried again without a manager decision.
//!
//! After a round whose audit failed, the next executor already sees that audit's failing
//! checks with their output (`ExecFeedback`); a manager decision at that point adds mostly
//! time (a small manager tends to repeat the failed instruction, and the retry it delays is
//! the round the evidence is for). So the step goes straight back to an executor, at most
//! `budget.step_retries` times in a row; the manager decides again after that, and at once
//! when retrying could not help: the round
//! changed nothing or reproduced an audited snapshot, its candidate was rejected, no check
//! failed (the gate is closed for another reason), the run stagnates (the manager must be
//! told its approach did not work), an operator instruction came in during the round (the
//! manager must read it), or the round budget is spent.

use super::clause_step::{
    clause_step, dispatch_clause_step, last_clause_settled, last_round_was_clause_step,
    note_clause_try, ClauseStep,
};
use super::manager_turn::dispatch_step;
use super::progress::{escalate_when_stagnant, stagnation_due};
use super::tx::Tx;
use crate::state::{LogEvent, RunRecord};
use loopgate_protocol::subjects::Capability;
use loopgate_protocol::verdict::Integrity;

/// The step a failed round goes on with, when it is tried again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Retry {
    pub capability: Capability,
    /// The step as the failed round ran it.
    pub step: String,
    pub from_round: u32,
}

/// The failed step of the current round to try again without a manager decision, if the run
/// tries it again (see the module comment for when it does not).
pub(super) fn step_to_retry(record: &RunRecord) -> Option<Retry> {
    let budget = &record.task.budget;
    if record.streaks.step_retries >= budget.step_retries
        || record.planning.stage.is_some()
        || record.rounds_this_generation() >= budget.max_rounds
        || stagnation_due(record)
    {
        return None;
    }
    let last = record.history.last().filter(|h| h.round == record.round)?;
    let instructed = record
        .steering
        .instructions
        .iter()
        .any(|i| i.generation == record.generation && i.round >= last.round);
    let candidate = last.candidate.as_ref()?;
    let changed = last.base.as_ref() != Some(candidate) && last.reused_from.is_none();
    let rejected = last
        .verdicts
        .is_none_or(|v| v.integrity == Integrity::Violation);
    if !changed || rejected || instructed || last.failing.is_empty() {
        return None;
    }
    Some(Retry {
        capability: last.capability.unwrap_or(Capability::Cli),
        step: last.objective.clone(),
        from_round: last.round,
    })
}

/// Dispatch `retry`: the same step, with the evidence of the audit that failed it (focused on
/// `clause` when it retries a clause step: see [`dispatch_step`]).
pub(super) fn retry_step(tx: &mut Tx, retry: Retry, clause: Option<&ClauseStep>) {
    tx.record.streaks.step_retries += 1;
    tx.log(LogEvent::StepRetried {
        from_round: retry.from_round,
        step: retry.step.clone(),
    });
    dispatch_step(
        tx,
        retry.capability,
        retry.step,
        clause.and_then(ClauseStep::focus),
    );
}

/// What a failed round goes on with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum AfterFailure {
    /// The same step again; with the clause it tries again when it was a clause step.
    Retry(Retry, Option<ClauseStep>),
    /// A goal clause chosen by the clause policy.
    Clause(ClauseStep),
    Manager,
}

/// The step after a failed round: a clause step's own clause failing again is tried again
/// (as a step retry when one is allowed); a clause step whose clause passes, or has had its
/// tries, gives way to the next clause or the manager and is never retried; after a manager's
/// step (or the goal as the first step) the clause policy goes first, then a retry.
pub(super) fn after_failure(record: &RunRecord) -> AfterFailure {
    let retry = step_to_retry(record);
    let clause = clause_step(record);
    let was_clause = last_round_was_clause_step(record);
    let same_clause = |c: &ClauseStep| {
        record
            .streaks
            .clause_tries
            .is_some_and(|t| t.clause as usize == c.clause)
    };
    match (clause, retry) {
        (Some(c), Some(r)) if was_clause && same_clause(&c) => AfterFailure::Retry(r, Some(c)),
        (Some(c), _) => AfterFailure::Clause(c),
        (None, Some(r)) if !(was_clause && last_clause_settled(record)) => {
            AfterFailure::Retry(r, None)
        }
        (None, _) => AfterFailure::Manager,
    }
}

/// A round whose audit failed the gate: the failure is counted and, while the run may go on,
/// the step is tried again (see [`step_to_retry`]), the next goal clause is the step (see
/// `clause_step`) or the manager decides; a stagnating run escalates.
pub(super) fn go_on_after_failed_round(tx: &mut Tx, reasons: &str) {
    let level = tx.record.escalation_level;
    let next = after_failure(&tx.record);
    if tx.count_failure(reasons) {
        match next {
            AfterFailure::Retry(retry, clause) => {
                if let Some(clause) = &clause {
                    note_clause_try(tx, clause);
                }
                retry_step(tx, retry, clause.as_ref());
            }
            AfterFailure::Clause(step) => dispatch_clause_step(tx, step),
            AfterFailure::Manager => tx.continue_work(),
        }
    }
    let ladder_stepped = tx.record.escalation_level != level;
    escalate_when_stagnant(tx, ladder_stepped);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::start_run;
    use crate::state::{Instruction, RoundSummary};
    use crate::task::parse_task_toml;
    use loopgate_protocol::verdict::{AuditStatus, ContractVerdict, Verdicts};

    fn verdicts(integrity: Integrity) -> Option<Verdicts> {
        Some(Verdicts {
            status: AuditStatus::Incomplete,
            integrity,
            contract: ContractVerdict::Aligned,
        })
    }

    /// A run at round 2 whose round 2 (`gui` when `gui`) changed the workspace and failed
    /// check `prints`.
    fn failed_round(budget: &str) -> RunRecord {
        let toml = format!(
            "goal = \"Create hello.py\"\n[[acceptance]]\nid = \"prints\"\ncheck = \
             \"python3 hello.py\"\n[budget]\nmax_rounds = 5\n{budget}"
        );
        let mut r = start_run("r", parse_task_toml(&toml).unwrap(), "base", 0).record;
        r.round = 2;
        r.history.push(RoundSummary {
            round: 2,
            objective: "write hello.py".into(),
            exec_summary: "wrote it".into(),
            candidate: Some("c2".into()),
            verdicts: verdicts(Integrity::Clean),
            gaps: Vec::new(),
            failing: vec![("prints".into(), "NameError".into())],
            passing: Vec::new(),
            base: Some("c1".into()),
            changed_paths: vec!["hello.py".into()],
            added_paths: Vec::new(),
            checked: 1,
            reused_from: None,
            capability: None,
            retried: false,
            set_aside: None,
        });
        r
    }

    fn instruction(generation: u32, round: u32) -> Instruction {
        Instruction {
            at: 0,
            generation,
            round,
            text: "use argparse".into(),
        }
    }

    #[test]
    fn a_failed_step_is_retried_only_when_retrying_can_help() {
        type Edit = fn(&mut RunRecord);
        let cases: [(&str, &str, Edit, bool); 14] = [
            ("a changed, failing round", "", |_| {}, true),
            ("retries off", "step_retries = 0", |_| {}, false),
            (
                "the retries in a row are spent",
                "",
                |r| r.streaks.step_retries = 1,
                false,
            ),
            (
                "more retries allowed",
                "step_retries = 2",
                |r| r.streaks.step_retries = 1,
                true,
            ),
            (
                "the round changed nothing",
                "",
                |r| r.history[0].base = Some("c2".into()),
                false,
            ),
            (
                "the candidate was audited before",
                "",
                |r| r.history[0].reused_from = Some(1),
                false,
            ),
            (
                "the candidate was rejected",
                "",
                |r| r.history[0].verdicts = verdicts(Integrity::Violation),
                false,
            ),
            (
                "no check failed",
                "",
                |r| r.history[0].failing.clear(),
                false,
            ),
            (
                "the executor froze nothing",
                "",
                |r| r.history[0].candidate = None,
                false,
            ),
            (
                "stagnation escalates this round",
                "stagnation_rounds = 2",
                |r| r.streaks.stagnant_rounds = 2,
                false,
            ),
            ("the round budget is spent", "", |r| r.round = 5, false),
            (
                "an operator instruction came in during the round",
                "",
                |r| r.steering.instructions.push(instruction(1, 2)),
                false,
            ),
            (
                "the manager read the instruction before the round",
                "",
                |r| r.steering.instructions.push(instruction(1, 1)),
                true,
            ),
            (
                "the summary is of an earlier round",
                "",
                |r| r.round = 3,
                false,
            ),
        ];
        for (name, budget, edit, retried) in cases {
            let mut r = failed_round(budget);
            edit(&mut r);
            assert_eq!(step_to_retry(&r).is_some(), retried, "{name}");
        }
    }

    #[test]
    fn a_retry_keeps_the_rounds_step_and_capability() {
        let mut r = failed_round("");
        r.history[0].capability = Some(Capability::Gui);
        assert_eq!(
            step_to_retry(&r),
            Some(Retry {
                capability: Capability::Gui,
                step: "write hello.py".into(),
                from_round: 2,
            })
        );
        // Records stored before the capability was kept ran `cli` steps.
        r.history[0].capability = None;
        assert_eq!(
            step_to_retry(&r).map(|s| s.capability),
            Some(Capability::Cli)
        );
    }
}
