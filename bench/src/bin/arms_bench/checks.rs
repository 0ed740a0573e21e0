//! The bench's own verdict: check a snapshot out and run the task's verdict checks on it (the
//! acceptance checks, or HumanEval's hidden `check()`), each in its own scratch copy (checks may
//! write files), with `sh -c`. Independent of the auditor.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use loopgate_tests::Stack;

use crate::suite::{SuiteTask, VerdictCheck};

/// Longest a single check may run here, whatever the task file says.
const MAX_CHECK_SECS: u64 = 60;

pub struct CheckOutcome {
    pub passes: bool,
    pub failing: Vec<String>,
}

/// Check out `snapshot` and run the task's checks on it.
pub async fn verify_snapshot(
    stack: &Stack,
    snapshot: &str,
    task: &SuiteTask,
) -> anyhow::Result<CheckOutcome> {
    let tree = tempfile::tempdir()?;
    stack.checkout(snapshot, tree.path()).await?;
    run_checks(tree.path(), &task.verdict_checks()).await
}

/// Write `files` into a fresh directory and run `checks` there (the reference-solution sanity
/// checks of the HumanEval suite).
pub async fn verify_files(
    files: &[(String, String)],
    checks: &[VerdictCheck],
) -> anyhow::Result<CheckOutcome> {
    let tree = tempfile::tempdir()?;
    write_files(tree.path(), files)?;
    run_checks(tree.path(), checks).await
}

async fn run_checks(tree: &Path, checks: &[VerdictCheck]) -> anyhow::Result<CheckOutcome> {
    let mut failing = Vec::new();
    for check in checks {
        if !run_check(tree, check).await? {
            failing.push(check.id.clone());
        }
    }
    Ok(CheckOutcome {
        passes: failing.is_empty(),
        failing,
    })
}

fn write_files(dir: &Path, files: &[(String, String)]) -> anyhow::Result<()> {
    for (rel, content) in files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, content)?;
    }
    Ok(())
}

async fn run_check(tree: &Path, check: &VerdictCheck) -> anyhow::Result<bool> {
    let scratch = tempfile::tempdir()?;
    copy_tree(tree, scratch.path())?;
    write_files(scratch.path(), &check.extra_files)?;
    let timeout_secs = check.timeout_secs.min(MAX_CHECK_SECS);
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&check.command)
        .current_dir(scratch.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    match tokio::time::timeout(Duration::from_secs(timeout_secs), child.wait_with_output()).await {
        Ok(out) => Ok(out?.status.success()),
        Err(_) => Ok(false),
    }
}

fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry?;
        let rel = entry.path().strip_prefix(from)?;
        let target = to.join(rel);
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&target)?;
        } else if entry.file_type().is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}
