//! What every handler shares: the API state and loading a run by id. Imports no other
//! handler file (they all import this one).

use std::collections::BTreeMap;
use std::sync::Arc;

use loopgate_common::state::RunRecord;
use loopgate_models::ChatClient;
use loopgate_protocol::report::signing::TrustedKeys;
use loopgate_snapshot::SnapshotStore;

use crate::engine::Engine;
use crate::http::error::ApiError;

pub struct ApiState {
    pub engine: Engine,
    pub snapshots: SnapshotStore,
    /// Check outputs (log digests in evidence records).
    pub evidence: SnapshotStore,
    pub models: Arc<BTreeMap<String, ChatClient>>,
    /// When set, every `/v1` route requires `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// When set, every route but the probes requires a `Host` (and `Origin`, when sent) of
    /// `localhost`, `127.0.0.1`, `[::1]` or one of these names (`auth.rs`); the manager sets
    /// it whenever no token is required (`Settings::allowed_hosts`).
    pub allowed_hosts: Option<Vec<String>>,
    pub telemetry: Arc<loopgate_telemetry::otel::Telemetry>,
    /// The auditor keys reports must be signed by (listed in certificates).
    pub auditor_keys: TrustedKeys,
    /// What live workers announce (`GET /v1/models` lists their profile names per role).
    pub capabilities: loopgate_transport::runtime::CapabilityBoard,
}

pub(crate) type Shared = Arc<ApiState>;

/// The stored run `id`; an id that is not a UUID is never found.
pub(crate) async fn load_run(s: &ApiState, id: &str) -> Result<RunRecord, ApiError> {
    if uuid::Uuid::parse_str(id).is_err() {
        return Err(ApiError::not_found("run", id));
    }
    match s.engine.load(id).await? {
        Some((_, record)) => Ok(record),
        None => Err(ApiError::not_found("run", id)),
    }
}
