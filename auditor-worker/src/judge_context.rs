//! What the judge and the rubric are handed of an audit instead of the auditor
//! (`JudgeContext`): the request, the candidate's changes and its materialized tree, the judge
//! model the request names as this auditor resolves it (`JudgeModel`), and when the audit must
//! end; and how they put one question to that model (`ask`).

use std::path::Path;
use std::time::{Duration, Instant};

use loopgate_models::{ChatClient, ChatMessage, ChatRequest, ModelError};
use loopgate_protocol::snapshot::PathChange;
use loopgate_protocol::usage::Usage;
use loopgate_protocol::wire::AuditRequest;

/// One audit, as the judges see it.
#[derive(Clone, Copy)]
pub(crate) struct JudgeContext<'a> {
    pub(crate) req: &'a AuditRequest,
    /// base -> candidate.
    pub(crate) changes: &'a [PathChange],
    /// The candidate as materialized for this audit: read, never written.
    pub(crate) workspace: &'a Path,
    pub(crate) model: JudgeModel<'a>,
    /// The manager allows the whole audit until then; the model calls get what is left.
    pub(crate) deadline: Instant,
}

/// The judge model a request names, as this auditor resolves it.
#[derive(Clone, Copy)]
pub(crate) enum JudgeModel<'a> {
    /// The request names no model: the audit stays mechanical.
    NoneNamed,
    /// The request names a model profile this auditor does not serve.
    NotConfigured(&'a str),
    Ready(&'a ChatClient),
}

impl<'a> JudgeModel<'a> {
    /// The model to ask, when there is one here.
    pub(crate) fn client(self) -> Option<&'a ChatClient> {
        match self {
            JudgeModel::Ready(client) => Some(client),
            JudgeModel::NoneNamed | JudgeModel::NotConfigured(_) => None,
        }
    }
}

/// One question to the model: asked once, and once more after `repair` when its reply cannot
/// be read.
pub(crate) struct Question<'a> {
    pub(crate) system: &'a str,
    pub(crate) prompt: String,
    /// Sent after a reply that could not be read.
    pub(crate) repair: String,
    /// No call is started with less time than this left.
    pub(crate) least_time: Duration,
}

/// How a question ended.
#[derive(Debug)]
pub(crate) enum Asked<T> {
    /// A reply that could be read.
    Answer(T),
    /// Less than the question's `least_time` was left before a call.
    OutOfTime,
    Failed(ModelError),
    /// The call did not finish in the time that was left.
    NoReplyWithin(Duration),
    /// Neither the reply nor the one after the repair request could be read.
    Unreadable,
}

/// Put `question` to `client` before `deadline`; `read` reads a reply (the attempt, 0 or 1,
/// says which) and every reply's tokens are added to `usage`.
pub(crate) async fn ask<T>(
    client: &ChatClient,
    question: Question<'_>,
    deadline: Instant,
    usage: &mut Usage,
    mut read: impl FnMut(&str, usize) -> Option<T>,
) -> Asked<T> {
    let mut messages = vec![
        ChatMessage::system(question.system),
        ChatMessage::user(question.prompt),
    ];
    for attempt in 0..2 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || left < question.least_time {
            return Asked::OutOfTime;
        }
        let request = ChatRequest::new(messages.clone());
        let reply = match tokio::time::timeout(left, client.chat(&request)).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(err)) => return Asked::Failed(err),
            Err(_) => return Asked::NoReplyWithin(left),
        };
        usage.add(reply.usage);
        let text = reply.content.unwrap_or_default();
        if let Some(answer) = read(&text, attempt) {
            return Asked::Answer(answer);
        }
        messages.push(ChatMessage::assistant_text(text));
        messages.push(ChatMessage::user(question.repair.clone()));
    }
    Asked::Unreadable
}
