//! `loopgate diff RUN [--round N]`: what one round changed, as a `git diff`-style unified diff
//! from the round's base snapshot to its candidate. Manifests are checked against their ids
//! and every blob against its sha256 before anything is shown.

use futures::StreamExt;
use loopgate_common::git_diff::{file_diff, Side};
use loopgate_protocol::snapshot::{diff_manifests, Manifest, ManifestEntry, PathChange};

use crate::api_client::ApiClient;
use crate::cli_args::DiffArgs;
use crate::commands::checkout::{fetch_content, fetch_manifest, pick_round, run_rounds};
use crate::errors::CliError;
use crate::exit_status::ExitStatus;
use crate::output;

/// Files fetched at once.
const PARALLEL_FILES: usize = 8;

/// `A path` / `M path` / `D path` lines.
pub fn name_status(changes: &[PathChange]) -> Vec<String> {
    changes
        .iter()
        .map(|change| {
            let letter = match change {
                PathChange::Added { .. } => 'A',
                PathChange::Modified { .. } => 'M',
                PathChange::Removed { .. } => 'D',
            };
            format!("{letter}\t{}", change.path())
        })
        .collect()
}

fn as_side(fetched: &Option<(u32, Vec<u8>)>) -> Option<Side<'_>> {
    fetched.as_ref().map(|(mode, content)| Side {
        mode: *mode,
        content,
    })
}

async fn side(
    client: &ApiClient,
    entry: Option<&ManifestEntry>,
) -> Result<Option<(u32, Vec<u8>)>, CliError> {
    match entry {
        Some(entry) => Ok(Some((entry.mode, fetch_content(client, entry).await?))),
        None => Ok(None),
    }
}

/// The whole diff text between two verified manifests, files in path order.
async fn render(
    client: &ApiClient,
    base: &Manifest,
    candidate: &Manifest,
) -> Result<String, CliError> {
    let changes = diff_manifests(base, candidate);
    let texts: Vec<Result<String, CliError>> =
        futures::stream::iter(changes.iter().map(|change| async move {
            let path = change.path();
            let old = side(client, base.get(path)).await?;
            let new = side(client, candidate.get(path)).await?;
            Ok(file_diff(path, as_side(&old), as_side(&new)))
        }))
        .buffered(PARALLEL_FILES)
        .collect()
        .await;
    texts
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map(|t| t.concat())
}

pub async fn diff(client: &ApiClient, args: &DiffArgs) -> Result<ExitStatus, CliError> {
    let rounds = run_rounds(client, &args.run).await?;
    let round = pick_round(&args.run, &rounds, args.round, true)?;
    let candidate_id = round.candidate.clone().unwrap_or_default();
    let base = fetch_manifest(client, &round.base_snapshot).await?;
    let candidate = fetch_manifest(client, &candidate_id).await?;
    if args.name_status {
        output::block(&name_status(&diff_manifests(&base, &candidate)))?;
        return Ok(ExitStatus::Ok);
    }
    let text = render(client, &base, &candidate).await?;
    output::note(format!(
        "round {}: {} -> {}",
        round.round,
        &round.base_snapshot[..12.min(round.base_snapshot.len())],
        &candidate_id[..12.min(candidate_id.len())]
    ));
    if !text.is_empty() {
        output::block(&text.lines().map(str::to_string).collect::<Vec<_>>())?;
    }
    Ok(ExitStatus::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_status_letters() {
        let changes = vec![
            PathChange::Added { path: "a".into() },
            PathChange::Modified { path: "m".into() },
            PathChange::Removed { path: "d".into() },
        ];
        assert_eq!(name_status(&changes), vec!["A\ta", "M\tm", "D\td"]);
    }
}
