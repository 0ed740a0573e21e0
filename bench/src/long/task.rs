//! A long task as the bench holds it: `examples/long/<task>/task.toml` (its first `# kind:`
//! comment names the kind), the starting workspace under `workspace/` (uploaded as the run's
//! starting workspace), and `hidden/check.sh`, which stays with the bench: it runs from the
//! repository, so it finds the shared harness in `examples/long/lib/`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use loopgate_common::task::{parse_task_file_toml, TaskFile};

/// Public checks the task file gives no time limit get this many seconds (the auditor's
/// default).
const DEFAULT_CHECK_SECS: u64 = 120;

/// One file of a workspace, as uploaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceFile {
    /// Relative, `/`-separated.
    pub path: String,
    pub bytes: Vec<u8>,
    /// Unix permission bits.
    pub mode: u32,
}

/// One public check (an `[[acceptance]]` entry with a `check`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicCheck {
    pub id: String,
    pub command: String,
    pub timeout: Duration,
}

#[derive(Debug, Clone)]
pub struct LongTask {
    pub name: String,
    pub kind: String,
    pub file: TaskFile,
    /// The starting workspace.
    pub workspace: Vec<WorkspaceFile>,
    /// `hidden/check.sh`, absolute: run by the bench alone, never uploaded.
    pub hidden_check: PathBuf,
}

impl LongTask {
    /// The hidden criteria's ids: one per goal clause, the ids of the `[[acceptance]]` entries.
    pub fn criterion_ids(&self) -> Vec<String> {
        self.file.acceptance.iter().map(|a| a.id.clone()).collect()
    }

    pub fn public_checks(&self) -> Vec<PublicCheck> {
        self.file
            .acceptance
            .iter()
            .filter_map(|a| {
                Some(PublicCheck {
                    id: a.id.clone(),
                    command: a.check.clone()?,
                    timeout: Duration::from_secs(a.timeout_secs.unwrap_or(DEFAULT_CHECK_SECS)),
                })
            })
            .collect()
    }

    /// The goal on one line (the stand-in manager's `Task:` line).
    pub fn goal_line(&self) -> String {
        self.file
            .goal
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// A `[gui]` task: its executors need the `gui` capability, its checks a browser.
    pub fn is_gui(&self) -> bool {
        self.file.gui.is_some()
    }

    /// What the auditor gives a check of this task beyond the worker's environment:
    /// `LOOPGATE_GUI_URL` and `LOOPGATE_GUI_SERVE` from `[gui]` (`GuiSpec::check_env`; the
    /// table was validated when the task was loaded).
    pub fn check_env(&self) -> Vec<(String, String)> {
        self.file
            .gui
            .as_ref()
            .and_then(|gui| gui.validate().ok())
            .map(|gui| gui.check_env())
            .unwrap_or_default()
    }
}

/// `examples/long` of this repository.
pub fn long_suite_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("examples")
        .join("long")
}

/// Every task under `dir` (a directory with a `task.toml`), sorted by name; `only` (if not
/// empty) picks and orders them.
pub fn load_long_suite(dir: &Path, only: &[String]) -> anyhow::Result<Vec<LongTask>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(Result::ok)
        .filter(|e| e.path().join("task.toml").is_file())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    names.sort();
    if !only.is_empty() {
        if let Some(want) = only.iter().find(|w| !names.contains(w)) {
            bail!(
                "no task '{want}' in {} (have: {})",
                dir.display(),
                names.join(", ")
            );
        }
        names = only.to_vec();
    }
    names.iter().map(|n| load_long_task(&dir.join(n))).collect()
}

/// The task in `dir` (`task.toml`, `workspace/`, `hidden/check.sh`), named after `dir`.
pub fn load_long_task(dir: &Path) -> anyhow::Result<LongTask> {
    let dir = dir
        .canonicalize()
        .with_context(|| format!("no task directory {}", dir.display()))?;
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .context("a task directory has a name")?
        .to_string();
    let text = std::fs::read_to_string(dir.join("task.toml"))
        .with_context(|| format!("reading {}/task.toml", dir.display()))?;
    let kind = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("# kind:"))
        .map(|k| k.trim().to_string())
        .unwrap_or_else(|| "unspecified".into());
    let file = parse_task_file_toml(&text).with_context(|| format!("task {name}"))?;
    file.validate().with_context(|| format!("task {name}"))?;
    let hidden_check = dir.join("hidden").join("check.sh");
    if !hidden_check.is_file() {
        bail!("task {name} has no hidden/check.sh");
    }
    Ok(LongTask {
        name,
        kind,
        file,
        workspace: read_workspace(&dir.join("workspace"))?,
        hidden_check,
    })
}

/// Every file under `dir` (none when it does not exist), sorted by path.
pub fn read_workspace(dir: &Path) -> anyhow::Result<Vec<WorkspaceFile>> {
    let mut files = Vec::new();
    if !dir.is_dir() {
        return Ok(files);
    }
    for entry in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let entry = entry?;
        if !entry.file_type().is_file() {
            continue;
        }
        let path = entry
            .path()
            .strip_prefix(dir)?
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/");
        files.push(WorkspaceFile {
            path,
            bytes: std::fs::read(entry.path())?,
            mode: entry.metadata()?.permissions().mode() & 0o777,
        });
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_suite_loads_with_its_hidden_checks_and_workspaces() {
        let tasks = load_long_suite(&long_suite_dir(), &[]).unwrap();
        assert!(tasks.len() >= 6, "{}", tasks.len());
        for task in &tasks {
            assert!(task.hidden_check.is_absolute(), "{}", task.name);
            assert!(!task.workspace.is_empty(), "{}", task.name);
            let ids = task.criterion_ids();
            assert!((8..=15).contains(&ids.len()), "{}: {ids:?}", task.name);
            assert_eq!(task.public_checks().len(), ids.len(), "{}", task.name);
            assert_ne!(task.kind, "unspecified", "{}", task.name);
        }
        let web = tasks.iter().find(|t| t.name == "web-shopping").unwrap();
        assert!(web.is_gui());
        assert_eq!(web.check_env().len(), 2, "{:?}", web.check_env());
        let picked = load_long_suite(
            &long_suite_dir(),
            &["textkit-lib".to_string(), "ledger-cli".to_string()],
        )
        .unwrap();
        let names: Vec<&str> = picked.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["textkit-lib", "ledger-cli"]);
        assert!(load_long_suite(&long_suite_dir(), &["nope".to_string()]).is_err());
    }
}
