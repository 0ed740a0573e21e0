//! What a client needs to show and fill in before it reads any one run: run counts by state,
//! the model profile names per role (the manager's own, and what live workers announce), and a task file's TOML parsed into the JSON `POST /v1/runs`
//! takes (so a browser needs no TOML parser of its own, and sees the same errors the CLI does).

use std::collections::BTreeMap;

use axum::extract::State;
use axum::Json;
use loopgate_api::{
    BudgetLine, BudgetView, ModelInfo, ModelList, ParseTaskRequest, ParsedTask, RoleProfiles,
    RunCounts, ServedProfile,
};
use loopgate_common::state::RunState;
use loopgate_common::task::parse_task_file_toml;
use loopgate_protocol::wire::EpisodeRole;

use crate::engine::now_ms;
use crate::http::error::{ApiError, ListErrors, ReadErrors};
use crate::http::extract::{ApiJson, ApiPath};
use crate::http::state::{load_run, Shared};

/// How many runs are in each state (every state listed, zero included).
#[utoipa::path(
    get,
    path = "/v1/runs/counts",
    tag = "runs",
    responses((status = 200, description = "runs per state", body = RunCounts), ListErrors)
)]
pub(crate) async fn run_counts(State(s): State<Shared>) -> Result<Json<RunCounts>, ApiError> {
    let mut counts = BTreeMap::new();
    for state in RunState::ALL {
        let n = s
            .engine
            .store()
            .count(state.as_str())
            .await
            .map_err(|e| ApiError::unavailable(e.to_string()))?;
        counts.insert(state.as_str().to_string(), n);
    }
    let total = counts.values().sum();
    Ok(Json(RunCounts { counts, total }))
}

/// The model profiles this manager is configured with (`models`: names a task's
/// `roles.manager` may use), and per role the profile names a task's `[roles]` may give it now
/// (`roles`: the manager's own; for executor and auditor, the names live workers announce on
/// their heartbeats, each marked when the manager has a profile of that name too).
#[utoipa::path(
    get,
    path = "/v1/models",
    tag = "runs",
    responses((status = 200, description = "the configured profiles, by name, and the names each role can be given", body = ModelList), ListErrors)
)]
pub(crate) async fn list_models(State(s): State<Shared>) -> Json<ModelList> {
    let served = |role: EpisodeRole| {
        served_profiles(&s.capabilities.profiles(role), |name| {
            s.models.contains_key(name)
        })
    };
    Json(ModelList {
        models: s
            .models
            .iter()
            .map(|(name, client)| ModelInfo {
                name: name.clone(),
                provider: client.profile().provider.as_str().to_string(),
                model: client.profile().model.clone(),
            })
            .collect(),
        roles: RoleProfiles {
            manager: s
                .models
                .keys()
                .map(|name| ServedProfile {
                    name: name.clone(),
                    workers: 0,
                    manager_profile: true,
                })
                .collect(),
            executor: served(EpisodeRole::Executor),
            auditor: served(EpisodeRole::Auditor),
        },
    })
}

/// Announced names (with their worker counts) as the route lists them, sorted by name.
fn served_profiles(
    announced: &BTreeMap<String, u32>,
    is_manager_profile: impl Fn(&str) -> bool,
) -> Vec<ServedProfile> {
    announced
        .iter()
        .map(|(name, workers)| ServedProfile {
            name: name.clone(),
            workers: *workers,
            manager_profile: is_manager_profile(name),
        })
        .collect()
}

/// Parse and validate a task file's TOML: the task as `POST /v1/runs` takes it, or
/// `invalid_task` (400) with the same message `loopgate submit` prints.
#[utoipa::path(
    post,
    path = "/v1/tasks/parse",
    tag = "runs",
    request_body = ParseTaskRequest,
    responses((status = 200, description = "the parsed task", body = ParsedTask), ListErrors)
)]
pub(crate) async fn parse_task(
    ApiJson(req): ApiJson<ParseTaskRequest>,
) -> Result<Json<ParsedTask>, ApiError> {
    let invalid = |e: String| ApiError::bad_request("invalid_task", e);
    let task = parse_task_file_toml(&req.toml).map_err(|e| invalid(e.to_string()))?;
    task.validate().map_err(|e| invalid(e.to_string()))?;
    Ok(Json(ParsedTask { task }))
}

/// The run's budgets: used, limit and left for rounds, tokens, cost and wall-clock time.
#[utoipa::path(
    get,
    path = "/v1/runs/{id}/budget",
    tag = "runs",
    params(("id" = String, Path, description = "the run id (a UUID)")),
    responses((status = 200, description = "the budgets", body = BudgetView), ReadErrors)
)]
pub(crate) async fn get_budget(
    State(s): State<Shared>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<BudgetView>, ApiError> {
    let r = load_run(&s, &id).await?;
    let budget = &r.task.budget;
    let usage = &r.accounting.usage;
    let cost = usage.manager.cost_micros + usage.executor.cost_micros + usage.auditor.cost_micros;
    let wall_limit = budget.max_wall_secs;
    // A live run's clock is its wall deadline; an ended one's is the time it ran.
    let wall_used = match (r.deadlines.wall_ms, wall_limit) {
        (Some(deadline), Some(limit)) if !r.state.is_terminal() => {
            let left = u64::try_from((deadline - now_ms()).max(0)).unwrap_or(0) / 1000;
            limit.saturating_sub(left)
        }
        _ => u64::try_from((r.updated_at - r.created_at).max(0)).unwrap_or(0) / 1000,
    };
    Ok(Json(BudgetView {
        rounds: BudgetLine::of(
            u64::from(r.rounds_this_generation()),
            Some(u64::from(budget.max_rounds)),
        ),
        tokens: BudgetLine::of(usage.total(), budget.max_total_tokens),
        cost_micros: BudgetLine::of(cost, budget.max_cost_micros),
        wall_secs: BudgetLine::of(wall_used, wall_limit),
    }))
}
