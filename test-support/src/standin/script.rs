//! What a stand-in model answers: scripted [`Reply`]s (per model, a FIFO queue and a
//! fallback), the provider [`Fault`]s they can render, and the [`Script`] a server starts with.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::standin::wire::openai_error_body;

/// One scripted answer.
#[derive(Clone)]
pub enum Reply {
    /// A plain assistant message.
    Content(String),
    /// Structured `tool_calls` (`finish_reason: "tool_calls"`). Arguments are JSON-encoded into
    /// the wire string, except a `Value::String`, which is sent verbatim (to test arguments
    /// that are not JSON).
    ToolCalls(Vec<(String, Value)>),
    /// This status and raw body (`Content-Type: application/json`), e.g. an error or garbage.
    Http(u16, String),
    /// Decided from the request body (e.g. the last tool result).
    Dynamic(Arc<dyn Fn(&Value) -> Reply + Send + Sync>),
    /// The inner reply after a delay (to exercise client timeouts).
    Delayed(Duration, Box<Reply>),
    /// A provider failure, rendered in the dialect's real format.
    Fault(Fault),
    /// The inner reply reporting these token counts instead of chars/4 (a model whose context
    /// inflates).
    WithUsage {
        prompt_tokens: u64,
        completion_tokens: u64,
        reply: Box<Reply>,
    },
}

/// Failures every provider has, each rendered with that provider's status, headers and body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// 429 with `Retry-After: <secs>`.
    RateLimited { retry_after_secs: u64 },
    /// 500 (OpenAI) / 529 overloaded (Anthropic).
    ServerError,
    /// The provider's "prompt too long" 400.
    ContextLength,
    /// 401, bad API key.
    AuthFailed,
    /// Out of quota / credit (429 `insufficient_quota` / 400 "credit balance is too low").
    QuotaExhausted,
    /// 200 with a body (or a stream event) that is not JSON.
    MalformedJson,
    /// Part of the reply, then the body ends without the end marker.
    StreamCut,
}

impl Reply {
    pub fn content(text: impl Into<String>) -> Self {
        Reply::Content(text.into())
    }
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        Reply::ToolCalls(vec![(name.into(), arguments)])
    }
    pub fn http(status: u16, body: impl Into<String>) -> Self {
        Reply::Http(status, body.into())
    }
    /// An error status with an OpenAI-style `{"error": {...}}` body.
    pub fn error(status: u16, message: &str) -> Self {
        Reply::Http(
            status,
            openai_error_body(message, "server_error").to_string(),
        )
    }
    pub fn dynamic(answer: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> Self {
        Reply::Dynamic(Arc::new(answer))
    }
    pub fn delayed(delay: Duration, reply: Reply) -> Self {
        Reply::Delayed(delay, Box::new(reply))
    }
    pub fn fault(fault: Fault) -> Self {
        Reply::Fault(fault)
    }
    pub fn with_usage(prompt_tokens: u64, completion_tokens: u64, reply: Reply) -> Self {
        Reply::WithUsage {
            prompt_tokens,
            completion_tokens,
            reply: Box::new(reply),
        }
    }
}

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Content(text) => f.debug_tuple("Content").field(text).finish(),
            Reply::ToolCalls(calls) => f.debug_tuple("ToolCalls").field(calls).finish(),
            Reply::Http(status, body) => f.debug_tuple("Http").field(status).field(body).finish(),
            Reply::Dynamic(_) => f.write_str("Dynamic(..)"),
            Reply::Delayed(delay, reply) => {
                f.debug_tuple("Delayed").field(delay).field(reply).finish()
            }
            Reply::Fault(fault) => f.debug_tuple("Fault").field(fault).finish(),
            Reply::WithUsage { reply, .. } => f.debug_tuple("WithUsage").field(reply).finish(),
        }
    }
}

/// The replies a [`StandInModel`] starts with.
#[derive(Debug, Clone, Default)]
pub struct Script {
    pub(crate) models: BTreeMap<String, ModelScript>,
}

impl Script {
    pub fn new() -> Self {
        Script::default()
    }
    /// Queues `reply` for `model`.
    pub fn reply(mut self, model: &str, reply: Reply) -> Self {
        self.entry(model).queue.push_back(reply);
        self
    }
    /// Queues several replies for `model`, in order.
    pub fn replies(mut self, model: &str, replies: impl IntoIterator<Item = Reply>) -> Self {
        self.entry(model).queue.extend(replies);
        self
    }
    /// Repeated for `model` once its queue is empty.
    pub fn fallback(mut self, model: &str, reply: Reply) -> Self {
        self.entry(model).fallback = Some(reply);
        self
    }
    fn entry(&mut self, model: &str) -> &mut ModelScript {
        self.models.entry(model.to_string()).or_default()
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct ModelScript {
    pub(crate) queue: VecDeque<Reply>,
    pub(crate) fallback: Option<Reply>,
    pub(crate) requests: Vec<RecordedRequest>,
}

#[derive(Debug, Clone)]
pub(crate) struct RecordedRequest {
    pub(crate) body: Value,
    pub(crate) images: Vec<crate::standin::images::RecordedImage>,
    pub(crate) authorization: Option<String>,
}
