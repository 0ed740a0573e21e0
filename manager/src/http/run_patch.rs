//! `GET /v1/runs/{id}/patch`: a completed run's change as a `git format-patch` mbox (from its
//! starting snapshot to its final one, with the message `loopgate apply` writes, trailers
//! included), for the console's download. `git am` applies it on the run's start commit when
//! the run started from a repository with no uncommitted changes (`submit --repo`). The
//! manager serves what it stores and proves nothing: `loopgate apply RUN --patch FILE`
//! verifies first.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use loopgate_common::apply_message::{mbox, ApplyMessage};
use loopgate_common::git_diff::file_diff;
use loopgate_protocol::snapshot::{diff_manifests, sha256_hex};
use time::format_description::well_known::Rfc2822;

use crate::http::certificate::get_certificate;
use crate::http::error::{ApiError, CertificateErrors};
use crate::http::extract::ApiPath;
use crate::http::snapshot_diff::{as_side, side};
use crate::http::snapshots::snapshot_error;
use crate::http::state::{load_run, Shared};

/// Blobs fetched at once.
const PARALLEL_BLOBS: usize = 8;

/// The run's change as a patch file. Only a completed run has one (`not_completed`, 409).
#[utoipa::path(
    get,
    path = "/v1/runs/{id}/patch",
    tag = "runs",
    params(("id" = String, Path, description = "the run id (a UUID)")),
    responses(
        (status = 200, description = "a `git format-patch` mbox (`git am FILE` applies it on the start commit); not verified: `loopgate apply RUN --patch FILE` verifies first", body = String, content_type = "text/plain"),
        CertificateErrors
    )
)]
pub(crate) async fn get_patch(
    State(s): State<Shared>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let cert = get_certificate(State(s.clone()), ApiPath(id.clone()))
        .await?
        .0;
    let record = load_run(&s, &id).await?;
    let base = s
        .snapshots
        .manifest(&record.base_snapshot)
        .await
        .map_err(snapshot_error)?;
    let paths: Vec<String> = diff_manifests(&base, &cert.manifest)
        .iter()
        .map(|c| c.path().to_string())
        .collect();
    let (old, new) = (Arc::new(base), Arc::new(cert.manifest.clone()));
    // Owned items: a stream over borrowed ones is not `Send` enough for the handler.
    let diffs: Vec<Result<String, ApiError>> =
        futures::stream::iter(paths.into_iter().map(|path| {
            let (s, old, new) = (s.clone(), old.clone(), new.clone());
            async move {
                let a = side(&s, old.get(&path)).await?;
                let b = side(&s, new.get(&path)).await?;
                Ok(file_diff(&path, as_side(&a), as_side(&b)))
            }
        }))
        .buffered(PARALLEL_BLOBS)
        .collect()
        .await;
    let diff: String = diffs.into_iter().collect::<Result<Vec<_>, _>>()?.concat();
    let passing = cert
        .contract
        .required_evidence()
        .filter(|c| cert.report.passes_on_snapshot(c))
        .count();
    let digest = sha256_hex(&cert.report.canonical_bytes());
    let message = ApplyMessage {
        goal: &cert.contract.goal,
        run_id: &cert.run_id,
        snapshot: &cert.snapshot,
        spec_hash: &cert.contract.spec_hash,
        completed_by: cert.report.purpose.as_str(),
        signed_by: &cert.report.key_id,
        criteria_passing: passing,
        certificate_digest: &digest,
    }
    .text();
    let date = time::OffsetDateTime::from_unix_timestamp(record.updated_at / 1000)
        .ok()
        .and_then(|t| t.format(&Rfc2822).ok())
        .unwrap_or_else(|| "Thu, 01 Jan 1970 00:00:00 +0000".to_string());
    let short = id.get(..8).unwrap_or(&id);
    Ok((
        [
            (
                header::CONTENT_TYPE,
                "text/plain; charset=utf-8".to_string(),
            ),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"loopgate-{short}.patch\""),
            ),
        ],
        mbox(&message, &date, &diff),
    )
        .into_response())
}
