//! Per-round snapshots (`GET /v1/runs/{id}/rounds`), for `checkout --round` and `diff`.

use loopgate_protocol::verdict::Verdicts;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::lenient;

/// One round, rebuilt from the run log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RoundView {
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub generation: u32,
    pub round: u32,
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub objective: String,
    /// The snapshot the round started from.
    pub base_snapshot: String,
    /// The executor's frozen result, once there is one.
    #[serde(default)]
    #[schema(required = true)]
    pub candidate: Option<String>,
    /// The audit of `candidate`, once there is one.
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub verdicts: Option<Verdicts>,
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub gate_passed: Option<bool>,
}

/// `GET /v1/runs/{id}/rounds`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RoundList {
    pub rounds: Vec<RoundView>,
}
