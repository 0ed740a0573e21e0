//! `loopgate instruct`, `pause`, `unpause` and `continue`: steering a run, one request each.

use loopgate_api::ContinueRequest;
use loopgate_common::budget::BudgetFile;
use loopgate_common::decide::validate_instruction;
use serde_json::Value;

use crate::api_client::ApiClient;
use crate::cli_args::{ContinueArgs, InstructArgs, RunArg};
use crate::commands::run_commands::state_suffix;
use crate::commands::submit::load_task_with_goal;
use crate::errors::CliError;
use crate::exit_status::ExitStatus;
use crate::output;

fn report(json: bool, answer: Option<Value>, line: String) -> Result<ExitStatus, CliError> {
    if json {
        output::line(answer.map(|v| v.to_string()).unwrap_or_default())?;
    } else {
        output::line(format!("{line}{}", state_suffix(&answer)))?;
    }
    Ok(ExitStatus::Ok)
}

pub async fn instruct(client: &ApiClient, args: &InstructArgs) -> Result<ExitStatus, CliError> {
    // Checked here too, so a bad instruction is a usage error before any request.
    if let Err(e) = validate_instruction(&args.text) {
        return Err(CliError::Usage(e.to_string()));
    }
    let answer = client.instruct(&args.run, &args.text).await?;
    report(
        args.json,
        answer,
        format!("instruction sent to {}", args.run),
    )
}

pub async fn pause(client: &ApiClient, args: &RunArg) -> Result<ExitStatus, CliError> {
    let answer = client.pause_or_unpause(&args.run, "pause").await?;
    report(args.json, answer, format!("paused {}", args.run))
}

pub async fn unpause(client: &ApiClient, args: &RunArg) -> Result<ExitStatus, CliError> {
    let answer = client.pause_or_unpause(&args.run, "unpause").await?;
    report(args.json, answer, format!("unpaused {}", args.run))
}

pub async fn continue_run(client: &ApiClient, args: &ContinueArgs) -> Result<ExitStatus, CliError> {
    let task = match &args.task {
        Some(path) => Some(load_task_with_goal(path, args.goal.as_deref())?),
        None => None,
    };
    let budget = BudgetFile {
        max_rounds: args.max_rounds,
        max_total_tokens: args.max_total_tokens,
        max_cost_usd: args.max_cost_usd,
        max_wall_secs: args.max_wall_secs,
        attempts: args.attempts,
        ..BudgetFile::default()
    };
    let body = ContinueRequest {
        goal: if task.is_some() {
            None
        } else {
            args.goal.clone()
        },
        task,
        budget: (budget != BudgetFile::default()).then_some(budget),
    };
    let answer = client.continue_run(&args.run, &body).await?;
    let generation = answer
        .as_ref()
        .and_then(|v| v.get("generation"))
        .and_then(Value::as_u64)
        .map(|g| format!(" as generation {g}"))
        .unwrap_or_default();
    report(
        args.json,
        answer,
        format!("continued {}{generation}", args.run),
    )
}
