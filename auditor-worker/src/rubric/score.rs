//! The rubric judgment of one audit: excerpts of the changed text files read from the
//! materialized candidate, one call to the auditor's judge model, one repair call when its reply
//! holds no score, all within the audit's remaining episode time. It never fails: without a
//! score the verdict says why and its evidence is inconclusive.

use std::time::Instant;

use loopgate_models::ChatClient;
use loopgate_protocol::contract::RUBRIC_EVIDENCE_ID;
use loopgate_protocol::rubric::{Rubric, RubricVerdict};
use loopgate_protocol::usage::Usage;
use loopgate_protocol::verdict::Evidence;

use crate::evidence::{unix_millis, EvidenceWrites};
use crate::judge_context::{ask, Asked, JudgeContext, JudgeModel, Question};
use crate::prompt_text::files::changed_file_excerpts;
use crate::rubric::prompt::{
    rubric_prompt, rubric_repair_prompt, rubric_system_prompt, RubricInput,
};
use crate::rubric::verdict::{rubric_evidence, unscored, verdict_from_reply};

/// What the rubric judgment adds to an audit.
#[derive(Debug, Clone)]
pub(crate) struct RubricFindings {
    pub(crate) verdict: RubricVerdict,
    /// The `rubric` evidence record, bound to the candidate.
    pub(crate) evidence: Evidence,
    pub(crate) gaps: Vec<String>,
    pub(crate) usage: Usage,
}

/// The judge's answer: the verdict, every reply it gave (for the evidence log) and the tokens.
#[derive(Debug, Clone)]
struct RubricJudgement {
    verdict: RubricVerdict,
    replies: Vec<String>,
    usage: Usage,
}

/// Score the candidate against the contract's rubric with the request's auditor model; the
/// judge's replies go to `outputs` as the rubric evidence's log.
pub(crate) async fn rubric_findings(
    cx: &JudgeContext<'_>,
    rubric: &Rubric,
    evidence: &[Evidence],
    outputs: &EvidenceWrites,
) -> RubricFindings {
    let started = Instant::now();
    let judgement = match cx.model {
        JudgeModel::NoneNamed => {
            no_judge(rubric, "the run has no auditor model to score the rubric")
        }
        JudgeModel::NotConfigured(name) => no_judge(
            rubric,
            format!("auditor model '{name}' not configured here"),
        ),
        JudgeModel::Ready(client) => {
            let files = changed_file_excerpts(cx.workspace, cx.changes).await;
            let prompt = rubric_prompt(&RubricInput {
                contract: &cx.req.contract,
                rubric,
                changes: cx.changes,
                evidence,
                files: &files,
            });
            judge_rubric(client, prompt, rubric, cx.deadline).await
        }
    };
    let mut gaps = Vec::new();
    let log_digest = if judgement.replies.is_empty() {
        None
    } else {
        let log = judgement.replies.join("\n\n----- next reply -----\n\n");
        outputs.queue(
            &format!("check '{RUBRIC_EVIDENCE_ID}'"),
            log.as_bytes(),
            &mut gaps,
        )
    };
    let verdict = judgement.verdict;
    tracing::info!(run_id = %cx.req.run_id, summary = %verdict.summary(), "rubric judged");
    if !verdict.passed() {
        gaps.push(verdict.summary());
    }
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    RubricFindings {
        evidence: rubric_evidence(
            &verdict,
            &cx.req.candidate_snapshot,
            unix_millis(),
            duration_ms,
            log_digest,
        ),
        verdict,
        gaps,
        usage: judgement.usage,
    }
}

fn no_judge(rubric: &Rubric, why: impl Into<String>) -> RubricJudgement {
    RubricJudgement {
        verdict: unscored(rubric, why),
        replies: Vec::new(),
        usage: Usage::default(),
    }
}

/// Ask `client` for the rubric scores before `deadline`. Never fails: without a score, the
/// verdict says why.
async fn judge_rubric(
    client: &ChatClient,
    prompt: String,
    rubric: &Rubric,
    deadline: Instant,
) -> RubricJudgement {
    let model = client.profile().name.clone();
    let mut usage = Usage::default();
    let mut replies = Vec::new();
    let question = Question {
        system: rubric_system_prompt(),
        prompt,
        repair: rubric_repair_prompt(rubric),
        least_time: std::time::Duration::ZERO,
    };
    let read = |text: &str, attempt: usize| {
        replies.push(text.to_string());
        match verdict_from_reply(text, rubric) {
            Ok(verdict) => Some(verdict),
            Err(err) => {
                tracing::info!(model = %model, attempt, error = %err, "rubric reply held no score");
                None
            }
        }
    };
    let verdict = match ask(client, question, deadline, &mut usage, read).await {
        Asked::Answer(verdict) => verdict,
        Asked::OutOfTime => unscored(
            rubric,
            format!("auditor model '{model}' ran out of episode time"),
        ),
        Asked::Failed(err) => {
            tracing::warn!(model = %model, error = %err, "rubric judge call failed");
            unscored(
                rubric,
                format!("auditor model '{model}' call failed ({:?})", err.kind()),
            )
        }
        Asked::NoReplyWithin(left) => unscored(
            rubric,
            format!(
                "auditor model '{model}' did not answer within {}s",
                left.as_secs().max(1)
            ),
        ),
        Asked::Unreadable => unscored(
            rubric,
            format!("auditor model '{model}' gave no usable score, even after a repair request"),
        ),
    };
    RubricJudgement {
        verdict,
        replies,
        usage,
    }
}
