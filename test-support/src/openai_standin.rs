//! `StandInModel`: an in-process HTTP server speaking the OpenAI chat-completions wire format
//! (`POST /v1/chat/completions`, `GET /v1/models`) with scripted replies, for tests of the
//! model adapters and of the whole system.
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

struct Shared {
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

    /// The `Authorization` header of each request for `model` (`None` when absent).
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

async fn chat_completions(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let raw = String::from_utf8_lossy(&body);
    let request: Value = match serde_json::from_str(&raw) {
        Ok(value) => value,
        Err(error) => {
            let body = openai_error_body(
                &format!("invalid JSON body: {error}"),
                "invalid_request_error",
            );
            return json_response(StatusCode::BAD_REQUEST, body.to_string());
        }
    };
    let model = request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let authorization = headers
        .get(header::AUTHORIZATION)
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
        let body = openai_error_body(&message, "server_error");
        return json_response(StatusCode::INTERNAL_SERVER_ERROR, body.to_string());
    };
    let prompt_tokens = chars_div4(raw.chars().count());
    let completion_id = shared.next_completion.fetch_add(1, Ordering::Relaxed);
    match resolve_reply(reply, &request).await {
        Some(Reply::Http(status, body)) => json_response(
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            body,
        ),
        Some(Reply::Content(text)) => {
            let completion_tokens = chars_div4(text.chars().count());
            let message = json!({"role": "assistant", "content": text});
            completion(
                completion_id,
                &model,
                message,
                "stop",
                prompt_tokens,
                completion_tokens,
            )
        }
        Some(Reply::ToolCalls(calls)) => {
            let mut reply_chars = 0;
            let wire_calls: Vec<Value> = calls
                .into_iter()
                .enumerate()
                .map(|(index, (name, arguments))| {
                    let arguments = match arguments {
                        Value::String(raw) => raw,
                        other => other.to_string(),
                    };
                    reply_chars += name.chars().count() + arguments.chars().count();
                    json!({
                        "id": format!("call_standin_{completion_id}_{index}"),
                        "type": "function",
                        "function": {"name": name, "arguments": arguments}
                    })
                })
                .collect();
            let message = json!({"role": "assistant", "content": null, "tool_calls": wire_calls});
            let completion_tokens = chars_div4(reply_chars);
            completion(
                completion_id,
                &model,
                message,
                "tool_calls",
                prompt_tokens,
                completion_tokens,
            )
        }
        Some(Reply::Dynamic(_)) | Some(Reply::Delayed(..)) | None => {
            let body = openai_error_body("stand-in: reply nested too deeply", "server_error");
            json_response(StatusCode::INTERNAL_SERVER_ERROR, body.to_string())
        }
    }
}

/// Unwraps `Dynamic` and `Delayed` layers (bounded) down to a concrete reply.
async fn resolve_reply(mut reply: Reply, request: &Value) -> Option<Reply> {
    for _ in 0..MAX_REPLY_NESTING {
        reply = match reply {
            Reply::Dynamic(answer) => answer(request),
            Reply::Delayed(delay, inner) => {
                tokio::time::sleep(delay).await;
                *inner
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

fn completion(
    id: u64,
    model: &str,
    message: Value,
    finish_reason: &str,
    prompt_tokens: u64,
    completion_tokens: u64,
) -> Response {
    let body = json!({
        "id": format!("chatcmpl-standin-{id}"),
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens
        }
    });
    json_response(StatusCode::OK, body.to_string())
}

fn openai_error_body(message: &str, kind: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
}

fn json_response(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn chars_div4(chars: usize) -> u64 {
    (chars as u64).div_ceil(4)
}
