//! `loopgate log RUN --round N --transcript`: what the agent did in round N (its episode
//! transcript, redacted as the executor stored it), as readable lines or the server's JSON.

use loopgate_api::Transcript;

use crate::api_client::{ApiClient, ApiError};
use crate::cli_args::RunJsonArgs;
use crate::errors::CliError;
use crate::exit_status::ExitStatus;
use crate::log_clock::transcript_lines;
use crate::output;

pub async fn transcript(
    client: &ApiClient,
    args: &RunJsonArgs,
    round: u32,
) -> Result<ExitStatus, CliError> {
    let value = client.round_transcript(&args.run, round).await?;
    if args.json {
        output::line(serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string()))?;
        return Ok(ExitStatus::Ok);
    }
    let transcript: Transcript =
        serde_json::from_value(value).map_err(|e| ApiError::BadResponse {
            what: "GET /v1/runs/{id}/rounds/{n}/transcript".into(),
            detail: e.to_string(),
        })?;
    output::block(&transcript_lines(&transcript))?;
    Ok(ExitStatus::Ok)
}
