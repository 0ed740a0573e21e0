//! `loopgate submit TASK.toml [--workspace DIR | --repo PATH [--ref REV] [--include-dirty]]
//! [--watch] [--json]`.

use std::path::Path;

use base64::Engine as _;
use loopgate_api::{SubmitRequest, UploadedFile, WorkspaceUpload};
use loopgate_common::state::RepoOrigin;
use loopgate_common::task::{parse_task_file_toml, TaskFile};
use serde_json::Value;

use crate::api_client::{ApiClient, ApiError};
use crate::cli_args::SubmitArgs;
use crate::commands::watch;
use crate::errors::CliError;
use crate::exit_status::ExitStatus;
use crate::git_repo::read_start;
use crate::output;
use crate::workspace_upload::{collect_workspace, DEFAULT_MAX_TOTAL_BYTES};

/// Reads, parses and validates a task file; errors name the file and the bad field.
pub fn load_task(path: &Path) -> Result<TaskFile, CliError> {
    load_task_with_goal(path, None)
}

/// As [`load_task`], with the file's goal replaced by `goal` when one is given.
pub fn load_task_with_goal(path: &Path, goal: Option<&str>) -> Result<TaskFile, CliError> {
    let text = std::fs::read_to_string(path).map_err(|source| CliError::ReadInput {
        path: path.to_path_buf(),
        source,
    })?;
    let invalid = |source| CliError::InvalidTask {
        path: path.to_path_buf(),
        source,
    };
    let mut task = parse_task_file_toml(&text).map_err(invalid)?;
    if let Some(goal) = goal {
        task.goal = goal.to_string();
    }
    task.validate().map_err(invalid)?;
    Ok(task)
}

pub async fn submit(client: &ApiClient, args: &SubmitArgs) -> Result<ExitStatus, CliError> {
    let mut task = load_task(&args.task)?;
    if let Some(attempts) = args.attempts {
        // In range by the flag's parser; the manager validates the task again.
        task.budget.attempts = Some(attempts);
    }
    let (workspace, origin) = match (&args.workspace, &args.repo) {
        (Some(dir), _) => (Some(collect_workspace(dir, DEFAULT_MAX_TOTAL_BYTES)?), None),
        (None, Some(repo)) => {
            let (upload, origin) = repo_workspace(repo, args)?;
            (Some(upload), Some(origin))
        }
        (None, None) => (None, None),
    };
    let body = SubmitRequest {
        task,
        workspace,
        origin,
    };
    let created = client.create_run(&body).await?;
    let run_id = created
        .get("id")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| ApiError::BadResponse {
            what: "POST /v1/runs".into(),
            detail: "the created run has no id".into(),
        })?;
    if args.json {
        output::line(&created)?;
    } else {
        output::line(&run_id)?;
    }
    if args.watch {
        return watch::watch(client, &run_id, args.json, crate::log_clock::Zone::Utc).await;
    }
    if !args.json {
        output::note(format!("follow it: loopgate watch {run_id}"));
    }
    Ok(ExitStatus::Ok)
}

/// The starting workspace from a commit of the repository at `repo`, and the commit; the
/// working-tree changes `--include-dirty` takes are listed first (on stderr).
fn repo_workspace(
    repo: &Path,
    args: &SubmitArgs,
) -> Result<(WorkspaceUpload, RepoOrigin), CliError> {
    let start = read_start(
        repo,
        args.rev.as_deref(),
        args.include_dirty,
        DEFAULT_MAX_TOTAL_BYTES,
    )?;
    if !start.dirty.is_empty() {
        let mut lines = vec![format!(
            "uploading {} tracked file(s) as modified in the working tree (--include-dirty):",
            start.dirty.len()
        )];
        lines.extend(start.dirty.iter().map(|p| format!("  {p}")));
        output::note(lines.join("\n"));
    }
    output::note(format!(
        "starting from {} (tree {}, {} files)",
        start.origin.describe(),
        start.origin.tree.get(..12).unwrap_or(&start.origin.tree),
        start.files.len()
    ));
    let files = start
        .files
        .into_iter()
        .map(|f| UploadedFile {
            path: f.path,
            mode: f.mode,
            content_b64: base64::engine::general_purpose::STANDARD.encode(&f.content),
        })
        .collect();
    Ok((WorkspaceUpload { files }, start.origin))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn invalid_task_files_fail_locally_naming_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let cases: &[(&str, Option<&str>)] = &[
            (
                "goal = \"x\"\n[[acceptance]]\nid = \"a\"\n",
                Some("acceptance[0].check"),
            ),
            (
                "goal = \"  \"\n[[acceptance]]\nid = \"a\"\ncheck = \"true\"\n",
                Some("goal"),
            ),
            ("goal = \"x\"\nbogus = 1\n", None),
        ];
        for (text, field) in cases {
            let path = dir.path().join("task.toml");
            std::fs::write(&path, text).unwrap();
            match load_task(&path).unwrap_err() {
                CliError::InvalidTask { source, .. } => {
                    assert_eq!(source.field_name(), *field, "{text}")
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        assert!(matches!(
            load_task(&dir.path().join("missing.toml")),
            Err(CliError::ReadInput { .. })
        ));
    }

    #[test]
    fn body_has_task_and_optional_workspace() {
        let task = TaskFile {
            goal: "g".into(),
            ..TaskFile::default()
        };
        let without = serde_json::to_value(SubmitRequest {
            task: task.clone(),
            workspace: None,
            origin: None,
        })
        .unwrap();
        assert_eq!(without["task"]["goal"], "g");
        assert!(without.get("workspace").is_none());
        let with = serde_json::to_value(SubmitRequest {
            task,
            workspace: Some(loopgate_api::WorkspaceUpload { files: vec![] }),
            origin: None,
        })
        .unwrap();
        assert_eq!(with["workspace"]["files"], serde_json::json!([]));
    }
}
