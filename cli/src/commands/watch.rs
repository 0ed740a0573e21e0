//! `loopgate watch RUN [--json]`: follows `GET /v1/runs/{id}/events` (SSE) until the `end`
//! event, printing one line per log entry, reconnecting (with `Last-Event-ID`, and skipping
//! entries already printed) when the stream drops.

use std::collections::HashSet;
use std::time::Duration;

use futures::StreamExt;
use loopgate_common::state::RunState;
use serde_json::Value;

use crate::api_client::{ApiClient, ApiError};
use crate::errors::CliError;
use crate::exit_status::ExitStatus;
use crate::log_clock::LogClock;
use crate::output;
use crate::render;
use crate::run_view::{LogRecord, RunView};
use crate::sse::{SseEvent, SseParser};

/// Consecutive failed (re)connects before `watch` gives up.
const MAX_RECONNECT_FAILURES: u32 = 8;
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// What one connection to the stream ended with.
enum StreamEnd {
    /// The run ended; the RunView from the `end` event (typed, and as the server sent it).
    Ended(RunView, Value),
    /// The run waits for an answer.
    Waiting(RunView),
    /// The connection closed or broke before `end`; `progressed` if anything new arrived.
    Dropped { progressed: bool },
}

/// Everything carried across reconnects.
struct WatchState {
    json: bool,
    run: String,
    printed: HashSet<String>,
    last_event_id: Option<String>,
    saw_terminal: bool,
    /// A stream was opened at least once (before that, errors are reported at once).
    opened: bool,
    /// Round and audit start times, for the durations on the lines.
    clock: LogClock,
    /// Lines repeating the ones before them, held back and counted.
    repeats: render::RepeatFilter,
}

pub async fn watch(
    client: &ApiClient,
    run: &str,
    json: bool,
    zone: crate::log_clock::Zone,
) -> Result<ExitStatus, CliError> {
    let mut state = WatchState {
        json,
        run: run.to_string(),
        printed: HashSet::new(),
        last_event_id: None,
        saw_terminal: false,
        opened: false,
        clock: LogClock::new(zone),
        repeats: render::RepeatFilter::default(),
    };
    let mut failures: u32 = 0;
    loop {
        let end = match follow_once(client, &mut state).await {
            Ok(end) => end,
            Err(CliError::Api(e)) if state.opened && is_retryable(&e) => {
                failures += 1;
                if failures >= MAX_RECONNECT_FAILURES {
                    return Err(e.into());
                }
                StreamEnd::Dropped { progressed: false }
            }
            Err(e) => return Err(e),
        };
        match end {
            StreamEnd::Ended(view, raw) => return finish(&mut state, &view, &raw),
            StreamEnd::Waiting(view) => return waiting(&mut state, &view),
            StreamEnd::Dropped { progressed } => {
                if progressed {
                    failures = 0;
                }
                if state.saw_terminal {
                    // The terminal entry arrived but `end` did not: the state is final anyway.
                    let (view, raw) = fetch_view(client, run).await?;
                    if view.state.is_terminal() {
                        return finish(&mut state, &view, &raw);
                    }
                }
                let backoff = Duration::from_millis(250u64 << failures.min(5)).min(MAX_BACKOFF);
                output::note(format!(
                    "event stream dropped; reconnecting in {}ms",
                    backoff.as_millis()
                ));
                tokio::time::sleep(backoff).await;
            }
        }
    }
}

fn is_retryable(e: &ApiError) -> bool {
    match e {
        ApiError::Unreachable { .. } | ApiError::Timeout { .. } | ApiError::Transport { .. } => {
            true
        }
        ApiError::Server { status, .. } => *status >= 500,
        ApiError::BadResponse { .. } | ApiError::BadServerUrl { .. } => false,
    }
}

async fn fetch_view(client: &ApiClient, run: &str) -> Result<(RunView, Value), CliError> {
    let value = client.get_run(run).await?;
    let view = RunView::from_value(&value).map_err(|e| ApiError::BadResponse {
        what: "GET /v1/runs/{id}".into(),
        detail: e.to_string(),
    })?;
    Ok((view, value))
}

async fn follow_once(client: &ApiClient, state: &mut WatchState) -> Result<StreamEnd, CliError> {
    let response = client
        .open_events(&state.run, state.last_event_id.as_deref())
        .await?;
    state.opened = true;
    let mut body = response.bytes_stream();
    let mut parser = SseParser::new();
    let mut progressed = false;
    while let Some(chunk) = body.next().await {
        let Ok(chunk) = chunk else {
            return Ok(StreamEnd::Dropped { progressed });
        };
        for event in parser.feed(&chunk) {
            progressed = true;
            if let Some(end) = handle_event(client, state, event).await? {
                return Ok(end);
            }
        }
    }
    Ok(StreamEnd::Dropped { progressed })
}

async fn handle_event(
    client: &ApiClient,
    state: &mut WatchState,
    event: SseEvent,
) -> Result<Option<StreamEnd>, CliError> {
    match event.event.as_str() {
        "log" | "message" => {
            let Ok(value) = serde_json::from_str::<Value>(&event.data) else {
                output::note(format!(
                    "ignoring an event that is not JSON: {}",
                    render::excerpt(&event.data, 120)
                ));
                return Ok(None);
            };
            let record = LogRecord::from_value(value);
            let key = record.id.clone().or_else(|| event.id.clone());
            if let Some(key) = &key {
                if !state.printed.insert(key.clone()) {
                    return Ok(None);
                }
                state.last_event_id = Some(key.clone());
            }
            if state.json {
                output::line(&record.raw)?;
            } else {
                for line in state.repeats.push(state.clock.line(&record)) {
                    output::line(line)?;
                }
            }
            if record.is_terminal() {
                state.saw_terminal = true;
            } else if !state.json && record.moves_progress() {
                if let Ok((view, _)) = fetch_view(client, &state.run).await {
                    if let Some(progress) = &view.progress {
                        flush_repeats(state)?;
                        output::line(format!("  progress: {progress}"))?;
                    }
                }
            }
            if record.is_question() {
                let (view, _) = fetch_view(client, &state.run).await?;
                if view.state == RunState::WaitingForInput {
                    return Ok(Some(StreamEnd::Waiting(view)));
                }
            }
            Ok(None)
        }
        "end" => {
            let sent = serde_json::from_str::<Value>(&event.data)
                .ok()
                .and_then(|raw| RunView::from_value(&raw).ok().map(|view| (view, raw)));
            let (view, raw) = match sent {
                Some(pair) => pair,
                None => fetch_view(client, &state.run).await?,
            };
            Ok(Some(StreamEnd::Ended(view, raw)))
        }
        _ => Ok(None),
    }
}

/// Prints the outcome (with --json: the final RunView as one JSON line, after the entries).
fn finish(state: &mut WatchState, view: &RunView, raw: &Value) -> Result<ExitStatus, CliError> {
    flush_repeats(state)?;
    if state.json {
        output::line(raw)?;
    } else {
        output::block(&render::final_report(view))?;
    }
    Ok(ExitStatus::for_run_state(view.state))
}

/// The count of repeated lines held back, printed before whatever comes next.
fn flush_repeats(state: &mut WatchState) -> Result<(), CliError> {
    if let Some(line) = state.repeats.flush() {
        output::line(line)?;
    }
    Ok(())
}

fn waiting(state: &mut WatchState, view: &RunView) -> Result<ExitStatus, CliError> {
    flush_repeats(state)?;
    if !state.json {
        if view.planning.as_deref() == Some("approval") {
            output::line(format!(
                "run {id} waits for contract approval; review with: loopgate contract {id}; \
                 approve with: loopgate approve {id} [--edit FILE]",
                id = view.id
            ))?;
        } else {
            output::line(format!(
                "run {} is waiting for input; answer with: loopgate answer {} \"TEXT\"",
                view.id, view.id
            ))?;
        }
    }
    Ok(ExitStatus::WaitingForInput)
}
