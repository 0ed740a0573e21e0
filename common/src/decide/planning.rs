//! Planning phases of a `plan = true` run, before round 1: a planner episode writes `spec.md`
//! (write scope `spec.md` only, enforced by the audit), a proposer episode writes
//! `contract.toml`, which is validated against the task, optionally approved by a person, and
//! frozen by its spec hash. Failed attempts are retried with the reason, and after
//! `max_failed_rounds` in a row a person is asked.

use super::transition::Decision;
use super::tx::Tx;
use crate::contract_proposal::{contract_from_proposal, PROPOSAL_FILE, SPEC_FILE};
use crate::state::{ContractSource, LogEvent, PlanningStage, RunRecord, RunState};
use loopgate_protocol::contract::Contract;
use loopgate_protocol::subjects::Capability;
use loopgate_protocol::verdict::{CheckVerdict, Integrity};
use loopgate_protocol::wire::{AuditReport, EpisodeKind, ExecFeedback, Increment};

/// What a person sees when the proposed contract waits for approval.
pub fn approval_question(run_id: &str, contract: &Contract) -> String {
    format!(
        "The proposed contract {} ({} criteria{}) needs approval: `loopgate contract {run_id}` \
         shows it; `loopgate approve {run_id}` accepts it, `loopgate approve {run_id} --edit FILE` \
         replaces it.",
        contract.short_hash(),
        contract.criteria.len(),
        if contract.rubric.is_some() {
            ", with a rubric"
        } else {
            ""
        }
    )
}

fn planner_increment(record: &RunRecord) -> Increment {
    let mut instructions = format!(
        "Write `{SPEC_FILE}` for this goal: the product context (who uses it, what it must do, \
         inputs and outputs, edge cases) and a short high-level design (files, functions, \
         commands). Do not write code or tests: `{SPEC_FILE}` is the only file you may create or \
         change; any other change gets the attempt rejected. Then call finish."
    );
    append_feedback(&mut instructions, record);
    Increment {
        objective: format!("Plan: write {SPEC_FILE} (product context and high-level design only)"),
        instructions,
        acceptance_checks: Vec::new(),
        write_scope: vec![SPEC_FILE.to_string()],
        goal_clauses: Vec::new(),
    }
}

fn proposer_increment(record: &RunRecord) -> Increment {
    let rubric_hint = if record.task.roles.auditor.is_some() && record.task.rubric.is_none() {
        "\nFor qualities no command can check, you may add `[[rubric]]` dimensions \
         (`name`, `weight`, `description`) and `rubric_threshold` (0-10); a judge scores them."
    } else {
        ""
    };
    let mut instructions = format!(
        "Read `{SPEC_FILE}`, then write the acceptance contract for this goal into \
         `{PROPOSAL_FILE}`. The file must be valid TOML made of entries in this shape, with \
         every <...> replaced by your own text for this goal:\n\n\
         [[acceptance]]\n\
         id = \"<short-id>\"\n\
         description = \"<what must be true>\"\n\
         check = '<one-line shell command that exits 0 only when it is true>'\n\
         blocking = true\n\n\
         Rules: one [[acceptance]] entry per testable requirement of the goal; a check usually \
         runs the program and compares its output, e.g. with test \"$(...)\" = \"...\"; keep \
         each check on one line inside single quotes; a requirement no command can check gets \
         no `check` and `blocking = false`; at least one entry must be blocking. Files the \
         work must not change (e.g. tests) go in a first line `protected_paths = [\"tests/\"]`. \
         Change no file other than `{PROPOSAL_FILE}`, then call finish.{rubric_hint}"
    );
    instructions.push_str(&clause_hint(record));
    append_feedback(&mut instructions, record);
    Increment {
        objective: format!("Plan: write the acceptance contract {PROPOSAL_FILE} from {SPEC_FILE}"),
        instructions,
        acceptance_checks: Vec::new(),
        write_scope: vec![PROPOSAL_FILE.to_string()],
        goal_clauses: Vec::new(),
    }
}

/// With derivation on, the proposer is shown the goal's clauses: an entry that quotes one
/// (`clause = "..."`) covers it, and a clause no entry covers is judged by the auditor's model.
fn clause_hint(record: &RunRecord) -> String {
    use std::fmt::Write as _;
    if !crate::goal::criteria::derives(&record.task) {
        return String::new();
    }
    let clauses = crate::goal::words::goal_clauses(&record.task.goal);
    if clauses.is_empty() {
        return String::new();
    }
    let mut hint = String::from("\n\nThe goal's clauses, each a requirement the work must meet:\n");
    for (i, clause) in clauses.iter().enumerate() {
        let _ = writeln!(hint, "{}. \"{clause}\"", i + 1);
    }
    hint.push_str(
        "For each clause you can check with a command, add `clause = \"<the clause, copied \
         exactly>\"` to the [[acceptance]] entry that checks it. A check must run cleanly on \
         the workspace as it is now (fail there, never error on its own syntax). Clauses no \
         entry quotes are judged by the auditor, one by one.",
    );
    hint
}

fn append_feedback(instructions: &mut String, record: &RunRecord) {
    if let Some(last) = record.feedback.last() {
        instructions.push_str("\n\nThe previous attempt was not accepted: ");
        instructions.push_str(last);
    }
}

impl Tx {
    /// Dispatch the planning episode for the current stage (`Spec` or `Contract`).
    pub(super) fn dispatch_planning(&mut self) {
        match self.record.planning.stage {
            Some(PlanningStage::Spec) => {
                let increment = planner_increment(&self.record);
                self.dispatch_exec(
                    Capability::Cli,
                    increment,
                    EpisodeKind::Plan,
                    ExecFeedback::default(),
                );
            }
            Some(PlanningStage::Contract) => {
                let increment = proposer_increment(&self.record);
                self.dispatch_exec(
                    Capability::Cli,
                    increment,
                    EpisodeKind::Propose,
                    ExecFeedback::default(),
                );
            }
            Some(PlanningStage::Approval) => {
                let question = self
                    .record
                    .planning
                    .proposed_contract
                    .as_ref()
                    .map(|c| approval_question(&self.record.id, c))
                    .unwrap_or_else(|| "The proposed contract needs approval.".to_string());
                self.ask(question);
            }
            None => self.request_decision(),
        }
    }

    /// Freeze `contract` by its hash and start the work: the manager takes round 1 next, and
    /// `max_rounds` counts from here.
    pub(super) fn freeze_contract(&mut self, contract: Contract, source: ContractSource) {
        self.log(LogEvent::ContractFrozen {
            spec_hash: contract.spec_hash.clone(),
            criteria: contract.criteria.len() as u32,
            source,
        });
        self.feedback(format!(
            "The contract was planned and frozen as spec {} ({} criteria); it cannot change for \
             the rest of the run.",
            contract.short_hash(),
            contract.criteria.len()
        ));
        let r = &mut self.record;
        // Planning feedback (rejected attempts, a person's guidance to the proposer) is not
        // about the work: the manager starts from the frozen contract alone.
        r.feedback
            .retain(|line| line.starts_with("The contract was planned and frozen"));
        r.contract = contract;
        r.planning.stage = None;
        r.planning.proposed_contract = None;
        r.streaks.failed_rounds = 0;
        r.accounting.generation_start_round = r.round;
        if r.state == RunState::WaitingForInput {
            r.state = RunState::Running;
        }
        self.request_decision();
    }
}

/// A planning attempt that did not produce what its stage needs: record why and try again.
fn reject(tx: &mut Tx, report: &AuditReport, reason: String) {
    tx.log(LogEvent::CandidateRejected {
        candidate: report.snapshot.clone(),
        reason: reason.clone(),
    });
    tx.feedback(reason.clone());
    tx.continue_after_failure(&reason);
}

/// The audit of a planning episode's candidate.
pub(super) fn on_plan_audit(tx: &mut Tx, report: &AuditReport) {
    let stage = tx.record.planning.stage;
    if report.verdicts.integrity != Integrity::Clean {
        let reason = format!(
            "the planning step changed files it may not change ({})",
            report.gaps.join("; ")
        );
        return reject(tx, report, reason);
    }
    match stage {
        Some(PlanningStage::Spec) => {
            if !report.changed_paths.iter().any(|p| p == SPEC_FILE) {
                return reject(tx, report, format!("{SPEC_FILE} was not written"));
            }
            tx.record.snapshot = report.snapshot.clone();
            tx.record.streaks.failed_rounds = 0;
            tx.log(LogEvent::SpecWritten {
                snapshot: report.snapshot.clone(),
            });
            tx.record.planning.stage = Some(PlanningStage::Contract);
            tx.dispatch_planning();
        }
        Some(PlanningStage::Contract) => {
            let Some(text) = report.proposal.as_deref() else {
                return reject(tx, report, format!("{PROPOSAL_FILE} was not written"));
            };
            let contract = match contract_from_proposal(text, &tx.record.task) {
                Ok(contract) => contract,
                Err(err) => {
                    let error = format!("{PROPOSAL_FILE} is not a valid contract: {err}");
                    tx.log(LogEvent::ContractInvalid {
                        error: error.clone(),
                    });
                    return reject(tx, report, error);
                }
            };
            if let Some(why) = already_satisfied(&contract, report) {
                tx.log(LogEvent::ContractInvalid { error: why.clone() });
                return reject(tx, report, why);
            }
            let broken =
                crate::goal::derived_checks::broken_on_start(&contract.criteria, &report.evidence);
            if !broken.is_empty() {
                let why = format!(
                    "{PROPOSAL_FILE} has derived checks that error out on their own before any \
                     work ({}): a check must run cleanly on the starting workspace, failing \
                     until the work is done",
                    broken.join("; ")
                );
                tx.log(LogEvent::ContractInvalid { error: why.clone() });
                return reject(tx, report, why);
            }
            tx.record.snapshot = report.snapshot.clone();
            let awaiting_approval = tx.record.task.require_approval;
            tx.log(LogEvent::ContractProposed {
                spec_hash: contract.spec_hash.clone(),
                criteria: contract.criteria.len() as u32,
                rubric: contract.rubric.is_some(),
                awaiting_approval,
            });
            if awaiting_approval {
                tx.record.planning.stage = Some(PlanningStage::Approval);
                tx.record.planning.proposed_contract = Some(contract);
                tx.dispatch_planning();
            } else {
                tx.freeze_contract(contract, ContractSource::Proposed);
            }
        }
        // A plan audit arriving outside planning was already filtered by phase matching.
        Some(PlanningStage::Approval) | None => {}
    }
}

/// A contract whose blocking checks all pass before any work is done tests nothing: the
/// auditor ran the proposal's checks on the proposal snapshot (evidence in the plan report).
/// `None` when at least one blocking check fails there (as it should), or none was run.
fn already_satisfied(contract: &Contract, report: &AuditReport) -> Option<String> {
    let blocking: Vec<&str> = contract
        .blocking()
        .map(|c| c.id.as_str())
        .filter(|id| report.evidence.iter().any(|e| e.check_id == *id))
        .collect();
    let passes = |id: &str| {
        report
            .evidence
            .iter()
            .any(|e| e.check_id == id && e.verdict == CheckVerdict::Pass)
    };
    if blocking.is_empty() || !blocking.iter().all(|id| passes(id)) {
        return None;
    }
    Some(format!(
        "{PROPOSAL_FILE} is already satisfied before any work ({} pass on the planning \
         snapshot): its checks must test the goal itself, so at least one blocking check has to \
         fail until the work is done",
        blocking.join(", ")
    ))
}

/// `loopgate approve RUN [--edit FILE]`: freeze the proposed contract, or the person's edited
/// one (already validated against the task). Refused unless a proposal waits for approval:
/// the contract never changes once frozen.
pub(super) fn on_approve(record: &RunRecord, edited: Option<&Contract>, now: i64) -> Decision {
    if record.state.is_terminal() {
        return Decision::Ignore(format!("run is {}", record.state.as_str()));
    }
    if record.planning.stage != Some(PlanningStage::Approval) {
        let why = match record.planning.stage {
            Some(stage) => format!(
                "no contract waits for approval yet (planning stage: {})",
                stage.as_str()
            ),
            None => format!(
                "the contract is frozen (spec {}) and cannot change mid-run",
                record.contract.short_hash()
            ),
        };
        return Decision::Ignore(why);
    }
    let Some(proposed) = record.planning.proposed_contract.clone() else {
        return Decision::Ignore("no proposed contract is stored".to_string());
    };
    let mut tx = Tx::new(record, now);
    let (contract, source) = match edited {
        Some(contract) if *contract != proposed => (contract.clone(), ContractSource::Edited),
        _ => (proposed, ContractSource::Approved),
    };
    tx.log(LogEvent::Answered {
        text: format!(
            "contract {} {}",
            contract.short_hash(),
            match source {
                ContractSource::Edited => "replaced by an edited contract and approved",
                _ => "approved",
            }
        ),
    });
    tx.freeze_contract(contract, source);
    tx.finish()
}

/// The contract an edited file makes for this run (validated like a proposal).
pub fn edited_contract(record: &RunRecord, text: &str) -> Result<Contract, crate::task::TaskError> {
    contract_from_proposal(text, &record.task)
}
