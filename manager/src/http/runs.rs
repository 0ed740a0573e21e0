//! Submitting, listing, reading, cancelling and answering runs.

use crate::protected_paths::{default_protected_paths, names_writable};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine as _;
use loopgate_api::{is_id_prefix, AnswerRequest, ListQuery, RunList, RunView, SubmitRequest};
use loopgate_common::decide::RunEvent;
use loopgate_common::state::RunState;
use loopgate_common::task::Task;
use loopgate_protocol::snapshot::validate_relative_path;

use crate::engine::Applied;
use crate::http::error::{
    ApiError, CancelErrors, ChangeErrors, ListErrors, ReadErrors, SubmitErrors,
};
use crate::http::extract::{ApiJson, ApiPath, ApiQuery};
use crate::http::snapshots::snapshot_error;
use crate::http::state::{load_run, Shared};
use crate::http::views::{run_view, with_sorted_keys};

/// Runs listed when `limit` is not given, and the most one page holds.
const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 500;
/// The most runs one id prefix is matched against (a prefix matching more is far too short).
const PREFIX_SCAN_LIMIT: usize = 1000;

/// A task's manager profile must be one this manager has (`invalid_task`), unless the task
/// runs without a manager model (`budget.manager = false`).
pub(crate) fn check_manager_profile(s: &Shared, task: &Task) -> Result<(), ApiError> {
    if !task.budget.manager || s.models.contains_key(&task.roles.manager) {
        return Ok(());
    }
    Err(ApiError::bad_request(
        "invalid_task",
        format!(
            "task field `roles.manager`: no model profile named '{}' on this manager (configured: {}); \
             a task with `[budget] manager = false` needs none",
            task.roles.manager,
            s.models.keys().cloned().collect::<Vec<_>>().join(", ")
        ),
    ))
}

/// Submit a task (and optionally its starting workspace): the run starts `queued`.
#[utoipa::path(
    post,
    path = "/v1/runs",
    tag = "runs",
    request_body = SubmitRequest,
    responses((status = 201, description = "the new run", body = RunView), SubmitErrors)
)]
pub(crate) async fn submit(
    State(s): State<Shared>,
    ApiJson(req): ApiJson<SubmitRequest>,
) -> Result<Response, ApiError> {
    let mut task = req
        .task
        .validate()
        .map_err(|e| ApiError::bad_request("invalid_task", e.to_string()))?;
    check_manager_profile(&s, &task)?;
    if let Some((field, problem)) = req.origin.as_ref().and_then(|o| o.problem()) {
        return Err(ApiError::bad_request(
            "invalid_origin",
            format!("origin.{field}: {problem}"),
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
    // integrity violation (derived once, from the starting workspace, into the frozen contract),
    // unless the task names them writable. Test plumbing (`conftest.py`, ...) needs no entry:
    // the auditor's pattern rule covers every change to it.
    for path in default_protected_paths(&task.acceptance, &outcome.manifest) {
        if !task.protected_paths.contains(&path) && !names_writable(&task, &path) {
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
            .create_run(&id, task, &outcome.id, req.origin)
            .instrument(root.clone())
            .await?
    };
    root.record("loopgate.spec_hash", record.contract.spec_hash.as_str());
    tracing::info!(run_id = %id, base_snapshot = %outcome.id, files = outcome.files, "run submitted");
    Ok((StatusCode::CREATED, Json(run_view(&record))).into_response())
}

/// One run.
#[utoipa::path(
    get,
    path = "/v1/runs/{id}",
    tag = "runs",
    params(("id" = String, Path, description = "the run id (a UUID)")),
    responses((status = 200, description = "the run", body = RunView), ReadErrors)
)]
pub(crate) async fn get_run(
    State(s): State<Shared>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<RunView>, ApiError> {
    Ok(Json(run_view(&load_run(&s, &id).await?)))
}

/// Runs, newest first.
#[utoipa::path(
    get,
    path = "/v1/runs",
    tag = "runs",
    params(ListQuery),
    responses((status = 200, description = "one page of runs", body = RunList), ListErrors)
)]
pub(crate) async fn list_runs(
    State(s): State<Shared>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    if let Some(st) = &q.state {
        if RunState::parse(st).is_none() {
            return Err(ApiError::bad_request(
                "invalid_state",
                format!("unknown state '{st}'"),
            ));
        }
    }
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT).min(MAX_LIMIT);
    if let Some(prefix) = &q.id_prefix {
        return list_by_prefix(&s, prefix, q.state.as_deref(), q.offset, limit).await;
    }
    // No store holds more runs than this; a larger offset answers the same empty page
    // (and keeps `offset + limit` in range).
    let offset = q.offset.min(u32::MAX as usize);
    // One more than asked for says whether there is a next page.
    let mut ids = s
        .engine
        .store()
        .list(q.state.as_deref(), offset, limit.saturating_add(1))
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    let has_more = ids.len() > limit;
    ids.truncate(limit);
    let mut runs = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some((_, r)) = s.engine.load(&id).await? {
            runs.push(run_view(&r));
        }
    }
    Ok(with_sorted_keys(&RunList {
        limit,
        offset: q.offset,
        runs,
        has_more,
        next_offset: has_more.then(|| offset + limit),
    }))
}

/// Runs whose id starts with `prefix` (one page, newest first): what a short id resolves to.
async fn list_by_prefix(
    s: &Shared,
    prefix: &str,
    state: Option<&str>,
    offset: usize,
    limit: usize,
) -> Result<Json<serde_json::Value>, ApiError> {
    if !is_id_prefix(prefix) {
        return Err(ApiError::bad_request(
            "invalid_request",
            format!("id_prefix '{prefix}': hex digits and dashes, 1 to 36 of them"),
        ));
    }
    let mut ids = s
        .engine
        .store()
        .ids_with_prefix(prefix, PREFIX_SCAN_LIMIT)
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    // Run ids are UUIDv7s: in reverse order they are newest first, as the list is.
    ids.sort_unstable_by(|a, b| b.cmp(a));
    let page_end = offset.saturating_add(limit);
    let (page, has_more) = match state {
        // Without a state filter only the page's records are read.
        None => {
            let mut runs = Vec::with_capacity(limit.min(ids.len()));
            for id in ids.iter().skip(offset).take(limit) {
                if let Some((_, r)) = s.engine.load(id).await? {
                    runs.push(run_view(&r));
                }
            }
            (runs, ids.len() > page_end)
        }
        Some(state) => {
            let mut matching = Vec::new();
            for id in &ids {
                if let Some((_, r)) = s.engine.load(id).await? {
                    if r.state.as_str() == state {
                        matching.push(r);
                    }
                }
            }
            let more = matching.len() > page_end;
            let runs = matching
                .iter()
                .skip(offset)
                .take(limit)
                .map(run_view)
                .collect();
            (runs, more)
        }
    };
    Ok(with_sorted_keys(&RunList {
        limit,
        offset,
        runs: page,
        has_more,
        next_offset: has_more.then_some(page_end),
    }))
}

/// Cancel the run: terminal `cancelled`; in-flight episodes are told to stop.
#[utoipa::path(
    post,
    path = "/v1/runs/{id}/cancel",
    tag = "runs",
    params(("id" = String, Path, description = "the run id (a UUID)")),
    responses((status = 200, description = "the cancelled run", body = RunView), CancelErrors)
)]
pub(crate) async fn cancel(
    State(s): State<Shared>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<RunView>, ApiError> {
    load_run(&s, &id).await?;
    let event = RunEvent::Cancel {
        reason: "cancelled by the user".into(),
    };
    match s.engine.apply(&id, &event).await? {
        Applied::Changed(record) => Ok(Json(run_view(&record))),
        Applied::Ignored(reason) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_cancellable",
            reason,
        )),
        Applied::Replayed => Ok(Json(run_view(&load_run(&s, &id).await?))),
    }
}

/// Answer the manager's question (the run is `waiting_for_input`).
#[utoipa::path(
    post,
    path = "/v1/runs/{id}/answer",
    tag = "runs",
    params(("id" = String, Path, description = "the run id (a UUID)")),
    request_body = AnswerRequest,
    responses((status = 200, description = "the run, deciding again", body = RunView), ChangeErrors)
)]
pub(crate) async fn answer(
    State(s): State<Shared>,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<AnswerRequest>,
) -> Result<Json<RunView>, ApiError> {
    load_run(&s, &id).await?;
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
        Applied::Changed(record) => Ok(Json(run_view(&record))),
        Applied::Ignored(reason) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_waiting_for_input",
            reason,
        )),
        Applied::Replayed => Ok(Json(run_view(&load_run(&s, &id).await?))),
    }
}
