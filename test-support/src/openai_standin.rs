//! `StandInModel`: an in-process HTTP server speaking the OpenAI chat-completions wire format
//! (`POST /v1/chat/completions`, `GET /v1/models`) and, on the same port, the Anthropic Messages
//! format (`POST /v1/messages`, rendered by `anthropic_standin`), with scripted replies, for
//! tests of the model adapters and of the whole system. A request with `"stream": true` gets
//! the reply as server-sent events in the provider's format (tool-call arguments in pieces,
//! usage in the last chunk); [`Fault`]s render as the provider's real error responses.
//!
//! Replies are keyed by the request's `model` field (e.g. `standin-manager`,
//! `standin-executor`, `standin-auditor`): each model has a FIFO queue of [`Reply`]s and an
//! optional fallback repeated once the queue is empty; with neither, the server answers HTTP
//! 500 with an OpenAI-style error body. Every request is recorded for inspection. Usage numbers
//! are chars/4 (rounded up) of the request body and of the reply. The server stops on drop.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::Context;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

#[path = "openai_standin/render.rs"]
mod render;

/// How many `Dynamic` / `Delayed` layers one reply may unwrap through.
const MAX_REPLY_NESTING: usize = 16;

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
    models: BTreeMap<String, ModelScript>,
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
struct ModelScript {
    queue: VecDeque<Reply>,
    fallback: Option<Reply>,
    requests: Vec<RecordedRequest>,
}

#[derive(Debug, Clone)]
struct RecordedRequest {
    body: Value,
    authorization: Option<String>,
}

pub(crate) struct Shared {
    models: Mutex<BTreeMap<String, ModelScript>>,
    /// Total requests recorded so far (for waiting without sleeps).
    recorded: watch::Sender<u64>,
    next_completion: AtomicU64,
}

impl Shared {
    fn models(&self) -> MutexGuard<'_, BTreeMap<String, ModelScript>> {
        // A panicking Dynamic closure runs outside the lock, so poisoning only follows a bug
        // here; the data stays usable either way.
        self.models
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A running stand-in server on `127.0.0.1:<free port>`. Stops on drop.
pub struct StandInModel {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    server: JoinHandle<()>,
}

impl fmt::Debug for StandInModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StandInModel")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl StandInModel {
    /// Binds a free loopback port and starts serving `script` (on the current Tokio runtime).
    pub async fn start(script: Script) -> anyhow::Result<StandInModel> {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .context("binding the stand-in model server to 127.0.0.1:0")?;
        let addr = listener
            .local_addr()
            .context("reading the stand-in model server's address")?;
        let (recorded, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            models: Mutex::new(script.models),
            recorded,
            next_completion: AtomicU64::new(1),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .route("/v1/messages", post(crate::anthropic_standin::messages))
            .route("/v1/models", get(list_models))
            .with_state(Arc::clone(&shared));
        let (shutdown, stop) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stop.await;
                })
                .await;
            if let Err(error) = served {
                tracing::warn!(%error, "stand-in model server stopped with an error");
            }
        });
        Ok(StandInModel {
            addr,
            shared,
            shutdown: Some(shutdown),
            server,
        })
    }

    /// `http://127.0.0.1:PORT/v1`, the `base_url` of a model profile.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues another reply for `model`.
    pub fn push(&self, model: &str, reply: Reply) {
        self.shared
            .models()
            .entry(model.to_string())
            .or_default()
            .queue
            .push_back(reply);
    }

    /// Sets (or replaces) `model`'s fallback reply.
    pub fn set_fallback(&self, model: &str, reply: Reply) {
        self.shared
            .models()
            .entry(model.to_string())
            .or_default()
            .fallback = Some(reply);
    }

    /// Bodies of the requests made for `model`, oldest first.
    pub fn requests(&self, model: &str) -> Vec<Value> {
        self.shared
            .models()
            .get(model)
            .map(|m| m.requests.iter().map(|r| r.body.clone()).collect())
            .unwrap_or_default()
    }

    pub fn request_count(&self, model: &str) -> usize {
        self.shared
            .models()
            .get(model)
            .map_or(0, |m| m.requests.len())
    }

    /// The `Authorization` (or Anthropic `x-api-key`) header of each request for `model`
    /// (`None` when absent).
    pub fn authorization_headers(&self, model: &str) -> Vec<Option<String>> {
        self.shared
            .models()
            .get(model)
            .map(|m| m.requests.iter().map(|r| r.authorization.clone()).collect())
            .unwrap_or_default()
    }

    /// Scripted replies still queued for `model` (the fallback not counted).
    pub fn pending_replies(&self, model: &str) -> usize {
        self.shared.models().get(model).map_or(0, |m| m.queue.len())
    }

    /// Waits until at least `count` requests for `model` were received.
    pub async fn wait_for_requests(
        &self,
        model: &str,
        count: usize,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        let mut recorded = self.shared.recorded.subscribe();
        let waited = tokio::time::timeout(timeout, async {
            loop {
                if self.request_count(model) >= count {
                    return true;
                }
                if recorded.changed().await.is_err() {
                    return false;
                }
            }
        })
        .await;
        match waited {
            Ok(true) => Ok(()),
            Ok(false) => anyhow::bail!("stand-in model server stopped"),
            Err(_) => anyhow::bail!(
                "model `{model}` got {} of {count} requests within {timeout:?}",
                self.request_count(model)
            ),
        }
    }
}

impl Drop for StandInModel {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        self.server.abort();
    }
}

/// The content of the last message with `role` (`"tool"`, `"user"`, ...) in a chat request:
/// a helper for [`Reply::Dynamic`] closures.
pub fn last_message_content(request: &Value, role: &str) -> Option<String> {
    request
        .get("messages")?
        .as_array()?
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some(role))?
        .get("content")?
        .as_str()
        .map(str::to_string)
}

/// Which provider's wire format a request came in (and its reply goes out) in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    OpenAi,
    Anthropic,
}

/// What a concrete reply is rendered with.
pub(crate) struct Turn {
    pub id: u64,
    pub model: String,
    pub stream: bool,
    /// OpenAI `stream_options.include_usage`.
    pub include_usage: bool,
    pub prompt_tokens: u64,
    /// Overrides chars/4 of the reply (from [`Reply::WithUsage`]).
    pub completion_tokens: Option<u64>,
}

async fn chat_completions(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    handle(shared, headers, body, Dialect::OpenAi).await
}

/// Records the request, takes the model's next reply and renders it in `dialect`.
pub(crate) async fn handle(
    shared: Arc<Shared>,
    headers: HeaderMap,
    body: Bytes,
    dialect: Dialect,
) -> Response {
    let raw = String::from_utf8_lossy(&body);
    let request: Value = match serde_json::from_str(&raw) {
        Ok(value) => value,
        Err(error) => {
            let message = format!("invalid JSON body: {error}");
            return error_response(dialect, 400, "invalid_request_error", &message);
        }
    };
    let model = request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let authorization = [header::AUTHORIZATION.as_str(), "x-api-key"]
        .iter()
        .find_map(|name| headers.get(*name))
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let scripted = {
        let mut models = shared.models();
        let script = models.entry(model.clone()).or_default();
        script.requests.push(RecordedRequest {
            body: request.clone(),
            authorization,
        });
        script.queue.pop_front().or_else(|| script.fallback.clone())
    };
    shared.recorded.send_modify(|n| *n += 1);
    let Some(reply) = scripted else {
        let message = format!("stand-in: no scripted reply left for model `{model}`");
        return error_response(dialect, 500, "server_error", &message);
    };
    let mut turn = Turn {
        id: shared.next_completion.fetch_add(1, Ordering::Relaxed),
        model,
        stream: request.get("stream").and_then(Value::as_bool) == Some(true),
        include_usage: request
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            == Some(true),
        prompt_tokens: chars_div4(raw.chars().count()),
        completion_tokens: None,
    };
    match resolve_reply(reply, &request, &mut turn).await {
        Some(Reply::Http(status, body)) => json_response(
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            body,
        ),
        Some(concrete) => match dialect {
            Dialect::OpenAi => render::render_openai(concrete, &turn),
            Dialect::Anthropic => crate::anthropic_standin::render(concrete, &turn),
        },
        None => error_response(
            dialect,
            500,
            "server_error",
            "stand-in: reply nested too deeply",
        ),
    }
}

pub(crate) fn error_response(dialect: Dialect, status: u16, kind: &str, message: &str) -> Response {
    let body = match dialect {
        Dialect::OpenAi => openai_error_body(message, kind),
        Dialect::Anthropic => crate::anthropic_standin::error_body(kind, message),
    };
    json_response(
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        body.to_string(),
    )
}

/// The wire tool calls with their ids, and the chars they count for usage.
pub(crate) fn wire_calls(
    turn: &Turn,
    calls: Vec<(String, Value)>,
    prefix: &str,
) -> Vec<(String, String, Value)> {
    calls
        .into_iter()
        .enumerate()
        .map(|(index, (name, arguments))| {
            (
                format!("{prefix}_standin_{}_{index}", turn.id),
                name,
                arguments,
            )
        })
        .collect()
}

/// `text` in pieces of at most `size` chars (none for empty text).
pub(crate) fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(size.max(1))
        .map(|c| c.iter().collect())
        .collect()
}

pub(crate) fn sse_response(body: String) -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// Unwraps `Dynamic`, `Delayed` and `WithUsage` layers (bounded) down to a concrete reply.
async fn resolve_reply(mut reply: Reply, request: &Value, turn: &mut Turn) -> Option<Reply> {
    for _ in 0..MAX_REPLY_NESTING {
        reply = match reply {
            Reply::Dynamic(answer) => answer(request),
            Reply::Delayed(delay, inner) => {
                tokio::time::sleep(delay).await;
                *inner
            }
            Reply::WithUsage {
                prompt_tokens,
                completion_tokens,
                reply,
            } => {
                turn.prompt_tokens = prompt_tokens;
                turn.completion_tokens = Some(completion_tokens);
                *reply
            }
            concrete => return Some(concrete),
        };
    }
    None
}

async fn list_models(State(shared): State<Arc<Shared>>) -> Response {
    let data: Vec<Value> = shared
        .models()
        .keys()
        .map(
            |id| json!({"id": id, "object": "model", "created": 0, "owned_by": "loopgate-standin"}),
        )
        .collect();
    json_response(
        StatusCode::OK,
        json!({"object": "list", "data": data}).to_string(),
    )
}

fn openai_error_body(message: &str, kind: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
}

pub(crate) fn json_response(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

pub(crate) fn chars_div4(chars: usize) -> u64 {
    (chars as u64).div_ceil(4)
}
