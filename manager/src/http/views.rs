//! The public views of stored records: a `RunRecord` as the API's [`RunView`].

use axum::Json;
use loopgate_api::{rounds_text, standing_text, Checks, EvidenceView, GateView, RunView};
use loopgate_common::state::{Phase, RunRecord};
use serde::Serialize;

use crate::engine::now_ms;
use crate::http::run_actions::run_actions;

/// `value` as JSON with every object's keys sorted: the list answers (`GET /v1/runs`,
/// `.../rounds`) have always been built through a `serde_json::Value`, and keep those bytes.
pub(crate) fn with_sorted_keys<T: Serialize>(value: &T) -> Json<serde_json::Value> {
    Json(serde_json::to_value(value).unwrap_or_default())
}

/// The view of a stored run (every field filled).
pub(crate) fn run_view(r: &RunRecord) -> RunView {
    let (passing, total) = r.checks_passing();
    let counted_rounds = if r.planning.stage.is_some() {
        0
    } else {
        r.rounds_this_generation()
    };
    let gate = r.audit.last_gate.as_ref().map(GateView::from);
    let checks = Checks { passing, total };
    RunView {
        id: r.id.clone(),
        name: r.task.name.clone(),
        state: r.state,
        phase: r.phase.name().to_string(),
        generation: r.generation,
        round: r.round,
        max_rounds: Some(r.task.budget.max_rounds),
        counted_rounds: Some(counted_rounds),
        snapshot: Some(r.snapshot.clone()),
        base_snapshot: Some(r.base_snapshot.clone()),
        spec_hash: r.contract.spec_hash.clone(),
        goal: Some(r.contract.goal.clone()),
        progress: Some(r.progress()),
        planning: r.planning.stage.map(|p| p.as_str().to_string()),
        checks: Some(checks),
        rubric: r.audit.rubric.clone(),
        standing: standing_text(r.state, r.phase.name(), gate.as_ref(), Some(checks)),
        gate,
        verdicts: r
            .audit
            .last_verdicts
            .as_ref()
            .filter(|(_, s)| *s == r.snapshot)
            .map(|(v, _)| *v),
        evidence: r.audit.evidence.iter().map(EvidenceView::from).collect(),
        terminal_reason: r.terminal_reason.clone(),
        question: match &r.phase {
            Phase::WaitingForAnswer { question } => Some(question.clone()),
            _ => None,
        },
        task_state: r.task_state.clone(),
        usage: r.accounting.usage,
        total_tokens: Some(r.accounting.usage.total()),
        created_at: r.created_at,
        updated_at: r.updated_at,
        instructions: r.steering.instructions.clone(),
        paused_at: r.steering.pause.map(|p| p.since_ms),
        queued_since: matches!(r.phase, Phase::Executing { .. })
            .then_some(r.deadlines.queued_since_ms)
            .flatten(),
        origin: r.origin.clone(),
        episode_progress: match r.phase {
            Phase::Executing { round, .. } => r
                .episode_progress
                .iter()
                .filter(|p| p.round == round && p.generation == r.generation)
                .cloned()
                .collect(),
            _ => Vec::new(),
        },
        audit_progress: match r.phase {
            Phase::Auditing { round, purpose, .. } => r.audit_progress.clone().filter(|p| {
                p.round == round && p.purpose == purpose && p.generation == r.generation
            }),
            _ => None,
        },
        rounds: rounds_text(
            r.round,
            Some(counted_rounds),
            Some(r.task.budget.max_rounds),
        ),
        actions: run_actions(r, now_ms()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use loopgate_api::common_schemas::PhaseName;
    use utoipa::PartialSchema;

    /// List answers keep the sorted keys they always had (a guard against serde_json's
    /// `preserve_order` feature being switched on by some dependency).
    #[test]
    fn list_answers_have_sorted_keys() {
        let rounds = loopgate_api::RoundList {
            rounds: vec![loopgate_api::RoundView {
                generation: 1,
                round: 2,
                objective: "o".into(),
                base_snapshot: "b".into(),
                candidate: None,
                verdicts: None,
                gate_passed: None,
            }],
        };
        let text = serde_json::to_string(&with_sorted_keys(&rounds).0).unwrap();
        assert_eq!(
            text,
            r#"{"rounds":[{"base_snapshot":"b","candidate":null,"gate_passed":null,"generation":1,"objective":"o","round":2,"verdicts":null}]}"#
        );
    }

    /// The OpenAPI document lists exactly the phase names a view can carry.
    #[test]
    fn phase_names_are_documented() {
        let schema = serde_json::to_value(PhaseName::schema()).unwrap();
        let names = [
            "deciding",
            "executing",
            "auditing",
            "waiting_for_answer",
            "paused",
            "finished",
        ];
        assert_eq!(schema["enum"], serde_json::json!(names));
        let cases = [
            (Phase::Deciding { seq: 1 }, "deciding"),
            (
                Phase::WaitingForAnswer {
                    question: "q".into(),
                },
                "waiting_for_answer",
            ),
            (Phase::Finished, "finished"),
            (
                Phase::Paused {
                    held: loopgate_common::state::HeldStep::Decide,
                },
                "paused",
            ),
        ];
        for (phase, name) in cases {
            assert_eq!(phase.name(), name);
        }
    }
}
