//! `GET /v1/runs/{id}/certificate`: a completed run's proof of completion: the frozen contract,
//! the signed claims of the report that completed it, the final snapshot's manifest and the
//! auditor keys this manager trusts (`loopgate verify` checks all of it, and re-hashes every
//! blob).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use loopgate_api::{Certificate, TrustedKey, CERTIFICATE_FORMAT};
use loopgate_common::state::RunState;
use loopgate_protocol::report::claims::ReportClaims;
use loopgate_protocol::wire::AuditReport;

use crate::http::error::{ApiError, CertificateErrors};
use crate::http::extract::ApiPath;
use crate::http::snapshots::snapshot_error;
use crate::http::state::{load_run, Shared};

/// The run's completion certificate. Only a completed run has one (`not_completed`, 409,
/// otherwise); a run completed before this manager stored reports has none (404).
#[utoipa::path(
    get,
    path = "/v1/runs/{id}/certificate",
    tag = "runs",
    params(("id" = String, Path, description = "the run id (a UUID)")),
    responses(
        (status = 200, description = "the certificate (also the file `loopgate verify --offline` reads)", body = Certificate),
        CertificateErrors
    )
)]
pub(crate) async fn get_certificate(
    State(s): State<Shared>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Certificate>, ApiError> {
    let record = load_run(&s, &id).await?;
    if record.state != RunState::Completed {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_completed",
            format!(
                "run {id} is {}, not completed: it has no certificate",
                record.state.as_str()
            ),
        ));
    }
    let stored = s
        .engine
        .store()
        .report(&id, &record.snapshot)
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?
        .ok_or_else(|| ApiError::not_found("certificate of run", &id))?;
    let report: AuditReport = serde_json::from_str(&stored).map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "corrupt_record",
            format!("the stored final report of run {id} is unreadable: {e}"),
        )
    })?;
    let manifest = s
        .snapshots
        .manifest(&record.snapshot)
        .await
        .map_err(snapshot_error)?;
    Ok(Json(Certificate {
        format: CERTIFICATE_FORMAT.to_string(),
        run_id: record.id.clone(),
        state: record.state,
        snapshot: record.snapshot.clone(),
        contract: record.contract.clone(),
        report: ReportClaims::of(&report),
        signature: report.signature.clone(),
        manifest,
        trusted_keys: s
            .auditor_keys
            .keys()
            .iter()
            .map(|k| TrustedKey {
                key_id: k.key_id().to_string(),
                public_key: k.to_hex(),
            })
            .collect(),
    }))
}
