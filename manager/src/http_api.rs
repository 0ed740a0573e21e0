//! The manager's HTTP API: submit, inspect, stream, cancel, answer, and read snapshots.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use loopgate_common::decide::RunEvent;
use loopgate_common::protected_paths::default_protected_paths;
use loopgate_common::snapshot::{is_sha256_hex, validate_relative_path};
use loopgate_common::state::RunState;
use loopgate_common::task::TaskFile;
use loopgate_models::ChatClient;
use loopgate_snapshot::{SnapshotError, SnapshotStore};
use serde::Deserialize;
use tokio_stream::wrappers::ReceiverStream;

use crate::api_error::ApiError;
use crate::engine::{Applied, Engine};
use crate::run_view::RunView;

pub struct ApiState {
    pub engine: Engine,
    pub snapshots: SnapshotStore,
    /// Check outputs (log digests in evidence records).
    pub evidence: SnapshotStore,
    pub models: Arc<BTreeMap<String, ChatClient>>,
    /// When set, every `/v1` route requires `Authorization: Bearer <token>`.
    pub token: Option<String>,
    pub telemetry: Arc<loopgate_telemetry::otel::Telemetry>,
}

pub(crate) type Shared = Arc<ApiState>;

pub fn router(state: Shared, max_body_bytes: usize) -> Router {
    let v1 = Router::new()
        .route("/v1/runs", post(submit).get(list_runs))
        .route("/v1/runs/{id}", get(get_run))
        .route("/v1/runs/{id}/log", get(get_log))
        .route("/v1/runs/{id}/evidence", get(get_evidence))
        .route("/v1/runs/{id}/events", get(events))
        .route("/v1/runs/{id}/cancel", post(cancel))
        .route("/v1/runs/{id}/answer", post(answer))
        .route(
            "/v1/runs/{id}/contract",
            get(crate::http_contract::get_contract),
        )
        .route("/v1/runs/{id}/approve", post(crate::http_contract::approve))
        .route("/v1/snapshots/{id}", get(get_manifest))
        .route("/v1/blobs/{sha}", get(get_blob))
        .route("/v1/runs/{id}/rounds", get(crate::http_rounds::list_rounds))
        .route("/v1/runs/{id}/resume", post(crate::http_rounds::resume))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::http_auth::require_token,
        ));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/openapi.json", get(crate::openapi::openapi_json))
        .route("/metrics", get(metrics))
        .merge(v1)
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(state)
}

async fn metrics(State(s): State<Shared>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.telemetry.prometheus_text(),
    )
        .into_response()
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(s): State<Shared>) -> Result<&'static str, ApiError> {
    s.engine
        .store()
        .ping()
        .await
        .map_err(|e| ApiError::unavailable(format!("redis: {e}")))?;
    if s.engine.bus().client().connection_state() != async_nats::connection::State::Connected {
        return Err(ApiError::unavailable("nats: not connected"));
    }
    Ok("ready")
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitRequest {
    pub task: TaskFile,
    #[serde(default)]
    pub workspace: Option<WorkspaceUpload>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceUpload {
    pub files: Vec<UploadedFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UploadedFile {
    pub path: String,
    #[serde(default = "default_mode")]
    pub mode: u32,
    pub content_b64: String,
}

fn default_mode() -> u32 {
    0o644
}

fn snapshot_error(e: SnapshotError) -> ApiError {
    match e {
        SnapshotError::ManifestNotFound { id } => ApiError::not_found("snapshot", &id),
        SnapshotError::BlobNotFound { sha256 } => ApiError::not_found("blob", &sha256),
        SnapshotError::InvalidDigest(d) => {
            ApiError::bad_request("invalid_digest", format!("'{d}' is not a sha256 digest"))
        }
        SnapshotError::Refused { .. }
        | SnapshotError::TotalTooLarge { .. }
        | SnapshotError::InvalidManifest(_) => {
            ApiError::bad_request("invalid_workspace", e.to_string())
        }
        SnapshotError::Integrity { .. } => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "integrity",
            e.to_string(),
        ),
        other => ApiError::unavailable(other.to_string()),
    }
}

async fn submit(
    State(s): State<Shared>,
    body: Result<Json<SubmitRequest>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(req) = body.map_err(|e| match e {
        axum::extract::rejection::JsonRejection::BytesRejection(_) => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            e.body_text(),
        ),
        _ => ApiError::bad_request("invalid_request", e.body_text()),
    })?;
    let mut task = req
        .task
        .validate()
        .map_err(|e| ApiError::bad_request("invalid_task", e.to_string()))?;
    if !s.models.contains_key(&task.roles.manager) {
        return Err(ApiError::bad_request(
            "invalid_task",
            format!(
                "task field `roles.manager`: no model profile named '{}' on this manager (configured: {})",
                task.roles.manager,
                s.models.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    let outcome = match req.workspace {
        None => s.snapshots.freeze_empty().await,
        Some(upload) => {
            let mut files = Vec::with_capacity(upload.files.len());
            for (i, f) in upload.files.into_iter().enumerate() {
                validate_relative_path(&f.path).map_err(|e| {
                    ApiError::bad_request(
                        "invalid_workspace",
                        format!("workspace.files[{i}].path: {e}"),
                    )
                })?;
                let content = base64::engine::general_purpose::STANDARD
                    .decode(f.content_b64.as_bytes())
                    .map_err(|e| {
                        ApiError::bad_request(
                            "invalid_workspace",
                            format!("workspace.files[{i}].content_b64: {e}"),
                        )
                    })?;
                files.push((f.path, f.mode, content));
            }
            s.snapshots.freeze_files(files).await
        }
    }
    .map_err(snapshot_error)?;
    // Acceptance test files a check runs are protected by default: changing them is an
    // integrity violation (derived once, from the starting workspace, into the frozen contract).
    for path in default_protected_paths(&task.acceptance, &outcome.manifest) {
        if !task.protected_paths.contains(&path) {
            task.protected_paths.push(path);
        }
    }
    let id = uuid::Uuid::now_v7().to_string();
    // The run's root span: every later span of the run, in any process, joins this trace.
    let root = tracing::info_span!(
        "invoke_workflow loopgate",
        "gen_ai.operation.name" = "invoke_workflow",
        "gen_ai.agent.name" = "loopgate",
        "loopgate.run_id" = %id,
        "loopgate.spec_hash" = tracing::field::Empty,
    );
    let record = {
        use tracing::Instrument;
        s.engine
            .create_run(&id, task, &outcome.id)
            .instrument(root.clone())
            .await?
    };
    root.record("loopgate.spec_hash", record.contract.spec_hash.as_str());
    tracing::info!(run_id = %id, base_snapshot = %outcome.id, files = outcome.files, "run submitted");
    Ok((StatusCode::CREATED, Json(RunView::from_record(&record))).into_response())
}

pub(crate) async fn load_view(
    s: &ApiState,
    id: &str,
) -> Result<loopgate_common::state::RunRecord, ApiError> {
    if uuid::Uuid::parse_str(id).is_err() {
        return Err(ApiError::not_found("run", id));
    }
    match s.engine.load(id).await? {
        Some((_, record)) => Ok(record),
        None => Err(ApiError::not_found("run", id)),
    }
}

async fn get_run(
    State(s): State<Shared>,
    Path(id): Path<String>,
) -> Result<Json<RunView>, ApiError> {
    Ok(Json(RunView::from_record(&load_view(&s, &id).await?)))
}

#[derive(Debug, Deserialize)]
pub struct ListQuery {
    pub state: Option<String>,
    #[serde(default)]
    pub offset: usize,
    pub limit: Option<usize>,
}

async fn list_runs(
    State(s): State<Shared>,
    Query(q): Query<ListQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    if let Some(st) = &q.state {
        if RunState::parse(st).is_none() {
            return Err(ApiError::bad_request(
                "invalid_state",
                format!("unknown state '{st}'"),
            ));
        }
    }
    let limit = q.limit.unwrap_or(50).min(500);
    let ids = s
        .engine
        .store()
        .list(q.state.as_deref(), q.offset, limit)
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    let mut runs = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some((_, r)) = s.engine.load(&id).await? {
            runs.push(RunView::from_record(&r));
        }
    }
    Ok(Json(
        serde_json::json!({ "runs": runs, "offset": q.offset, "limit": limit }),
    ))
}

pub(crate) fn entry_with_id(id: &str, entry: &str) -> serde_json::Value {
    let mut value: serde_json::Value =
        serde_json::from_str(entry).unwrap_or(serde_json::Value::Null);
    if let Some(obj) = value.as_object_mut() {
        obj.insert("id".into(), serde_json::Value::String(id.to_string()));
    }
    value
}

async fn get_log(
    State(s): State<Shared>,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    load_view(&s, &id).await?;
    let entries: Vec<serde_json::Value> = s
        .engine
        .full_log(&id)
        .await?
        .iter()
        .map(|r| entry_with_id(&r.id, &r.entry))
        .collect();
    Ok(Json(serde_json::json!({ "entries": entries })))
}

async fn get_evidence(
    State(s): State<Shared>,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    load_view(&s, &id).await?;
    let pairs = s
        .engine
        .store()
        .evidence(&id)
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    let evidence: Vec<serde_json::Value> = pairs
        .iter()
        .filter_map(|(_, json)| serde_json::from_str(json).ok())
        .collect();
    Ok(Json(serde_json::json!({ "evidence": evidence })))
}

async fn events(
    State(s): State<Shared>,
    Path(id): Path<String>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    load_view(&s, &id).await?;
    // A reconnecting client resumes after the last entry it saw (stream ids look like `123-0`).
    let resume_after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '-'))
        .map(str::to_string);
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Event, Infallible>>(64);
    tokio::spawn(stream_log(s.clone(), id, resume_after, tx));
    Ok(Sse::new(ReceiverStream::new(rx))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

/// Forward the run log as SSE until a terminal entry, then send `end` with the final view.
async fn stream_log(
    s: Shared,
    id: String,
    mut after: Option<String>,
    tx: tokio::sync::mpsc::Sender<Result<Event, Infallible>>,
) {
    loop {
        let batch = match s
            .engine
            .store()
            .read_log(&id, after.as_deref(), 200, Some(Duration::from_secs(5)))
            .await
        {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(run_id = %id, error = %e, "event stream read failed");
                tokio::time::sleep(Duration::from_millis(500)).await;
                if tx.is_closed() {
                    return;
                }
                continue;
            }
        };
        let mut ended = false;
        for record in &batch {
            let value = entry_with_id(&record.id, &record.entry);
            ended |= value.get("type").and_then(|t| t.as_str()) == Some("terminal");
            let event = Event::default()
                .event("log")
                .id(record.id.clone())
                .data(value.to_string());
            if tx.send(Ok(event)).await.is_err() {
                return;
            }
        }
        if let Some(last) = batch.last() {
            after = Some(last.id.clone());
        }
        if !ended && batch.is_empty() {
            // No news: the run may have ended before we subscribed or expired.
            match s.engine.load(&id).await {
                Ok(Some((_, r))) if r.state.is_terminal() && after.is_some() => ended = true,
                Ok(Some(_)) => {}
                _ => return,
            }
        }
        if ended {
            if let Ok(Some((_, r))) = s.engine.load(&id).await {
                if r.state.is_terminal() {
                    let view = serde_json::to_string(&RunView::from_record(&r)).unwrap_or_default();
                    let _ = tx.send(Ok(Event::default().event("end").data(view))).await;
                    return;
                }
            }
        }
        if tx.is_closed() {
            return;
        }
    }
}

async fn cancel(
    State(s): State<Shared>,
    Path(id): Path<String>,
) -> Result<Json<RunView>, ApiError> {
    load_view(&s, &id).await?;
    let event = RunEvent::Cancel {
        reason: "cancelled by the user".into(),
    };
    match s.engine.apply(&id, &event).await? {
        Applied::Changed(record) => Ok(Json(RunView::from_record(&record))),
        Applied::Ignored(reason) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_cancellable",
            reason,
        )),
        Applied::Replayed => Ok(Json(RunView::from_record(&load_view(&s, &id).await?))),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnswerRequest {
    pub text: String,
}

async fn answer(
    State(s): State<Shared>,
    Path(id): Path<String>,
    Json(req): Json<AnswerRequest>,
) -> Result<Json<RunView>, ApiError> {
    load_view(&s, &id).await?;
    if req.text.trim().is_empty() {
        return Err(ApiError::bad_request(
            "invalid_request",
            "`text` must not be empty",
        ));
    }
    match s
        .engine
        .apply(&id, &RunEvent::Answer { text: req.text })
        .await?
    {
        Applied::Changed(record) => Ok(Json(RunView::from_record(&record))),
        Applied::Ignored(reason) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_waiting_for_input",
            reason,
        )),
        Applied::Replayed => Ok(Json(RunView::from_record(&load_view(&s, &id).await?))),
    }
}

async fn get_manifest(
    State(s): State<Shared>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    if !is_sha256_hex(&id) {
        return Err(ApiError::not_found("snapshot", &id));
    }
    let manifest = s.snapshots.manifest(&id).await.map_err(snapshot_error)?;
    Ok(Json(manifest).into_response())
}

async fn get_blob(State(s): State<Shared>, Path(sha): Path<String>) -> Result<Response, ApiError> {
    if !is_sha256_hex(&sha) {
        return Err(ApiError::not_found("blob", &sha));
    }
    // Workspace blobs live in the snapshot bucket, check outputs in the evidence bucket.
    let bytes = match s.snapshots.blob(&sha).await {
        Err(SnapshotError::BlobNotFound { .. }) => {
            s.evidence.blob(&sha).await.map_err(snapshot_error)?
        }
        other => other.map_err(snapshot_error)?,
    };
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response())
}
