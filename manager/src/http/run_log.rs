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

/// Where a stream stands between reads of the run log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Follow {
    /// Empty reads in a row.
    quiet: u32,
    /// The run was seen ended (its state, not a log entry): one more empty read ends the stream.
    ended_seen: bool,
}

/// What a stream does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Read the log again at once.
    Read,
    /// Read again after [`POLL`].
    Wait,
    /// Ask whether the run still exists and whether it has ended.
    CheckState,
    /// Send `end` (once the run's state is terminal).
    End,
    /// Stop without `end`: the run is gone.
    Stop,
}

/// After one read of `read` entries (`terminal`: one of them was the terminal entry).
fn after_read(f: &mut Follow, read: usize, terminal: bool) -> Next {
    if read > 0 {
        f.quiet = 0;
    }
    if terminal {
        return Next::End;
    }
    if read > 0 {
        return Next::Read;
    }
    if f.ended_seen {
        // A read made after the run was seen ended found nothing more: every entry is out.
        return Next::End;
    }
    f.quiet += 1;
    if f.quiet % STATE_CHECK_EVERY == 1 {
        Next::CheckState
    } else {
        Next::Wait
    }
}

/// After a state check: `state` is `Some(terminal)`, or `None` when the run is gone or the
/// read failed; `forwarded` says whether the stream has sent (or resumed after) any entry.
fn after_state_check(f: &mut Follow, state: Option<bool>, forwarded: bool) -> Next {
    match state {
        // The entries written between the last read and the state check are still to send:
        // read once more before ending.
        Some(true) if forwarded => {
            f.ended_seen = true;
            Next::Read
        }
        Some(_) => Next::Wait,
        None => Next::Stop,
    }
}

/// Forward the run log as SSE until a terminal entry, then send `end` with the final view.
async fn stream_log(
    s: Shared,
    id: String,
    mut after: Option<String>,
    tx: tokio::sync::mpsc::Sender<Result<Event, Infallible>>,
) {
    let mut follow = Follow::default();
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
        let mut terminal = false;
        for record in &batch {
            let value = entry_with_id(&record.id, &record.entry);
            terminal |= value.get("type").and_then(|t| t.as_str()) == Some("terminal");
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
        let mut next = after_read(&mut follow, batch.len(), terminal);
        if next == Next::CheckState {
            // No news: the run may have ended before we subscribed, or expired.
            let state = match s.engine.load(&id).await {
                Ok(Some((_, r))) => Some(r.state.is_terminal()),
                _ => None,
            };
            next = after_state_check(&mut follow, state, after.is_some());
        }
        match next {
            Next::Read => continue,
            Next::Stop => return,
            Next::End => {
                if let Ok(Some((_, r))) = s.engine.load(&id).await {
                    if r.state.is_terminal() {
                        let view = serde_json::to_string(&run_view(&r)).unwrap_or_default();
                        let _ = tx.send(Ok(Event::default().event("end").data(view))).await;
                        return;
                    }
                }
                // The terminal entry is out but the state not yet saved: a later check ends it.
                follow.ended_seen = false;
            }
            Next::Wait | Next::CheckState => {}
        }
        if wait_or_closed(&tx, POLL).await {
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

    #[test]
    fn a_stream_ends_only_after_reading_past_the_moment_it_saw_the_run_end() {
        // (state before, entries read, a terminal entry among them, next, state after)
        let fresh = Follow::default();
        let quiet = |n| Follow {
            quiet: n,
            ended_seen: false,
        };
        let seen = Follow {
            quiet: 1,
            ended_seen: true,
        };
        let rows = [
            (fresh, 3, false, Next::Read, quiet(0)),
            (quiet(7), 2, false, Next::Read, quiet(0)),
            (fresh, 2, true, Next::End, fresh),
            // A read that holds the terminal entry still counts as a read.
            (quiet(5), 2, true, Next::End, quiet(0)),
            (fresh, 0, false, Next::CheckState, quiet(1)),
            (quiet(1), 0, false, Next::Wait, quiet(2)),
            (
                quiet(STATE_CHECK_EVERY),
                0,
                false,
                Next::CheckState,
                quiet(STATE_CHECK_EVERY + 1),
            ),
            // The read after the run was seen ended: nothing more, so the stream ends.
            (seen, 0, false, Next::End, seen),
            // It found more: those go out first, and the stream reads again.
            (seen, 4, false, Next::Read, Follow { quiet: 0, ..seen }),
        ];
        for (i, (before, read, terminal, next, after)) in rows.into_iter().enumerate() {
            let mut f = before;
            assert_eq!(after_read(&mut f, read, terminal), next, "row {i}");
            assert_eq!(f, after, "row {i}");
        }
    }

    #[test]
    fn a_state_check_that_finds_the_run_ended_reads_the_log_once_more() {
        // (state: Some(terminal) or None when gone, entries forwarded, next, ended_seen after)
        let rows = [
            // The race this guards: the round's last entries and the terminal state land
            // between an empty read and the check. Ending here would drop those entries.
            (Some(true), true, Next::Read, true),
            (Some(true), false, Next::Wait, false),
            (Some(false), true, Next::Wait, false),
            (None, true, Next::Stop, false),
        ];
        for (i, (state, forwarded, next, ended_seen)) in rows.into_iter().enumerate() {
            let mut f = Follow {
                quiet: 1,
                ended_seen: false,
            };
            assert_eq!(after_state_check(&mut f, state, forwarded), next, "row {i}");
            assert_eq!(f.ended_seen, ended_seen, "row {i}");
        }
    }
}
