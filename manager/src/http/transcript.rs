//! A round's episode transcript (what the agent did: model turns, tool calls with their
//! arguments and results, self-check refusals), as the executor stored it, redacted and
//! bounded, in the evidence bucket under the digest its `exec_result` log entry names.

use axum::extract::State;
use axum::Json;
use loopgate_api::Transcript;
use loopgate_common::state::{LogEntry, LogEvent};
use loopgate_protocol::snapshot::is_sha256_hex;
use loopgate_snapshot::SnapshotError;

use crate::http::error::{ApiError, ReadErrors};
use crate::http::extract::ApiPath;
use crate::http::snapshots::snapshot_error;
use crate::http::state::{load_run, Shared};

/// The transcript digest of round `round` in `entries` (the latest generation that ran it):
/// the round's own episode, or the winning sibling's of a step of several attempts.
pub(crate) fn round_transcript(entries: &[LogEntry], round: u32) -> Option<String> {
    let in_round = || entries.iter().filter(|e| e.round == round);
    let generation = in_round().map(|e| e.generation).max()?;
    let winner = in_round()
        .filter(|e| e.generation == generation)
        .find_map(|e| match &e.event {
            LogEvent::AttemptWon { attempt, .. } => Some(*attempt),
            _ => None,
        });
    in_round()
        .filter(|e| e.generation == generation)
        .filter_map(|e| match &e.event {
            LogEvent::ExecResult {
                transcript: Some(digest),
                step_attempt,
                ..
            } if winner.is_none() || *step_attempt == winner => Some(digest.clone()),
            _ => None,
        })
        .next_back()
}

/// The episode transcript of round `n`: what the agent did, turn by turn (redacted, bounded).
#[utoipa::path(
    get,
    path = "/v1/runs/{id}/rounds/{n}/transcript",
    tag = "runs",
    params(
        ("id" = String, Path, description = "the run id (a UUID)"),
        ("n" = u32, Path, description = "the round"),
    ),
    responses(
        (status = 200, description = "the round's episode transcript", body = Transcript),
        ReadErrors,
    )
)]
pub(crate) async fn get_transcript(
    State(s): State<Shared>,
    ApiPath((id, n)): ApiPath<(String, u32)>,
) -> Result<Json<Transcript>, ApiError> {
    load_run(&s, &id).await?;
    let entries: Vec<LogEntry> = s
        .engine
        .full_log(&id)
        .await?
        .iter()
        .filter_map(|r| serde_json::from_str::<LogEntry>(&r.entry).ok())
        .collect();
    let what = format!("of round {n}");
    let digest = round_transcript(&entries, n)
        .filter(|d| is_sha256_hex(d))
        .ok_or_else(|| ApiError::not_found("transcript", &what))?;
    let bytes = match s.evidence.blob(&digest).await {
        Err(SnapshotError::BlobNotFound { .. }) => {
            return Err(ApiError::not_found("transcript", &what))
        }
        other => other.map_err(snapshot_error)?,
    };
    let transcript: Transcript = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "integrity",
            format!("transcript {digest} is not a transcript: {e}"),
        )
    })?;
    Ok(Json(transcript))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn entry(generation: u32, round: u32, event: serde_json::Value) -> LogEntry {
        let mut v = event;
        v["at"] = 0.into();
        v["generation"] = generation.into();
        v["round"] = round.into();
        serde_json::from_value(v).unwrap()
    }

    fn exec(digest: Option<&str>, step_attempt: Option<u32>) -> serde_json::Value {
        serde_json::json!({"type": "exec_result", "worker": "w", "candidate": null,
            "summary": "", "claimed_done": false, "error": null,
            "transcript": digest, "step_attempt": step_attempt})
    }

    #[test]
    fn the_rounds_own_or_the_winners_transcript() {
        let won = serde_json::json!({"type": "attempt_won", "attempt": 2, "of": 2,
            "candidate": "c", "worker": "w", "tokens": 1, "passing": 1, "blocking": 1,
            "early": false, "others": ""});
        let log = vec![
            entry(1, 1, exec(Some("a"), None)),
            entry(1, 2, exec(Some("b1"), Some(1))),
            entry(1, 2, exec(Some("b2"), Some(2))),
            entry(1, 2, won),
            entry(1, 3, exec(None, None)),
            entry(1, 4, exec(Some("old"), None)),
            entry(2, 4, exec(Some("new"), None)),
        ];
        let cases = [
            (1, Some("a")),
            (2, Some("b2")),
            (3, None),
            (4, Some("new")),
            (5, None),
        ];
        for (round, want) in cases {
            assert_eq!(
                round_transcript(&log, round).as_deref(),
                want,
                "round {round}"
            );
        }
    }
}
