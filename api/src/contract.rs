//! The run's contract (`GET /v1/runs/{id}/contract`) and approving a planned one
//! (`POST /v1/runs/{id}/approve`).

use loopgate_common::state::PlanningStage;
use loopgate_protocol::contract::Contract;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::lenient;

/// Whether the contract can still change.
#[derive(ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ContractStatus {
    /// Not proposed yet: the planning episodes are still running.
    Planning,
    /// Proposed, waiting for `loopgate approve`.
    Proposed,
    /// Frozen for the rest of the run.
    Frozen,
}

/// The run's contract. Read leniently, like [`crate::runs::RunView`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ContractView {
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub run_id: String,
    /// `planning` (not proposed yet), `proposed` (waiting for approval) or `frozen`.
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(value_type = ContractStatus, required = true)]
    pub status: String,
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(value_type = Option<PlanningStage>, required = true)]
    pub planning: Option<String>,
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub spec_hash: String,
    /// The proposed contract while it waits for approval, else the run's contract.
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(value_type = Contract, required = true)]
    pub contract: Option<Contract>,
    /// The same contract as a file for `loopgate approve RUN --edit FILE`.
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub toml: String,
}

/// `POST /v1/runs/{id}/approve` (optional body).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApproveRequest {
    /// An edited contract file (TOML, the shape `GET .../contract` returns in `toml`) that
    /// replaces the proposal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<String>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn approve_bodies_and_lenient_views() {
        let cases = [
            (ApproveRequest::default(), json!({})),
            (
                ApproveRequest {
                    contract: Some("goal = \"g\"".into()),
                },
                json!({"contract": "goal = \"g\""}),
            ),
        ];
        for (body, want) in cases {
            assert_eq!(serde_json::to_value(body).unwrap(), want);
        }
        let view: ContractView =
            serde_json::from_value(json!({"status": 3, "toml": "x", "contract": {}})).unwrap();
        assert_eq!((view.status.as_str(), view.toml.as_str()), ("", "x"));
        assert!(view.contract.is_none());
    }
}
