//! The public JSON view of a run (`GET /v1/runs/{id}`).

use loopgate_common::gate::GateVerdict;
use loopgate_common::rubric::RubricStanding;
use loopgate_common::state::{Phase, RoleUsage, RunRecord};
use loopgate_common::verdict::{Evidence, Verdicts};
use serde::Serialize;

#[derive(Debug, Serialize)]
pub struct Checks {
    pub passing: u32,
    pub total: u32,
}

#[derive(Debug, Serialize)]
pub struct RunView {
    pub id: String,
    pub name: Option<String>,
    pub state: &'static str,
    pub phase: &'static str,
    pub generation: u32,
    pub round: u32,
    pub max_rounds: u32,
    /// Rounds that count against `max_rounds`: this generation's, after planning.
    pub counted_rounds: u32,
    pub snapshot: String,
    pub base_snapshot: String,
    pub spec_hash: String,
    pub goal: String,
    /// Progress as evidence: `acceptance 3/5 passing on snapshot abc123, rubric 7.9/8.5`.
    pub progress: String,
    /// `spec`, `contract` or `approval` while a planned contract is being built.
    pub planning: Option<&'static str>,
    pub checks: Checks,
    /// The rubric's latest score, when the contract has a rubric.
    pub rubric: Option<RubricStanding>,
    pub gate: Option<GateVerdict>,
    pub verdicts: Option<Verdicts>,
    /// Evidence on the current snapshot.
    pub evidence: Vec<Evidence>,
    pub terminal_reason: Option<String>,
    pub question: Option<String>,
    pub task_state: Option<String>,
    pub usage: RoleUsage,
    pub total_tokens: u64,
    pub created_at: i64,
    pub updated_at: i64,
}

fn phase_name(phase: &Phase) -> &'static str {
    match phase {
        Phase::Deciding { .. } => "deciding",
        Phase::Executing { .. } => "executing",
        Phase::Auditing { .. } => "auditing",
        Phase::WaitingForAnswer { .. } => "waiting_for_answer",
        Phase::Finished => "finished",
    }
}

impl RunView {
    pub fn from_record(r: &RunRecord) -> RunView {
        let (passing, total) = r.checks_passing();
        RunView {
            id: r.id.clone(),
            name: r.task.name.clone(),
            state: r.state.as_str(),
            phase: phase_name(&r.phase),
            generation: r.generation,
            round: r.round,
            max_rounds: r.task.budget.max_rounds,
            counted_rounds: if r.planning.stage.is_some() {
                0
            } else {
                r.rounds_this_generation()
            },
            snapshot: r.snapshot.clone(),
            base_snapshot: r.base_snapshot.clone(),
            spec_hash: r.contract.spec_hash.clone(),
            goal: r.contract.goal.clone(),
            progress: r.progress(),
            planning: r.planning.stage.map(|p| p.as_str()),
            checks: Checks { passing, total },
            rubric: r.audit.rubric.clone(),
            gate: r.audit.last_gate.clone(),
            verdicts: r
                .audit
                .last_verdicts
                .as_ref()
                .filter(|(_, s)| *s == r.snapshot)
                .map(|(v, _)| *v),
            evidence: r.audit.evidence.clone(),
            terminal_reason: r.terminal_reason.clone(),
            question: match &r.phase {
                Phase::WaitingForAnswer { question } => Some(question.clone()),
                _ => None,
            },
            task_state: r.task_state.clone(),
            usage: r.accounting.usage,
            total_tokens: r.accounting.usage.total(),
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}
