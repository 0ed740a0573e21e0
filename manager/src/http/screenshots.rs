//! A browser check's screenshots as images: only the PNGs a run's (signed, accepted) evidence
//! records name by digest, read from the evidence bucket and re-hashed before they are served.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use loopgate_protocol::snapshot::is_sha256_hex;
use loopgate_protocol::verdict::{Evidence, EvidenceScreenshot};
use loopgate_snapshot::SnapshotError;

use crate::http::error::{ApiError, ScreenshotErrors};
use crate::http::extract::ApiPath;
use crate::http::snapshots::snapshot_error;
use crate::http::state::{load_run, Shared};

/// The only media type served: what `loopgate browse --screenshot` writes.
const PNG: &str = "image/png";
const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";
/// The largest screenshot served; the auditor collects none larger (`loopgate-checks`'
/// `MAX_SCREENSHOT_BYTES`).
const MAX_SCREENSHOT_BYTES: u64 = 8 * 1024 * 1024;

/// The screenshot `digest` as one of `records` (evidence JSON) names it, if any.
fn named_screenshot<'a>(
    records: impl IntoIterator<Item = &'a Evidence>,
    digest: &str,
) -> Option<EvidenceScreenshot> {
    records
        .into_iter()
        .flat_map(|e| e.screenshots.iter())
        .find(|s| s.digest == digest && s.media_type == PNG)
        .cloned()
}

/// Why `bytes` (which hash to the digest) are not served as the screenshot `shot` names.
fn refusal(shot: &EvidenceScreenshot, bytes: &[u8]) -> Option<ApiError> {
    let integrity =
        |reason: String| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "integrity", reason);
    if bytes.len() as u64 != shot.size_bytes {
        return Some(integrity(format!(
            "screenshot {} is {} bytes, its evidence says {}",
            shot.digest,
            bytes.len(),
            shot.size_bytes
        )));
    }
    if !bytes.starts_with(PNG_MAGIC) {
        return Some(integrity(format!(
            "screenshot {} is not a PNG",
            shot.digest
        )));
    }
    None
}

/// One screenshot a check of this run took (an evidence record's `screenshots[].digest`), as
/// `image/png`. Only digests the run's evidence names are served; the bytes are re-hashed
/// against the digest, and must be the PNG of the recorded size, at most 8 MiB.
#[utoipa::path(
    get,
    path = "/v1/runs/{id}/screenshots/{sha256}",
    tag = "runs",
    params(
        ("id" = String, Path, description = "the run id (a UUID)"),
        ("sha256" = String, Path, description = "the screenshot's digest, as an evidence record of this run names it (64 lowercase hex digits)"),
    ),
    responses(
        (status = 200, description = "the PNG", body = String, content_type = "image/png"),
        ScreenshotErrors,
    )
)]
pub(crate) async fn get_screenshot(
    State(s): State<Shared>,
    ApiPath((id, sha)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    let record = load_run(&s, &id).await?;
    if !is_sha256_hex(&sha) {
        return Err(ApiError::not_found("screenshot", &sha));
    }
    let stored = s
        .engine
        .store()
        .evidence(&id)
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    let history: Vec<Evidence> = stored
        .iter()
        .filter_map(|(_, json)| serde_json::from_str(json).ok())
        .collect();
    let shot = named_screenshot(record.audit.evidence.iter().chain(history.iter()), &sha)
        .ok_or_else(|| ApiError::not_found("screenshot", &sha))?;
    if shot.size_bytes > MAX_SCREENSHOT_BYTES {
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "too_large",
            format!(
                "screenshot {sha} is recorded at {} bytes, over the {MAX_SCREENSHOT_BYTES}-byte cap",
                shot.size_bytes
            ),
        ));
    }
    let bytes = match s.evidence.blob(&sha).await {
        Err(SnapshotError::BlobNotFound { .. }) => {
            return Err(ApiError::not_found("screenshot", &sha))
        }
        other => other.map_err(snapshot_error)?,
    };
    if let Some(refused) = refusal(&shot, &bytes) {
        return Err(refused);
    }
    Ok((
        [
            (header::CONTENT_TYPE, PNG),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            // Re-read and re-hashed on every request: a copy cached before the bucket was
            // tampered with would hide it.
            (header::CACHE_CONTROL, "no-store"),
        ],
        bytes,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shot(digest: &str, media_type: &str, size_bytes: u64) -> EvidenceScreenshot {
        EvidenceScreenshot {
            digest: digest.into(),
            media_type: media_type.into(),
            path: "shots/a.png".into(),
            size_bytes,
        }
    }

    fn evidence(shots: Vec<EvidenceScreenshot>) -> Evidence {
        let mut e: Evidence = serde_json::from_value(serde_json::json!({
            "artifact_version": "a".repeat(64),
            "check_id": "c",
            "verdict": "pass",
            "produced_at": 0,
            "log_digest": null,
            "exit_code": 0,
            "duration_ms": 1,
            "output_excerpt": "",
        }))
        .unwrap_or_else(|e| panic!("evidence: {e}"));
        e.screenshots = shots;
        e
    }

    #[test]
    fn only_named_png_screenshots_are_found() {
        let a = "a".repeat(64);
        let b = "b".repeat(64);
        let records = [
            evidence(vec![]),
            evidence(vec![shot(&a, PNG, 10), shot(&b, "image/svg+xml", 10)]),
        ];
        let cases: [(&str, bool); 3] = [(&a, true), (&b, false), (&"c".repeat(64), false)];
        for (digest, found) in cases {
            assert_eq!(
                named_screenshot(records.iter(), digest).is_some(),
                found,
                "{digest}"
            );
        }
    }

    #[test]
    fn bytes_must_be_the_recorded_png() {
        let png = [PNG_MAGIC, b"rest"].concat();
        let cases: [(&[u8], u64, Option<&str>); 3] = [
            (&png, png.len() as u64, None),
            (&png, 3, Some("integrity")),
            (b"GIF89a..", 8, Some("integrity")),
        ];
        for (bytes, size, refused) in cases {
            let got = refusal(&shot("d", PNG, size), bytes).map(|e| e.code);
            assert_eq!(got, refused, "{size}");
        }
    }
}
