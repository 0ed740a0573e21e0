//! `loopgate apply RUN [--repo PATH] [--branch NAME] [--patch FILE] [--key FILE]...`: a run
//! started from a git commit (`submit --repo`) comes back as one commit on a new branch whose
//! parent is that commit, only when `loopgate verify`'s checks hold (signature, blobs,
//! evidence; exit 6 with the reason otherwise, and nothing is written). `--patch FILE`
//! writes the commit as a `git format-patch` mbox file instead. The working tree, the index
//! and HEAD are never touched (`git_repo::write_result`).

use std::collections::BTreeMap;

use loopgate_api::{Certificate, RunView};
use loopgate_common::apply_message::{default_branch, ApplyMessage};
use loopgate_common::state::RepoOrigin;
use serde_json::json;

use crate::api_client::{ApiClient, ApiError};
use crate::cli_args::ApplyArgs;
use crate::commands::verify::{
    check_online, not_completed, report, trusted_keys, Online, Verification,
};
use crate::errors::CliError;
use crate::exit_status::ExitStatus;
use crate::git_repo::{write_result, FinalFile, RepoError, ResultTarget, Written};
use crate::output;

pub async fn apply(client: &ApiClient, args: &ApplyArgs) -> Result<ExitStatus, CliError> {
    let origin = run_origin(client, &args.run).await?;
    let user = trusted_keys(&args.key)?;
    let (verification, cert, blobs) = match check_online(client, &args.run, user, None).await? {
        Online::NotCompleted(problem) => {
            not_completed(&args.run, problem, args.json)?;
            output::note("apply refused: the run's completion is not proven; nothing written");
            return Ok(ExitStatus::NotVerified);
        }
        Online::Checked {
            verification,
            certificate,
            blobs,
        } => (verification, certificate, blobs),
    };
    if !verification.verified {
        report(&verification, args.json)?;
        output::note("apply refused: the run's completion is not proven; nothing written");
        return Ok(ExitStatus::NotVerified);
    }
    let files = final_files(&cert, &blobs)?;
    let message = commit_message(&cert, &verification);
    let target = match &args.patch {
        Some(path) => ResultTarget::Patch(path.clone()),
        None => ResultTarget::Branch(
            args.branch
                .clone()
                .unwrap_or_else(|| default_branch(&cert.run_id)),
        ),
    };
    let written = write_result(&args.repo, &origin, &files, &message, &target)?;
    print_written(&target, &origin, &written, &verification, args.json)?;
    Ok(ExitStatus::Ok)
}

/// The start commit the run recorded; a run not started from a repository has none.
async fn run_origin(client: &ApiClient, run: &str) -> Result<RepoOrigin, CliError> {
    let value = client.get_run(run).await?;
    let view = RunView::from_value(&value).map_err(|e| ApiError::BadResponse {
        what: "GET /v1/runs/{id}".into(),
        detail: e.to_string(),
    })?;
    view.origin
        .ok_or_else(|| RepoError::NoOrigin(run.to_string()).into())
}

/// The certified manifest's files with their re-hashed content.
fn final_files<'a>(
    cert: &'a Certificate,
    blobs: &'a BTreeMap<String, Vec<u8>>,
) -> Result<Vec<FinalFile<'a>>, CliError> {
    cert.manifest
        .entries
        .iter()
        .map(|entry| {
            let content = blobs
                .get(&entry.sha256)
                .ok_or_else(|| ApiError::BadResponse {
                    what: "GET /v1/blobs/{sha256}".into(),
                    detail: format!("'{}' was not downloaded", entry.path),
                })?;
            Ok(FinalFile {
                path: &entry.path,
                mode: entry.mode,
                content,
            })
        })
        .collect()
}

fn commit_message(cert: &Certificate, v: &Verification) -> String {
    ApplyMessage {
        goal: &cert.contract.goal,
        run_id: &cert.run_id,
        snapshot: &cert.snapshot,
        spec_hash: &cert.contract.spec_hash,
        completed_by: v.completed_by,
        signed_by: v.signed_by.as_deref().unwrap_or("?"),
        criteria_passing: v.criteria.iter().filter(|c| c.passed).count(),
        certificate_digest: &v.certificate_digest,
    }
    .text()
}

fn print_written(
    target: &ResultTarget,
    origin: &RepoOrigin,
    written: &Written,
    v: &Verification,
    json: bool,
) -> Result<(), CliError> {
    let (branch, patch) = match target {
        ResultTarget::Branch(name) => (Some(name.clone()), None),
        ResultTarget::Patch(path) => (None, Some(path.display().to_string())),
    };
    if json {
        return output::line(json!({
            "verified": true,
            "run_id": v.run_id,
            "commit": written.commit,
            "tree": written.tree,
            "parent": origin.commit,
            "branch": branch,
            "patch": patch,
            "changed": written.changed,
            "certificate_digest": v.certificate_digest,
        }));
    }
    let short = |id: &str| id.get(..12).unwrap_or(id).to_string();
    let place = match (&branch, &patch) {
        (Some(name), _) => format!("branch {name}"),
        (None, Some(path)) => format!("patch {path} (apply it with `git am {path}`)"),
        (None, None) => String::new(),
    };
    output::block(&[
        format!(
            "verified: run {} completed on snapshot {}",
            v.run_id,
            short(&v.snapshot)
        ),
        format!(
            "{place}: commit {} on {} ({} path(s) changed)",
            short(&written.commit),
            origin.describe(),
            written.changed
        ),
    ])
}
