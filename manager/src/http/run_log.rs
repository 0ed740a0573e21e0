//! What a run recorded: its append-only log (as a page and as Server-Sent Events) and its
//! evidence records.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use loopgate_api::runs::RunStreamEvent;
use loopgate_api::{EvidenceList, LogPage, LOG_HEADLINE_KEY};
use loopgate_common::state::LogEntry;
use tokio_stream::wrappers::ReceiverStream;

use crate::http::error::{ApiError, ReadErrors};
use crate::http::extract::ApiPath;
use crate::http::state::{load_run, Shared};
use crate::http::views::run_view;

/// A stored log entry (JSON text) with its stream id and its headline added (the event's
/// `headline()`, or its `type` when this manager does not know the event); `null` when it is
/// not JSON.
pub(crate) fn entry_with_id(id: &str, entry: &str) -> serde_json::Value {
    let mut value: serde_json::Value =
        serde_json::from_str(entry).unwrap_or(serde_json::Value::Null);
    let headline = match serde_json::from_str::<LogEntry>(entry) {
        Ok(known) => known.event.headline(),
        Err(_) => value
            .get("type")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("entry")
            .to_string(),
    };
    if let Some(obj) = value.as_object_mut() {
        obj.insert("id".into(), serde_json::Value::String(id.to_string()));
        obj.insert(LOG_HEADLINE_KEY.into(), serde_json::Value::String(headline));
    }
    value
}

/// The append-only run log, oldest first.
#[utoipa::path(
    get,
    path = "/v1/runs/{id}/log",
    tag = "runs",
    params(("id" = String, Path, description = "the run id (a UUID)")),
    responses((status = 200, description = "every log entry", body = LogPage), ReadErrors)
)]
pub(crate) async fn get_log(
    State(s): State<Shared>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<LogPage>, ApiError> {
    load_run(&s, &id).await?;
    let entries = s
        .engine
        .full_log(&id)
        .await?
        .iter()
        .map(|r| entry_with_id(&r.id, &r.entry))
        .collect();
    Ok(Json(LogPage { entries }))
}

/// Every evidence record of the run, each bound to the snapshot it was produced on.
#[utoipa::path(
    get,
    path = "/v1/runs/{id}/evidence",
    tag = "runs",
    params(("id" = String, Path, description = "the run id (a UUID)")),
    responses((status = 200, description = "the evidence records", body = EvidenceList), ReadErrors)
)]
pub(crate) async fn get_evidence(
    State(s): State<Shared>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<EvidenceList>, ApiError> {
    load_run(&s, &id).await?;
    let pairs = s
        .engine
        .store()
        .evidence(&id)
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    let evidence = pairs
        .iter()
        .filter_map(|(_, json)| serde_json::from_str(json).ok())
        .collect();
    Ok(Json(EvidenceList { evidence }))
}

/// Server-Sent Events: a `log` event per entry (its id is the stream id), then `end` with the
/// run once it is terminal. Honours `Last-Event-ID`.
#[utoipa::path(
    get,
    path = "/v1/runs/{id}/events",
    tag = "runs",
    params(
        ("id" = String, Path, description = "the run id (a UUID)"),
        ("Last-Event-ID" = Option<String>, Header, description = "resume after this entry (a stream id like `1700000000000-0`)"),
    ),
    responses(
        (status = 200, description = "`log` events (data: a log entry), then `end` (data: the run)", body = RunStreamEvent, content_type = "text/event-stream"),
        ReadErrors,
    )
)]
pub(crate) async fn events(
    State(s): State<Shared>,
    ApiPath(id): ApiPath<String>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    load_run(&s, &id).await?;
    // A reconnecting client resumes after the last entry it saw (stream ids look like `123-0`).
    let resume_after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '-'))
        .map(str::to_string);
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Event, Infallible>>(64);
    tokio::spawn(stream_log(s.clone(), id, resume_after, tx));
    Ok(Sse::new(ReceiverStream::new(rx))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

/// How often a stream with no news reads the run log again. Every stream reads on the
/// manager's one shared Redis connection (a non-blocking `XRANGE`), so N clients cost N short
/// reads per interval, never N connections.
const POLL: Duration = Duration::from_millis(250);
/// Quiet polls between checks that the run still exists and has not ended (about 5 s).
const STATE_CHECK_EVERY: u32 = 20;

/// Forward the run log as SSE until a terminal entry, then send `end` with the final view.
async fn stream_log(
    s: Shared,
    id: String,
    mut after: Option<String>,
    tx: tokio::sync::mpsc::Sender<Result<Event, Infallible>>,
) {
    let mut quiet: u32 = 0;
    loop {
        let batch = match s
            .engine
            .store()
            .read_log(&id, after.as_deref(), 200, None)
            .await
        {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(run_id = %id, error = %e, "event stream read failed");
                if wait_or_closed(&tx, Duration::from_millis(500)).await {
                    return;
                }
                continue;
            }
        };
        let mut ended = false;
        for record in &batch {
            let value = entry_with_id(&record.id, &record.entry);
            ended |= value.get("type").and_then(|t| t.as_str()) == Some("terminal");
            let event = Event::default()
                .event("log")
                .id(record.id.clone())
                .data(value.to_string());
            if tx.send(Ok(event)).await.is_err() {
                return;
            }
        }
        if let Some(last) = batch.last() {
            after = Some(last.id.clone());
        }
        quiet = if batch.is_empty() { quiet + 1 } else { 0 };
        if !ended && quiet % STATE_CHECK_EVERY == 1 {
            // No news: the run may have ended before we subscribed or expired.
            match s.engine.load(&id).await {
                Ok(Some((_, r))) if r.state.is_terminal() && after.is_some() => ended = true,
                Ok(Some(_)) => {}
                _ => return,
            }
        }
        if ended {
            if let Ok(Some((_, r))) = s.engine.load(&id).await {
                if r.state.is_terminal() {
                    let view = serde_json::to_string(&run_view(&r)).unwrap_or_default();
                    let _ = tx.send(Ok(Event::default().event("end").data(view))).await;
                    return;
                }
            }
        }
        if batch.is_empty() && wait_or_closed(&tx, POLL).await {
            return;
        }
    }
}

/// Sleep `pause`; true when the client went away first.
async fn wait_or_closed(
    tx: &tokio::sync::mpsc::Sender<Result<Event, Infallible>>,
    pause: Duration,
) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(pause) => tx.is_closed(),
        _ = tx.closed() => true,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn served_entries_carry_their_stream_id_and_headline() {
        let known = entry_with_id(
            "1-0",
            r#"{"at":1,"generation":1,"round":2,"type":"held","step":"decide"}"#,
        );
        assert_eq!(known["id"], "1-0");
        assert_eq!(
            known["headline"],
            "held: the next step (decide) waits for unpause"
        );
        assert_eq!(known["step"], "decide");
        let unknown = entry_with_id("2-0", r#"{"at":1,"generation":1,"round":2,"type":"new"}"#);
        assert_eq!(unknown["headline"], "new");
        assert_eq!(entry_with_id("3-0", "not json"), json!(null));
    }
}
