//! `loopgate submit TASK.toml [--workspace DIR] [--watch] [--json]`.

use std::path::Path;

use loopgate_api::SubmitRequest;
use loopgate_common::task::{parse_task_file_toml, TaskFile};
use serde_json::Value;

use crate::api_client::{ApiClient, ApiError};
use crate::cli_args::SubmitArgs;
use crate::commands::watch;
use crate::errors::CliError;
use crate::exit_status::ExitStatus;
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
    let task = load_task(&args.task)?;
    let workspace = match &args.workspace {
        Some(dir) => Some(collect_workspace(dir, DEFAULT_MAX_TOTAL_BYTES)?),
        None => None,
    };
    let body = SubmitRequest { task, workspace };
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
        return watch::watch(client, &run_id, args.json).await;
    }
    if !args.json {
        output::note(format!("follow it: loopgate watch {run_id}"));
    }
    Ok(ExitStatus::Ok)
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
        })
        .unwrap();
        assert_eq!(without["task"]["goal"], "g");
        assert!(without.get("workspace").is_none());
        let with = serde_json::to_value(SubmitRequest {
            task,
            workspace: Some(loopgate_api::WorkspaceUpload { files: vec![] }),
        })
        .unwrap();
        assert_eq!(with["workspace"]["files"], serde_json::json!([]));
    }
}
