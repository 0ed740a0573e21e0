//! The run's contract (`GET /v1/runs/{id}/contract`) and approving a planned one
//! (`POST /v1/runs/{id}/approve`, optionally with an edited contract that replaces it).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use loopgate_api::{ApproveRequest, ContractView, RunView};
use loopgate_common::contract_proposal::contract_to_toml;
use loopgate_common::decide::{edited_contract, RunEvent};
use loopgate_common::state::{PlanningStage, RunRecord};

use crate::engine::Applied;
use crate::http::error::{ApiError, ChangeErrors, ReadErrors};
use crate::http::extract::{ApiJson, ApiPath};
use crate::http::state::{load_run, Shared};
use crate::http::views::run_view;

pub(crate) fn contract_view(record: &RunRecord) -> ContractView {
    let (status, contract) = match (record.planning.stage, &record.planning.proposed_contract) {
        (Some(PlanningStage::Approval), Some(proposed)) => ("proposed", proposed.clone()),
        (Some(_), _) => ("planning", record.contract.clone()),
        (None, _) => ("frozen", record.contract.clone()),
    };
    ContractView {
        run_id: record.id.clone(),
        status: status.to_string(),
        planning: record.planning.stage.map(|p| p.as_str().to_string()),
        spec_hash: contract.spec_hash.clone(),
        toml: contract_to_toml(&contract),
        contract: Some(contract),
    }
}

/// The run's contract: `planning`, `proposed` (waiting for approval) or `frozen`, with its spec
/// hash and as a TOML file.
#[utoipa::path(
    get,
    path = "/v1/runs/{id}/contract",
    tag = "runs",
    params(("id" = String, Path, description = "the run id (a UUID)")),
    responses((status = 200, description = "the contract", body = ContractView), ReadErrors)
)]
pub(crate) async fn get_contract(
    State(s): State<Shared>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<ContractView>, ApiError> {
    let record = load_run(&s, &id).await?;
    Ok(Json(contract_view(&record)))
}

/// Approve the proposed contract, or replace it with an edited one (`contract`: TOML text);
/// refused (409) once the contract is frozen. The body is optional.
#[utoipa::path(
    post,
    path = "/v1/runs/{id}/approve",
    tag = "runs",
    params(("id" = String, Path, description = "the run id (a UUID)")),
    request_body = Option<ApproveRequest>,
    responses((status = 200, description = "the run, continuing with the frozen contract", body = RunView), ChangeErrors)
)]
pub(crate) async fn approve(
    State(s): State<Shared>,
    ApiPath(id): ApiPath<String>,
    body: Option<ApiJson<ApproveRequest>>,
) -> Result<Json<RunView>, ApiError> {
    let record = load_run(&s, &id).await?;
    let req = body.map(|ApiJson(b)| b).unwrap_or_default();
    let edited = match req.contract.as_deref() {
        None => None,
        Some(text) => Some(edited_contract(&record, text).map_err(|err| {
            ApiError::bad_request("invalid_contract", format!("edited contract: {err}"))
        })?),
    };
    match s.engine.apply(&id, &RunEvent::Approve { edited }).await? {
        Applied::Changed(record) => Ok(Json(run_view(&record))),
        Applied::Ignored(reason) => {
            let code = if record.planning.stage.is_none() {
                "contract_frozen"
            } else {
                "not_awaiting_approval"
            };
            Err(ApiError::new(StatusCode::CONFLICT, code, reason))
        }
        Applied::Replayed => Ok(Json(run_view(&load_run(&s, &id).await?))),
    }
}
