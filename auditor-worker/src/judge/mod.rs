//! The optional LLM judgment: one call, one repair call when the answer cannot be parsed, the
//! whole thing bounded by the request's episode time. Its opinion can only tighten verdicts,
//! so it is not asked while a blocking check fails (see `deferral`).

pub(crate) mod clause_commands;
pub(crate) mod clause_questions;
pub(crate) mod clauses;
pub(crate) mod deferral;
pub(crate) mod goal_calls;
pub(crate) mod opinion_parse;
pub(crate) mod prompt;

use std::time::{Duration, Instant};

use crate::judge::opinion_parse::{parse_audit_opinion, AuditOpinion};
use loopgate_models::{ChatClient, ChatMessage, ChatRequest};
use loopgate_protocol::usage::Usage;

use crate::judge::prompt::{judge_prompt, JudgeInput, REPAIR_PROMPT, SYSTEM};

/// Characters of the judge's reply kept in the report's `judgment`.
pub(crate) const MAX_JUDGMENT_CHARS: usize = 2000;

#[derive(Debug, Clone, Default)]
pub(crate) struct JudgeOutcome {
    pub opinion: Option<AuditOpinion>,
    /// The reply (capped) that the opinion was read from.
    pub judgment: Option<String>,
    /// Why there is no opinion, when there is none.
    pub gaps: Vec<String>,
    pub usage: Usage,
}

fn cap_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// Ask the judge. Never fails: problems become gap lines and the audit stays mechanical.
pub(crate) async fn judge(
    client: &ChatClient,
    input: &JudgeInput<'_>,
    budget: Duration,
) -> JudgeOutcome {
    let deadline = Instant::now() + budget;
    let model = client.profile().name.clone();
    let mut outcome = JudgeOutcome::default();
    let mut messages = vec![
        ChatMessage::system(SYSTEM),
        ChatMessage::user(judge_prompt(input)),
    ];
    for attempt in 0..2 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            outcome.gaps.push(format!(
                "auditor model '{model}' ran out of time; mechanical audit only"
            ));
            return outcome;
        }
        let request = ChatRequest::new(messages.clone());
        let reply = match tokio::time::timeout(left, client.chat(&request)).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(err)) => {
                tracing::warn!(model = %model, error = %err, "auditor model call failed");
                outcome.gaps.push(format!(
                    "auditor model '{model}' call failed ({:?}); mechanical audit only",
                    err.kind()
                ));
                return outcome;
            }
            Err(_) => {
                outcome.gaps.push(format!(
                    "auditor model '{model}' did not answer within {}s; mechanical audit only",
                    budget.as_secs()
                ));
                return outcome;
            }
        };
        outcome.usage.add(reply.usage);
        let text = reply.content.unwrap_or_default();
        if let Some(opinion) = parse_audit_opinion(&text) {
            outcome.opinion = Some(opinion);
            outcome.judgment = Some(cap_chars(text.trim(), MAX_JUDGMENT_CHARS));
            return outcome;
        }
        tracing::info!(model = %model, attempt, "auditor model answer unparseable");
        messages.push(ChatMessage::assistant_text(text));
        messages.push(ChatMessage::user(REPAIR_PROMPT));
    }
    outcome.gaps.push(format!(
        "auditor model '{model}' answer could not be parsed after a repair request; opinion ignored"
    ));
    outcome
}
