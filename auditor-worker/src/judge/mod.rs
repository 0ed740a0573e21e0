//! The judge model's part of an audit: its holistic opinion (this module: one call, one repair
//! call when the answer cannot be parsed, the whole thing bounded by the request's episode
//! time), the goal's clauses judged one question at a time (`clauses`, with the commands they
//! quote run for it: `clause_commands`; a derived check broken by its own text is set aside
//! for its clause: `check_text`) and when it is not asked at all (`deferral`). Its
//! opinion can only tighten verdicts.

pub(crate) mod check_text;
pub(crate) mod clause_commands;
mod clause_questions;
pub(crate) mod clauses;
pub(crate) mod deferral;
mod goal_calls;
mod opinion_parse;
pub(crate) mod prompt;
mod quotes;

use std::time::{Duration, Instant};

use loopgate_models::ChatClient;
use loopgate_protocol::usage::Usage;

use crate::judge::opinion_parse::{parse_audit_opinion, AuditOpinion};
use crate::judge::prompt::{judge_prompt, repair_prompt, system_prompt, JudgeInput};
use crate::judge_context::{ask, Asked, Question};
use crate::prompt_text::cap_chars;

/// Characters of the judge's reply kept in the report's `judgment`.
pub(crate) const MAX_JUDGMENT_CHARS: usize = 2000;

#[derive(Debug, Clone, Default)]
pub(crate) struct JudgeOutcome {
    pub(crate) opinion: Option<AuditOpinion>,
    /// The reply (capped) that the opinion was read from.
    pub(crate) judgment: Option<String>,
    /// Why there is no opinion, when there is none.
    pub(crate) gaps: Vec<String>,
    pub(crate) usage: Usage,
}

/// Ask the judge. Never fails: problems become gap lines and the audit stays mechanical.
pub(crate) async fn judge(
    client: &ChatClient,
    input: &JudgeInput<'_>,
    budget: Duration,
) -> JudgeOutcome {
    let model = client.profile().name.clone();
    let mut outcome = JudgeOutcome::default();
    let question = Question {
        system: system_prompt(),
        prompt: judge_prompt(input),
        repair: repair_prompt().to_string(),
        least_time: Duration::ZERO,
    };
    let read = |text: &str, attempt: usize| {
        let opinion = parse_audit_opinion(text);
        if opinion.is_none() {
            tracing::info!(model = %model, attempt, "auditor model answer unparseable");
        }
        Some((opinion?, cap_chars(text.trim(), MAX_JUDGMENT_CHARS)))
    };
    let deadline = Instant::now() + budget;
    let gap = match ask(client, question, deadline, &mut outcome.usage, read).await {
        Asked::Answer((opinion, judgment)) => {
            outcome.opinion = Some(opinion);
            outcome.judgment = Some(judgment);
            return outcome;
        }
        Asked::OutOfTime => {
            format!("auditor model '{model}' ran out of time; mechanical audit only")
        }
        Asked::Failed(err) => {
            tracing::warn!(model = %model, error = %err, "auditor model call failed");
            format!(
                "auditor model '{model}' call failed ({:?}); mechanical audit only",
                err.kind()
            )
        }
        Asked::NoReplyWithin(_) => format!(
            "auditor model '{model}' did not answer within {}s; mechanical audit only",
            budget.as_secs()
        ),
        Asked::Unreadable => format!(
            "auditor model '{model}' answer could not be parsed after a repair request; opinion \
             ignored"
        ),
    };
    outcome.gaps.push(gap);
    outcome
}
