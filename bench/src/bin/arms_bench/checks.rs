//! The bench's own verdict: check a snapshot out and run every acceptance check on it, each in
//! its own scratch copy (checks may write files), with `sh -c`. Independent of the auditor.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use loopgate_tests::Stack;

use crate::suite::SuiteTask;

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
    let mut failing = Vec::new();
    for (id, check, timeout) in task.checks() {
        if !run_check(tree.path(), &check, timeout.min(MAX_CHECK_SECS)).await? {
            failing.push(id);
        }
    }
    Ok(CheckOutcome {
        passes: failing.is_empty(),
        failing,
    })
}

async fn run_check(tree: &Path, check: &str, timeout_secs: u64) -> anyhow::Result<bool> {
    let scratch = tempfile::tempdir()?;
    copy_tree(tree, scratch.path())?;
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(check)
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
