//! `loopgate contract RUN` (show the run's contract: planning, proposed or frozen) and
//! `loopgate approve RUN [--edit FILE]` (accept the proposed contract, or replace it).

use loopgate_api::ContractView;
use serde::Deserialize;
use serde_json::Value;

use crate::api_client::ApiClient;
use crate::cli_args::{ApproveArgs, RunJsonArgs};
use crate::errors::CliError;
use crate::exit_status::ExitStatus;
use crate::output;

pub async fn contract(client: &ApiClient, args: &RunJsonArgs) -> Result<ExitStatus, CliError> {
    let view = client.run_contract(&args.run).await?;
    if args.json {
        output::line(view.to_string())?;
        return Ok(ExitStatus::Ok);
    }
    let contract = ContractView::deserialize(&view).unwrap_or_default();
    let status = contract.status.as_str();
    let hint = match status {
        "proposed" => format!(
            " — waiting for approval: loopgate approve {run} (or --edit FILE with an edited copy of this file)",
            run = args.run
        ),
        "planning" => " — not proposed yet (the planning episodes are still running)".to_string(),
        _ => " — it cannot change for the rest of the run".to_string(),
    };
    output::line(format!("# contract {status}{hint}"))?;
    output::block(
        &contract
            .toml
            .lines()
            .map(str::to_string)
            .collect::<Vec<_>>(),
    )?;
    Ok(ExitStatus::Ok)
}

pub async fn approve(client: &ApiClient, args: &ApproveArgs) -> Result<ExitStatus, CliError> {
    let edited = match &args.edit {
        None => None,
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| CliError::ReadInput {
                path: path.clone(),
                source,
            })?;
            // Syntax errors are reported here, naming the file; the manager checks the rest
            // against the run's task.
            loopgate_common::contract_proposal::parse_contract_file(&text).map_err(|source| {
                CliError::InvalidTask {
                    path: path.clone(),
                    source,
                }
            })?;
            Some(text)
        }
    };
    let run = client.approve(&args.run, edited.as_deref()).await?;
    if args.json {
        output::line(run.map(|v| v.to_string()).unwrap_or_default())?;
        return Ok(ExitStatus::Ok);
    }
    let spec = run
        .as_ref()
        .and_then(|v| v.get("spec_hash"))
        .and_then(Value::as_str)
        .map(|h| h.get(..12).unwrap_or(h).to_string())
        .unwrap_or_default();
    let what = if edited.is_some() {
        "replaced and approved"
    } else {
        "approved"
    };
    output::line(format!(
        "contract {spec} {what}; run {} continues (frozen for the rest of the run)",
        args.run
    ))?;
    Ok(ExitStatus::Ok)
}
