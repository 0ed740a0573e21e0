//! A tiny stand-in for the manager HTTP API, serving canned runs, manifests, blobs and event
//! streams, and recording what the CLI sent. Plus a helper that runs the built `loopgate`.
#![allow(dead_code)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

/// One answer of `GET /v1/runs/{id}/events`: the SSE text, then close or keep the stream open.
#[derive(Clone)]
pub struct EventScript {
    pub body: String,
    pub hold_open: bool,
}

#[derive(Default, Clone)]
pub struct Canned {
    pub runs: HashMap<String, Value>,
    /// `GET /v1/runs/{id}/rounds` bodies by run id.
    pub rounds: HashMap<String, Value>,
    pub manifests: HashMap<String, Value>,
    pub blobs: HashMap<String, Vec<u8>>,
    /// Status and body for `POST /v1/runs`.
    pub create_reply: Option<(u16, Value)>,
    /// Connection i gets script i (the last one repeats).
    pub event_scripts: Vec<EventScript>,
}

#[derive(Default, Debug)]
pub struct Seen {
    /// (Authorization header, body) of each `POST /v1/runs`.
    pub posts: Vec<(Option<String>, Value)>,
    /// `Last-Event-ID` of each events connection.
    pub event_connections: Vec<Option<String>>,
    pub blob_gets: usize,
}

#[derive(Clone)]
struct AppState {
    canned: Arc<Canned>,
    seen: Arc<Mutex<Seen>>,
}

pub struct Standin {
    pub url: String,
    pub seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Standin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn not_found(what: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(json!({"error": {"code": "not_found", "message": format!("no {what}")}})),
    )
        .into_response()
}

async fn get_run(State(s): State<AppState>, Path(id): Path<String>) -> Response {
    match s.canned.runs.get(&id) {
        Some(run) => Json(run.clone()).into_response(),
        None => not_found("such run"),
    }
}

async fn get_rounds(State(s): State<AppState>, Path(id): Path<String>) -> Response {
    match s.canned.rounds.get(&id) {
        Some(rounds) => Json(rounds.clone()).into_response(),
        None => not_found("such run"),
    }
}

async fn create_run(
    State(s): State<AppState>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    s.seen.lock().unwrap().posts.push((auth, body));
    match &s.canned.create_reply {
        Some((status, reply)) => {
            (StatusCode::from_u16(*status).unwrap(), Json(reply.clone())).into_response()
        }
        None => not_found("create reply"),
    }
}

async fn manifest(State(s): State<AppState>, Path(id): Path<String>) -> Response {
    match s.canned.manifests.get(&id) {
        Some(m) => Json(m.clone()).into_response(),
        None => not_found("such snapshot"),
    }
}

async fn blob(State(s): State<AppState>, Path(sha): Path<String>) -> Response {
    s.seen.lock().unwrap().blob_gets += 1;
    match s.canned.blobs.get(&sha) {
        Some(bytes) => bytes.clone().into_response(),
        None => not_found("such blob"),
    }
}

async fn events(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(_id): Path<String>,
) -> Response {
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let index = {
        let mut seen = s.seen.lock().unwrap();
        seen.event_connections.push(last);
        seen.event_connections.len() - 1
    };
    let scripts = &s.canned.event_scripts;
    let Some(script) = scripts.get(index).or(scripts.last()).cloned() else {
        return not_found("event script");
    };
    let first = futures::stream::once(async move { Ok::<_, Infallible>(script.body.into_bytes()) });
    let body = if script.hold_open {
        Body::from_stream(futures::StreamExt::chain(first, futures::stream::pending()))
    } else {
        Body::from_stream(first)
    };
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(body)
        .unwrap()
}

pub async fn start(canned: Canned) -> Standin {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let state = AppState {
        canned: Arc::new(canned),
        seen: seen.clone(),
    };
    let app = Router::new()
        .route("/v1/runs", post(create_run))
        .route("/v1/runs/{id}", get(get_run))
        .route("/v1/runs/{id}/events", get(events))
        .route("/v1/runs/{id}/rounds", get(get_rounds))
        .route("/v1/snapshots/{id}", get(manifest))
        .route("/v1/blobs/{sha}", get(blob))
        .route("/readyz", get(|| async { "ok" }))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Standin { url, seen, task }
}

pub fn sse(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs the built `loopgate` with `LOOPGATE_SERVER=server` (no token), within a timeout.
pub async fn loopgate(server: &str, args: &[&str]) -> Ran {
    loopgate_with_env(server, args, &[]).await
}

/// [`loopgate`] with extra environment (e.g. `TZ`).
pub async fn loopgate_with_env(server: &str, args: &[&str], env: &[(&str, &str)]) -> Ran {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_loopgate"));
    command
        .args(args)
        .envs(env.iter().copied())
        .env("LOOPGATE_SERVER", server)
        .env_remove("LOOPGATE_TOKEN")
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("loopgate did not finish within 60s")
        .unwrap();
    Ran {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}
