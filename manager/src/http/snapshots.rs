//! Reading snapshots: a manifest by snapshot id, a blob (workspace file or check output) by
//! its sha256.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use loopgate_protocol::snapshot::is_sha256_hex;
use loopgate_protocol::snapshot::Manifest;
use loopgate_snapshot::SnapshotError;
use loopgate_telemetry::metrics::Metrics;
use opentelemetry::KeyValue;

use crate::http::error::{ApiError, ReadErrors};
use crate::http::extract::ApiPath;
use crate::http::state::Shared;

/// The API's answer to a snapshot store error. A snapshot over the `[snapshot]` caps (logged
/// by the store as a security event) is counted in `loopgate.security.refused_messages`
/// (`kind = "snapshot"`) and answered `500 too_large`, naming the cap.
pub(crate) fn snapshot_error(e: SnapshotError) -> ApiError {
    if let Some(reason) = e.over_limit_reason() {
        Metrics::new().refused_messages.add(
            1,
            &[
                KeyValue::new("kind", "snapshot"),
                KeyValue::new("reason", reason),
            ],
        );
        return ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "too_large",
            e.to_string(),
        );
    }
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

/// A snapshot's manifest (the snapshot id is the sha256 of its canonical JSON).
#[utoipa::path(
    get,
    path = "/v1/snapshots/{id}",
    tag = "snapshots",
    params(("id" = String, Path, description = "the snapshot id (64 lowercase hex digits; anything else is not found)")),
    responses((status = 200, description = "the manifest", body = Manifest), ReadErrors)
)]
pub(crate) async fn get_manifest(
    State(s): State<Shared>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    if !is_sha256_hex(&id) {
        return Err(ApiError::not_found("snapshot", &id));
    }
    let manifest = s.snapshots.manifest(&id).await.map_err(snapshot_error)?;
    Ok(Json(manifest).into_response())
}

/// A blob's bytes: a workspace file, or a check's full output (an evidence `log_digest`).
#[utoipa::path(
    get,
    path = "/v1/blobs/{sha256}",
    tag = "snapshots",
    params(("sha256" = String, Path, description = "the blob's sha256 (64 lowercase hex digits; anything else is not found)")),
    responses(
        (status = 200, description = "the bytes", body = String, content_type = "application/octet-stream"),
        ReadErrors,
    )
)]
pub(crate) async fn get_blob(
    State(s): State<Shared>,
    ApiPath(sha): ApiPath<String>,
) -> Result<Response, ApiError> {
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
