//! One command run by the bench itself in its own scratch copy of a tree, the way the auditor
//! runs a check: from the copy's root, stdin closed, in its own process group (killed when it
//! ends or runs out of time, through `loopgate-process`), with what it printed kept within
//! bounds. The bench's own verdicts (the public checks between continuation episodes, the
//! hidden checks) run here, never through a role.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use loopgate_common::output_cap::OutputCap;
use loopgate_process::{run_child, shared, with_sink, ChildEnd};

/// Bytes of stdout kept from the start (hidden checks print one short line per criterion).
const STDOUT_HEAD: usize = 64 * 1024;
/// Bytes of stdout and of stderr kept from the end.
const OUTPUT_TAIL: usize = 16 * 1024;
/// Bytes of stderr kept from the start.
const STDERR_HEAD: usize = 4 * 1024;

/// How one command ended and what it printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRun {
    /// The exit code; `None` when a signal ended it or it timed out.
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
}

impl CommandRun {
    pub fn passed(&self) -> bool {
        !self.timed_out && self.exit_code == Some(0)
    }

    /// stdout then stderr, as one text (what a person running the command would see).
    pub fn output(&self) -> String {
        match (self.stdout.trim_end(), self.stderr.trim_end()) {
            ("", err) => err.to_string(),
            (out, "") => out.to_string(),
            (out, err) => format!("{out}\n{err}"),
        }
    }
}

/// What to run: a program with its arguments, extra environment and a time limit.
#[derive(Debug, Clone)]
pub struct ScratchCommand {
    pub program: String,
    pub args: Vec<String>,
    /// Set on top of the bench's own environment.
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
}

impl ScratchCommand {
    /// A shell check as the auditor runs one: `sh -c COMMAND`.
    pub fn shell(command: &str, env: &[(String, String)], timeout: Duration) -> ScratchCommand {
        ScratchCommand {
            program: "sh".into(),
            args: vec!["-c".into(), command.into()],
            env: env.to_vec(),
            timeout,
        }
    }

    /// A shell script run by its path (`sh PATH`), so it can find files beside it.
    pub fn script(path: &Path, env: &[(String, String)], timeout: Duration) -> ScratchCommand {
        ScratchCommand {
            program: "sh".into(),
            args: vec![path.display().to_string()],
            env: env.to_vec(),
            timeout,
        }
    }
}

/// Copy `tree` into a fresh scratch directory and run `command` there.
pub async fn run_in_scratch_copy(
    tree: &Path,
    command: &ScratchCommand,
) -> anyhow::Result<CommandRun> {
    let scratch = tempfile::tempdir()?;
    let work = scratch.path().join("w");
    copy_tree(tree, &work)?;
    run_in(&work, command).await
}

/// Run `command` with `dir` as its working directory.
pub async fn run_in(dir: &Path, command: &ScratchCommand) -> anyhow::Result<CommandRun> {
    let mut child = tokio::process::Command::new(&command.program);
    child.args(&command.args).current_dir(dir);
    for (key, value) in &command.env {
        child.env(key, value);
    }
    let stdout = shared(OutputCap::new(STDOUT_HEAD, OUTPUT_TAIL));
    let stderr = shared(OutputCap::new(STDERR_HEAD, OUTPUT_TAIL));
    let run = run_child(child, command.timeout, stdout.clone(), stderr.clone())
        .await
        .with_context(|| format!("running {}", command.program))?;
    let (exit_code, timed_out) = match run.end {
        ChildEnd::Exited(code) => (code, false),
        ChildEnd::TimedOut(_) => (None, true),
    };
    Ok(CommandRun {
        exit_code,
        timed_out,
        stdout: with_sink(&stdout, |s| s.render()),
        stderr: with_sink(&stderr, |s| s.render()),
    })
}

/// Copy the files, directories and symlinks under `from` to `to` (created), keeping modes.
pub fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in walkdir::WalkDir::new(from).follow_links(false) {
        let entry = entry?;
        let rel = entry.path().strip_prefix(from)?;
        let target = to.join(rel);
        let kind = entry.file_type();
        if kind.is_dir() {
            std::fs::create_dir_all(&target)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[tokio::test]
    async fn a_check_runs_in_a_copy_and_keeps_its_output() {
        let tree = tempfile::tempdir().unwrap();
        std::fs::write(tree.path().join("a.txt"), "hello\n").unwrap();
        std::fs::create_dir(tree.path().join("sub")).unwrap();
        std::fs::write(tree.path().join("sub/b.txt"), "b\n").unwrap();
        let env = vec![("GREETING".to_string(), "hi".to_string())];
        let cases: [(&str, bool, Option<i32>, &str); 3] = [
            (
                "cat a.txt sub/b.txt; echo $GREETING >&2",
                true,
                Some(0),
                "hello\nb\nhi",
            ),
            ("rm a.txt; echo gone; exit 3", false, Some(3), "gone"),
            // The earlier case removed a.txt in its own copy only.
            ("test -f a.txt", true, Some(0), ""),
        ];
        for (command, passed, code, output) in cases {
            let run = run_in_scratch_copy(
                tree.path(),
                &ScratchCommand::shell(command, &env, Duration::from_secs(20)),
            )
            .await
            .unwrap();
            assert_eq!(run.passed(), passed, "{command}: {run:?}");
            assert_eq!(run.exit_code, code, "{command}");
            assert_eq!(run.output(), output, "{command}");
        }
        assert!(tree.path().join("a.txt").is_file(), "the tree is untouched");
    }

    #[tokio::test]
    async fn a_check_past_its_time_is_killed_and_fails() {
        let tree = tempfile::tempdir().unwrap();
        let run = run_in_scratch_copy(
            tree.path(),
            &ScratchCommand::shell("sleep 30", &[], Duration::from_millis(200)),
        )
        .await
        .unwrap();
        assert!(run.timed_out && !run.passed(), "{run:?}");
    }
}
