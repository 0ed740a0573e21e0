//! The stand-in server: binds a free loopback port, routes both dialects
//! (`POST /v1/chat/completions`, `POST /v1/messages`, `GET /v1/models`), records every request,
//! takes the model's next scripted reply and renders it in the request's dialect.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::Context;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::standin::images::{request_images, RecordedImage};
use crate::standin::script::{ModelScript, RecordedRequest, Reply, Script};
use crate::standin::wire::{
    chars_div4, content_text, error_response, json_response, Dialect, Turn,
};
use crate::standin::{anthropic, openai};

/// How many `Dynamic` / `Delayed` layers one reply may unwrap through.
const MAX_REPLY_NESTING: usize = 16;

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
            .route("/v1/messages", post(messages))
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

    /// The images each request for `model` carried (decoded), oldest request first.
    pub fn images(&self, model: &str) -> Vec<Vec<RecordedImage>> {
        self.shared
            .models()
            .get(model)
            .map(|m| m.requests.iter().map(|r| r.images.clone()).collect())
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

/// The text of the last message with `role` (`"tool"`, `"user"`, ...) in a chat request (a content
/// array's text parts joined by newlines):
/// a helper for [`Reply::Dynamic`] closures.
pub fn last_message_content(request: &Value, role: &str) -> Option<String> {
    request
        .get("messages")?
        .as_array()?
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some(role))?
        .get("content")
        .and_then(content_text)
}

async fn chat_completions(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    handle(shared, headers, body, Dialect::OpenAi).await
}

/// Records the request, takes the model's next reply and renders it in `dialect`.
async fn handle(
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
    let images = match request_images(&request, dialect) {
        Ok(images) => images,
        Err(problem) => {
            let message = format!("invalid image part: {problem}");
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
            images,
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
            Dialect::OpenAi => openai::render(concrete, &turn),
            Dialect::Anthropic => anthropic::render(concrete, &turn),
        },
        None => error_response(
            dialect,
            500,
            "server_error",
            "stand-in: reply nested too deeply",
        ),
    }
}

async fn messages(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    handle(shared, headers, body, Dialect::Anthropic).await
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
