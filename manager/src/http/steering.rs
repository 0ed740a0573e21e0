//! Steering a run: operator instructions, pause and unpause, and continuing a completed run
//! with a new goal (the transitions are in `loopgate_common::decide`).

use crate::protected_paths::{default_protected_paths, names_writable};
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use loopgate_api::{ContinueRequest, InstructRequest, RunView};
use loopgate_common::decide::{validate_instruction, RunEvent};
use loopgate_common::state::RunState;

use crate::engine::Applied;
use crate::http::error::{ApiError, ChangeErrors, PauseErrors};
use crate::http::extract::{ApiJson, ApiPath};
use crate::http::runs::check_manager_profile;
use crate::http::snapshots::snapshot_error;
use crate::http::state::{load_run, Shared};
use crate::http::views::run_view;

/// Apply a steering event: the changed run, or 409 with `conflict` when it does not apply.
async fn steer(
    s: &Shared,
    id: &str,
    event: RunEvent,
    conflict: &'static str,
) -> Result<Json<RunView>, ApiError> {
    match s.engine.apply(id, &event).await? {
        Applied::Changed(record) => Ok(Json(run_view(&record))),
        Applied::Ignored(reason) => Err(ApiError::new(StatusCode::CONFLICT, conflict, reason)),
        Applied::Replayed => Ok(Json(run_view(&load_run(s, id).await?))),
    }
}

/// Give the run an operator instruction: logged, kept in the run, and shown in the manager's
/// next prompts (never to executors or auditors) until newer ones push it out. The run is not
/// interrupted; any run that has not ended takes one (a paused one too).
#[utoipa::path(
    post,
    path = "/v1/runs/{id}/instructions",
    tag = "runs",
    params(("id" = String, Path, description = "the run id (a UUID)")),
    request_body = InstructRequest,
    responses((status = 200, description = "the run, carrying the instruction", body = RunView), ChangeErrors)
)]
pub(crate) async fn instruct(
    State(s): State<Shared>,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<InstructRequest>,
) -> Result<Json<RunView>, ApiError> {
    load_run(&s, &id).await?;
    let text = validate_instruction(&req.text)
        .map_err(|e| ApiError::bad_request("invalid_instruction", e.to_string()))?;
    steer(&s, &id, RunEvent::Instruct { text }, "not_instructable").await
}

/// Pause the run: the step in flight (a manager decision, or a round's executor episode and
/// its audit) finishes and is recorded, no new step is taken, and the wall-clock budget stops
/// running. The run is `paused` until unpaused.
#[utoipa::path(
    post,
    path = "/v1/runs/{id}/pause",
    tag = "runs",
    params(("id" = String, Path, description = "the run id (a UUID)")),
    responses((status = 200, description = "the paused run", body = RunView), PauseErrors)
)]
pub(crate) async fn pause(
    State(s): State<Shared>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<RunView>, ApiError> {
    load_run(&s, &id).await?;
    steer(&s, &id, RunEvent::Pause, "not_pausable").await
}

/// Unpause a paused run: it takes the step it held back, and its wall-clock budget runs again
/// from what was left.
#[utoipa::path(
    post,
    path = "/v1/runs/{id}/unpause",
    tag = "runs",
    params(("id" = String, Path, description = "the run id (a UUID)")),
    responses((status = 200, description = "the run, going on", body = RunView), PauseErrors)
)]
pub(crate) async fn unpause(
    State(s): State<Shared>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<RunView>, ApiError> {
    load_run(&s, &id).await?;
    steer(&s, &id, RunEvent::Unpause, "not_paused").await
}

/// Continue a completed run with a new goal and contract, as a new generation from its
/// completed snapshot (the new generation's base). Its earlier rounds and evidence stay in its
/// log and history.
#[utoipa::path(
    post,
    path = "/v1/runs/{id}/continue",
    tag = "runs",
    params(("id" = String, Path, description = "the run id (a UUID)")),
    request_body = ContinueRequest,
    responses((status = 200, description = "the run, as its new generation", body = RunView), ChangeErrors)
)]
pub(crate) async fn continue_run(
    State(s): State<Shared>,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<ContinueRequest>,
) -> Result<Json<RunView>, ApiError> {
    let record = load_run(&s, &id).await?;
    if record.state != RunState::Completed {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_continuable",
            format!(
                "a {} run cannot be continued: only a completed run can",
                record.state.as_str()
            ),
        ));
    }
    let invalid =
        |e: loopgate_common::task::TaskError| ApiError::bad_request("invalid_task", e.to_string());
    let mut task = match (req.task, req.goal) {
        (None, None) => {
            return Err(ApiError::bad_request(
                "invalid_request",
                "give `goal`, `task` or both",
            ))
        }
        (Some(mut file), goal) => {
            if let Some(goal) = goal {
                file.goal = goal;
            }
            file.validate().map_err(invalid)?
        }
        (None, Some(goal)) => record.task.with_goal(&goal).map_err(invalid)?,
    };
    if let Some(budget) = req.budget {
        task.budget = budget
            .validate_over(&task.budget)
            .map_err(|(field, problem)| {
                ApiError::bad_request("invalid_budget", format!("budget.{field}: {problem}"))
            })?;
    }
    check_manager_profile(&s, &task)?;
    // As at submit: the acceptance test files the new checks run are protected, judged
    // against the workspace the new generation starts from.
    let manifest = s
        .snapshots
        .manifest(&record.snapshot)
        .await
        .map_err(snapshot_error)?;
    for path in default_protected_paths(&task.acceptance, &manifest) {
        if !task.protected_paths.contains(&path) && !names_writable(&task, &path) {
            task.protected_paths.push(path);
        }
    }
    let event = RunEvent::Continue {
        task: Box::new(task),
    };
    steer(&s, &id, event, "not_continuable").await
}
