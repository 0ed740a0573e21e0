//! Comparing and checking snapshots for the console (and any client): the `git diff` between
//! two snapshots, and a snapshot's integrity (every blob re-hashed against its manifest).

use axum::extract::State;
use axum::Json;
use futures::StreamExt;
use loopgate_api::{FileChange, IntegrityReport, IntegrityViolation, SnapshotDiff};
use loopgate_common::git_diff::{file_diff, Side};
use loopgate_protocol::snapshot::{diff_manifests, is_sha256_hex, Manifest, ManifestEntry};
use loopgate_snapshot::SnapshotError;

use crate::http::error::{ApiError, ReadErrors};
use crate::http::extract::ApiPath;
use crate::http::snapshots::snapshot_error;
use crate::http::state::Shared;

/// Blobs fetched at once.
const PARALLEL_BLOBS: usize = 8;
/// Changed files one diff answer shows in full; the rest are listed without their text.
const MAX_DIFFED_FILES: usize = 500;
/// Files larger than this are listed as changed, without their text.
const MAX_DIFFED_BYTES: u64 = 2 * 1024 * 1024;

async fn manifest(s: &Shared, id: &str) -> Result<Manifest, ApiError> {
    if !is_sha256_hex(id) {
        return Err(ApiError::not_found("snapshot", id));
    }
    s.snapshots.manifest(id).await.map_err(snapshot_error)
}

/// The mode and content of a manifest entry's blob (re-hashed by the store), or `None`.
pub(crate) async fn side(
    s: &Shared,
    entry: Option<&ManifestEntry>,
) -> Result<Option<(u32, Vec<u8>)>, ApiError> {
    match entry {
        Some(e) => Ok(Some((
            e.mode,
            s.snapshots.blob(&e.sha256).await.map_err(snapshot_error)?,
        ))),
        None => Ok(None),
    }
}

/// The fetched blob as one side of a file diff.
pub(crate) fn as_side(fetched: &Option<(u32, Vec<u8>)>) -> Option<Side<'_>> {
    fetched.as_ref().map(|(mode, content)| Side {
        mode: *mode,
        content,
    })
}

/// What changed from snapshot `from` to snapshot `to`, file by file, as `git diff` text.
/// Every blob read is re-hashed: a tampered one answers `integrity` (500).
#[utoipa::path(
    get,
    path = "/v1/snapshots/{from}/diff/{to}",
    tag = "snapshots",
    params(
        ("from" = String, Path, description = "the older snapshot id"),
        ("to" = String, Path, description = "the newer snapshot id"),
    ),
    responses((status = 200, description = "the changed files, in path order", body = SnapshotDiff), ReadErrors)
)]
pub(crate) async fn diff(
    State(s): State<Shared>,
    ApiPath((from, to)): ApiPath<(String, String)>,
) -> Result<Json<SnapshotDiff>, ApiError> {
    let (old, new) = (manifest(&s, &from).await?, manifest(&s, &to).await?);
    let changes = diff_manifests(&old, &new);
    let (old, new) = (std::sync::Arc::new(old), std::sync::Arc::new(new));
    // Owned items: a stream over borrowed ones is not `Send` enough for the handler.
    let files: Vec<Result<FileChange, ApiError>> =
        futures::stream::iter(changes.into_iter().enumerate().map(|(i, change)| {
            let (s, old, new) = (s.clone(), old.clone(), new.clone());
            async move {
                let (s, change) = (&s, &change);
                let path = change.path();
                let (a, b) = (old.get(path), new.get(path));
                let too_big = [a, b].iter().flatten().any(|e| e.size > MAX_DIFFED_BYTES);
                let diff = if i >= MAX_DIFFED_FILES || too_big {
                    format!(
                        "diff --git a/{path} b/{path}\n(not shown: too large or too many files)\n"
                    )
                } else {
                    let (a, b) = (side(s, a).await?, side(s, b).await?);
                    file_diff(path, as_side(&a), as_side(&b))
                };
                Ok(FileChange {
                    path: path.to_string(),
                    change: FileChange::change_name(change).to_string(),
                    diff,
                })
            }
        }))
        .buffered(PARALLEL_BLOBS)
        .collect()
        .await;
    Ok(Json(SnapshotDiff {
        from,
        to,
        files: files.into_iter().collect::<Result<_, _>>()?,
    }))
}

/// Every file of the snapshot re-hashed against its manifest entry: a blob whose bytes were
/// changed in the store (or that is gone) is listed as a violation.
#[utoipa::path(
    get,
    path = "/v1/snapshots/{id}/integrity",
    tag = "snapshots",
    params(("id" = String, Path, description = "the snapshot id (64 lowercase hex digits)")),
    responses((status = 200, description = "the integrity report", body = IntegrityReport), ReadErrors)
)]
pub(crate) async fn integrity(
    State(s): State<Shared>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<IntegrityReport>, ApiError> {
    let m = manifest(&s, &id).await?;
    let results: Vec<Result<Option<IntegrityViolation>, ApiError>> =
        futures::stream::iter(m.entries.clone().into_iter().map(|e| {
            let s = s.clone();
            async move {
                let violation = |kind: &str, detail: String| IntegrityViolation {
                    path: e.path.clone(),
                    sha256: e.sha256.clone(),
                    kind: kind.to_string(),
                    detail,
                };
                match s.snapshots.blob(&e.sha256).await {
                    Ok(_) => Ok(None),
                    Err(err @ SnapshotError::Integrity { .. }) => {
                        Ok(Some(violation("mismatch", err.to_string())))
                    }
                    Err(err @ SnapshotError::BlobNotFound { .. }) => {
                        Ok(Some(violation("missing", err.to_string())))
                    }
                    // Recorded far over any file a freeze stores: not what the manifest says.
                    Err(err @ SnapshotError::ObjectTooLarge { .. }) => {
                        Ok(Some(violation("mismatch", err.to_string())))
                    }
                    Err(other) => Err(snapshot_error(other)),
                }
            }
        }))
        .buffered(PARALLEL_BLOBS)
        .collect()
        .await;
    let violations: Vec<IntegrityViolation> = results
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .flatten()
        .collect();
    Ok(Json(IntegrityReport {
        snapshot: id,
        checked: u32::try_from(m.entries.len()).unwrap_or(u32::MAX),
        intact: violations.is_empty(),
        violations,
    }))
}
