//! `loopgate status`, `runs`, `log`, `cancel` and `answer`: one request each.

use loopgate_common::budget::BudgetFile;
use serde_json::Value;
use std::io::IsTerminal;

use crate::api_client::{ApiClient, ApiError};
use crate::cli_args::{AnswerArgs, ResumeArgs, RunArg, RunJsonArgs, RunsArgs};
use crate::errors::CliError;
use crate::exit_status::ExitStatus;
use crate::output;
use crate::render;
use crate::run_view::{LogRecord, RunView};

fn bad_response(what: &str, detail: impl ToString) -> CliError {
    ApiError::BadResponse {
        what: what.to_string(),
        detail: detail.to_string(),
    }
    .into()
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// Exit code follows the run's state (3 for non-completed terminal states, 4 when waiting).
pub async fn status(client: &ApiClient, args: &RunJsonArgs) -> Result<ExitStatus, CliError> {
    let value = client.get_run(&args.run).await?;
    let view = RunView::from_value(&value).map_err(|e| bad_response("GET /v1/runs/{id}", e))?;
    if args.json {
        output::line(pretty(&value))?;
    } else {
        let mut lines = render::run_summary(&view, now_ms());
        // Best effort: a step of several attempts says which won (the log holds it).
        if let Ok(log) = client.run_log(&args.run).await {
            let entries = log.get("entries").and_then(Value::as_array);
            lines.extend(entries.and_then(|e| render::attempts_line(e)));
        }
        output::block(&lines)?;
    }
    Ok(ExitStatus::for_run_state(view.state))
}

pub async fn runs(client: &ApiClient, args: &RunsArgs) -> Result<ExitStatus, CliError> {
    let offset = usize::try_from(args.offset).unwrap_or(usize::MAX);
    let limit = usize::try_from(args.limit).ok();
    let value = client
        .list_runs_page(args.run_state(), offset, limit)
        .await?;
    if args.json {
        output::line(pretty(&value))?;
        return Ok(ExitStatus::Ok);
    }
    let list = value
        .get("runs")
        .and_then(Value::as_array)
        .ok_or_else(|| bad_response("GET /v1/runs", "no `runs` array"))?;
    let views = list
        .iter()
        .map(RunView::from_value)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad_response("GET /v1/runs", e))?;
    let width = std::io::stdout().is_terminal().then(render::terminal_width);
    let mut lines = render::runs_table_at(&views, now_ms(), width);
    let next_offset = value
        .get("has_more")
        .and_then(Value::as_bool)
        .filter(|more| *more)
        .map(|_| {
            value
                .get("next_offset")
                .and_then(Value::as_u64)
                .unwrap_or(args.offset + views.len() as u64)
        });
    lines.extend(render::runs_footer(
        args.offset,
        views.len(),
        next_offset,
        args.state.as_deref(),
    ));
    output::block(&lines)?;
    Ok(ExitStatus::Ok)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

pub async fn log(
    client: &ApiClient,
    args: &RunJsonArgs,
    zone: crate::log_clock::Zone,
) -> Result<ExitStatus, CliError> {
    let value = client.run_log(&args.run).await?;
    if args.json {
        output::line(pretty(&value))?;
        return Ok(ExitStatus::Ok);
    }
    let entries = value
        .get("entries")
        .and_then(Value::as_array)
        .ok_or_else(|| bad_response("GET /v1/runs/{id}/log", "no `entries` array"))?;
    let mut clock = crate::log_clock::LogClock::new(zone);
    let lines: Vec<String> = entries
        .iter()
        .map(|entry| clock.line(&LogRecord::from_value(entry.clone())))
        .collect();
    output::block(&render::collapse_repeats(lines))?;
    Ok(ExitStatus::Ok)
}

/// ` (run is STATE)` from a changed run's JSON, when it has a state.
pub(crate) fn state_suffix(answer: &Option<Value>) -> String {
    answer
        .as_ref()
        .and_then(|v| v.get("state"))
        .and_then(Value::as_str)
        .map(|s| format!(" (run is {s})"))
        .unwrap_or_default()
}

pub async fn cancel(client: &ApiClient, args: &RunArg) -> Result<ExitStatus, CliError> {
    let answer = client.cancel(&args.run).await?;
    if args.json {
        output::line(answer.map(|v| v.to_string()).unwrap_or_default())?;
        return Ok(ExitStatus::Ok);
    }
    output::line(format!(
        "cancel requested for {}{}",
        args.run,
        state_suffix(&answer)
    ))?;
    Ok(ExitStatus::Ok)
}

pub async fn answer(client: &ApiClient, args: &AnswerArgs) -> Result<ExitStatus, CliError> {
    if args.text.trim().is_empty() {
        return Err(CliError::Usage("the answer text must not be empty".into()));
    }
    let answer = client.answer(&args.run, &args.text).await?;
    if args.json {
        output::line(answer.map(|v| v.to_string()).unwrap_or_default())?;
        return Ok(ExitStatus::Ok);
    }
    output::line(format!(
        "answer sent to {}{}",
        args.run,
        state_suffix(&answer)
    ))?;
    Ok(ExitStatus::Ok)
}

pub async fn resume(client: &ApiClient, args: &ResumeArgs) -> Result<ExitStatus, CliError> {
    let budget = BudgetFile {
        max_rounds: args.max_rounds,
        max_total_tokens: args.max_total_tokens,
        max_cost_usd: args.max_cost_usd,
        max_wall_secs: args.max_wall_secs,
        attempts: args.attempts,
        ..BudgetFile::default()
    };
    let answer = client.resume(&args.run, budget).await?;
    if args.json {
        output::line(answer.map(|v| v.to_string()).unwrap_or_default())?;
    } else {
        let generation = answer
            .as_ref()
            .and_then(|v| v.get("generation"))
            .and_then(Value::as_u64)
            .map(|g| format!(" as generation {g}"))
            .unwrap_or_default();
        output::line(format!(
            "resumed {}{generation}{}",
            args.run,
            state_suffix(&answer)
        ))?;
    }
    Ok(ExitStatus::Ok)
}
