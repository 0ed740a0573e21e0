//! The run's contract (`GET /v1/runs/{id}/contract`) and approving a planned one
//! (`POST /v1/runs/{id}/approve`, optionally with an edited contract that replaces it).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use loopgate_common::contract::Contract;
use loopgate_common::contract_proposal::contract_to_toml;
use loopgate_common::decide::{edited_contract, RunEvent};
use loopgate_common::state::{PlanningStage, RunRecord};
use serde::{Deserialize, Serialize};

use crate::api_error::ApiError;
use crate::engine::Applied;
use crate::http_api::{load_view, Shared};
use crate::run_view::RunView;

#[derive(Debug, Serialize)]
pub struct ContractView {
    pub run_id: String,
    /// `planning` (not proposed yet), `proposed` (waiting for approval) or `frozen`.
    pub status: &'static str,
    pub planning: Option<&'static str>,
    pub spec_hash: String,
    /// The proposed contract while it waits for approval, else the run's contract.
    pub contract: Contract,
    /// The same contract as a file for `loopgate approve RUN --edit FILE`.
    pub toml: String,
}

pub fn contract_view(record: &RunRecord) -> ContractView {
    let (status, contract) = match (record.planning.stage, &record.planning.proposed_contract) {
        (Some(PlanningStage::Approval), Some(proposed)) => ("proposed", proposed.clone()),
        (Some(_), _) => ("planning", record.contract.clone()),
        (None, _) => ("frozen", record.contract.clone()),
    };
    ContractView {
        run_id: record.id.clone(),
        status,
        planning: record.planning.stage.map(|p| p.as_str()),
        spec_hash: contract.spec_hash.clone(),
        toml: contract_to_toml(&contract),
        contract,
    }
}

pub async fn get_contract(
    State(s): State<Shared>,
    Path(id): Path<String>,
) -> Result<Json<ContractView>, ApiError> {
    let record = load_view(&s, &id).await?;
    Ok(Json(contract_view(&record)))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApproveRequest {
    /// An edited contract file (TOML, the shape `GET .../contract` returns in `toml`) that
    /// replaces the proposal.
    #[serde(default)]
    pub contract: Option<String>,
}

pub async fn approve(
    State(s): State<Shared>,
    Path(id): Path<String>,
    body: Option<Json<ApproveRequest>>,
) -> Result<Json<RunView>, ApiError> {
    let record = load_view(&s, &id).await?;
    let req = body.map(|Json(b)| b).unwrap_or_default();
    let edited = match req.contract.as_deref() {
        None => None,
        Some(text) => Some(edited_contract(&record, text).map_err(|err| {
            ApiError::bad_request("invalid_contract", format!("edited contract: {err}"))
        })?),
    };
    match s.engine.apply(&id, &RunEvent::Approve { edited }).await? {
        Applied::Changed(record) => Ok(Json(RunView::from_record(&record))),
        Applied::Ignored(reason) => {
            let code = if record.planning.stage.is_none() {
                "contract_frozen"
            } else {
                "not_awaiting_approval"
            };
            Err(ApiError::new(StatusCode::CONFLICT, code, reason))
        }
        Applied::Replayed => Ok(Json(RunView::from_record(&load_view(&s, &id).await?))),
    }
}
