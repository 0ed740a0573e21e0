//! The child processes of `loopgate up`: spawned into their own process group (so a terminal's
//! Ctrl-C reaches only `loopgate`, which then stops them in order), logged to files, stopped
//! with SIGTERM and, after a grace period, SIGKILL.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use super::error::StackError;
use super::stack_guard::StackGuard;
use crate::output;

/// Env vars that would override the generated config files in the daemons.
const OVERRIDING_ENV: &[&str] = &[
    "LOOPGATE_NATS_URL",
    "LOOPGATE_REDIS_URL",
    "LOOPGATE_REDIS_SENTINELS",
    "LOOPGATE_REDIS_MASTER_NAME",
    "LOOPGATE_HTTP_ADDR",
];

/// How much log an "exited unexpectedly" report shows.
const LOG_TAIL_BYTES: u64 = 4096;
const LOG_TAIL_LINES: usize = 30;

/// Children are stopped stage by stage: the loopgate daemons first, then the servers they use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Servers,
    Daemons,
}

/// A child restarted when it exits may exit this often within [`RESTART_WINDOW`]; once more
/// and the stack stops, as for any other child.
const MAX_RESTARTS: usize = 5;
const RESTART_WINDOW: Duration = Duration::from_secs(600);

pub struct ManagedChild {
    pub name: String,
    pub stage: Stage,
    pub log_path: PathBuf,
    child: Child,
    exited: Option<ExitStatus>,
    /// How it was started, to start it the same way again.
    launch: Launch,
    /// `Some` for a child that is restarted when it exits (the `--ha` Redis group, whose
    /// sentinels fail over meanwhile): when it was restarted.
    restarts: Option<Vec<Instant>>,
}

/// A child's program, arguments, extra environment and log file.
struct Launch {
    program: PathBuf,
    args: Vec<OsString>,
    env: Vec<(String, String)>,
    log_path: PathBuf,
}

impl Launch {
    fn new(program: &Path, args: &[OsString], env: &[(&str, String)], log_path: &Path) -> Launch {
        Launch {
            program: program.to_path_buf(),
            args: args.to_vec(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            log_path: log_path.to_path_buf(),
        }
    }

    /// Starts it in its own process group, its output in the log file (truncated first, or
    /// appended to for a restart).
    fn start(&self, name: &str, append: bool) -> Result<Child, StackError> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(&self.log_path)
            .map_err(|source| StackError::Io {
                context: format!("opening {}", self.log_path.display()),
                source,
            })?;
        let log_err = log.try_clone().map_err(|source| StackError::Io {
            context: format!("opening {}", self.log_path.display()),
            source,
        })?;
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err))
            .process_group(0)
            .kill_on_drop(true);
        for var in OVERRIDING_ENV {
            command.env_remove(var);
        }
        for (key, value) in &self.env {
            command.env(key, value);
        }
        command.spawn().map_err(|source| StackError::Spawn {
            name: name.to_string(),
            program: self.program.clone(),
            source,
        })
    }
}

/// What is known about a child that exited on its own.
#[derive(Debug, Clone)]
pub struct ChildExit {
    pub name: String,
    pub status: String,
    pub log_path: PathBuf,
    pub log_tail: String,
}

#[derive(Default)]
pub struct Supervisor {
    children: Vec<ManagedChild>,
    /// Stops the children should `up` die without stopping them (see `stack_guard`).
    guard: Option<StackGuard>,
}

impl Supervisor {
    /// A supervisor without a guard (the tests of the supervisor alone).
    #[cfg(test)]
    pub fn new() -> Supervisor {
        Supervisor::default()
    }

    /// A supervisor whose children are also stopped by a guard process (its log at
    /// `guard_log`) when `up` is killed. Without a guard (it could not start) `up` still runs
    /// and says what that costs.
    pub fn guarded(guard_log: &Path) -> Supervisor {
        let guard = match StackGuard::start(guard_log) {
            Ok(guard) => Some(guard),
            Err(e) => {
                output::note(format!(
                    "cannot start the stack guard ({e}): if loopgate up is killed with SIGKILL, \
                     its servers and daemons keep running"
                ));
                None
            }
        };
        Supervisor {
            children: Vec::new(),
            guard,
        }
    }

    /// Starts `program args` with stdout and stderr written to `log_path` (truncated first).
    pub fn spawn(
        &mut self,
        name: &str,
        stage: Stage,
        program: &Path,
        args: &[OsString],
        log_path: &Path,
    ) -> Result<(), StackError> {
        self.spawn_with_env(name, stage, program, args, log_path, &[])
    }

    /// As [`Supervisor::spawn`], with extra environment variables (secrets never go in args).
    pub fn spawn_with_env(
        &mut self,
        name: &str,
        stage: Stage,
        program: &Path,
        args: &[OsString],
        log_path: &Path,
        env: &[(&str, String)],
    ) -> Result<(), StackError> {
        let launch = Launch::new(program, args, env, log_path);
        self.start_managed(name, stage, launch, None)
    }

    /// As [`Supervisor::spawn`], for a child that is started again when it exits (up to
    /// [`MAX_RESTARTS`] times in [`RESTART_WINDOW`]) instead of stopping the stack.
    pub fn spawn_restarted_on_exit(
        &mut self,
        name: &str,
        stage: Stage,
        program: &Path,
        args: &[OsString],
        log_path: &Path,
    ) -> Result<(), StackError> {
        let launch = Launch::new(program, args, &[], log_path);
        self.start_managed(name, stage, launch, Some(Vec::new()))
    }

    fn start_managed(
        &mut self,
        name: &str,
        stage: Stage,
        launch: Launch,
        restarts: Option<Vec<Instant>>,
    ) -> Result<(), StackError> {
        let child = launch.start(name, false)?;
        self.watch(stage, &child);
        self.children.push(ManagedChild {
            name: name.to_string(),
            stage,
            log_path: launch.log_path.clone(),
            child,
            exited: None,
            launch,
            restarts,
        });
        Ok(())
    }

    /// Tells the guard about a new child's process group.
    fn watch(&mut self, stage: Stage, child: &Child) {
        if let (Some(guard), Some(group)) = (self.guard.as_mut(), child.id()) {
            // `process_group(0)`: the child's pid is its group's id.
            guard.watch(stage == Stage::Daemons, group);
        }
    }

    /// Starts child `index` again if it is one that is restarted on exit and has restarts
    /// left; `Ok(false)` when it is not restarted.
    fn restart(&mut self, index: usize, status: &str) -> Result<bool, StackError> {
        let Some(managed) = self.children.get_mut(index) else {
            return Ok(false);
        };
        let Some(restarts) = managed.restarts.as_mut() else {
            return Ok(false);
        };
        restarts.retain(|at| at.elapsed() < RESTART_WINDOW);
        if restarts.len() >= MAX_RESTARTS {
            output::note(format!(
                "{} exited ({status}) for the {} time within {} min: not restarting it",
                managed.name,
                ordinal(MAX_RESTARTS + 1),
                RESTART_WINDOW.as_secs() / 60
            ));
            return Ok(false);
        }
        restarts.push(Instant::now());
        output::note(format!(
            "{} exited ({status}); starting it again (restart {} of {MAX_RESTARTS} allowed in {} min)",
            managed.name,
            restarts.len(),
            RESTART_WINDOW.as_secs() / 60
        ));
        let child = managed.launch.start(&managed.name, true)?;
        let stage = managed.stage;
        self.watch(stage, &child);
        if let Some(managed) = self.children.get_mut(index) {
            managed.child = child;
            managed.exited = None;
        }
        Ok(true)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.children.iter().map(|c| c.name.as_str())
    }

    /// The first child found to have exited, without waiting.
    pub fn find_exited(&mut self) -> Option<ChildExit> {
        self.first_exited().map(|(_, exit)| exit)
    }

    /// The first child found to have exited, with its index.
    fn first_exited(&mut self) -> Option<(usize, ChildExit)> {
        for (index, managed) in self.children.iter_mut().enumerate() {
            if managed.exited.is_none() {
                if let Ok(Some(status)) = managed.child.try_wait() {
                    managed.exited = Some(status);
                }
            }
            if let Some(status) = managed.exited {
                return Some((index, exit_report(managed, status)));
            }
        }
        None
    }

    /// Waits until a child exits that is not restarted (forever when there are none). A child
    /// restarted on exit is started again meanwhile.
    pub async fn wait_any_exit(&mut self) -> ChildExit {
        loop {
            let (index, exit) = match self.first_exited() {
                Some(found) => found,
                None => self.next_exit().await,
            };
            match self.restart(index, &exit.status) {
                Ok(true) => continue,
                Ok(false) => return exit,
                Err(e) => {
                    return ChildExit {
                        status: format!("{}, and could not be started again: {e}", exit.status),
                        ..exit
                    }
                }
            }
        }
    }

    /// Waits for the next child to exit.
    async fn next_exit(&mut self) -> (usize, ChildExit) {
        if self.children.is_empty() {
            return std::future::pending().await;
        }
        let waits = self
            .children
            .iter_mut()
            .map(|managed| Box::pin(managed.child.wait()));
        let (result, index, _) = futures::future::select_all(waits).await;
        let managed = &mut self.children[index];
        let exit = match result {
            Ok(status) => {
                managed.exited = Some(status);
                exit_report(managed, status)
            }
            Err(e) => ChildExit {
                name: managed.name.clone(),
                status: format!("could not be waited on: {e}"),
                log_path: managed.log_path.clone(),
                log_tail: log_tail(&managed.log_path),
            },
        };
        (index, exit)
    }

    /// Stops every child: the daemons first, then the servers; SIGTERM, then SIGKILL after
    /// that stage's grace period.
    pub async fn shutdown(&mut self, daemon_grace: Duration, server_grace: Duration) {
        for (stage, grace) in [
            (Stage::Daemons, daemon_grace),
            (Stage::Servers, server_grace),
        ] {
            let running: Vec<&mut ManagedChild> = self
                .children
                .iter_mut()
                .filter(|c| c.stage == stage && c.exited.is_none())
                .collect();
            for managed in &running {
                if let Some(pid) = managed.child.id() {
                    send_sigterm(pid).await;
                }
            }
            let stops = running.into_iter().map(|managed| async move {
                match tokio::time::timeout(grace, managed.child.wait()).await {
                    Ok(Ok(status)) => managed.exited = Some(status),
                    _ => {
                        let _ = managed.child.start_kill();
                        if let Ok(status) = managed.child.wait().await {
                            managed.exited = Some(status);
                        }
                    }
                }
            });
            futures::future::join_all(stops).await;
        }
    }
}

impl Supervisor {
    /// SIGKILLs and reaps every child still running, then lets the guard go.
    pub async fn kill_all(&mut self) {
        for managed in self.children.iter_mut().filter(|c| c.exited.is_none()) {
            let _ = managed.child.start_kill();
            if let Ok(status) = managed.child.wait().await {
                managed.exited = Some(status);
            }
        }
        if let Some(guard) = self.guard.as_mut() {
            guard.release();
        }
    }
}

/// `6th`, for the restart note.
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

fn exit_report(managed: &ManagedChild, status: ExitStatus) -> ChildExit {
    ChildExit {
        name: managed.name.clone(),
        status: status.to_string(),
        log_path: managed.log_path.clone(),
        log_tail: log_tail(&managed.log_path),
    }
}

/// SIGTERM through kill(1): this crate forbids `unsafe`, so no direct kill(2).
async fn send_sigterm(pid: u32) {
    let _ = Command::new("kill")
        .args(["-s", "TERM", &pid.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await;
}

/// The last lines of a log file (lossy UTF-8), empty when it can't be read.
pub fn log_tail(path: &Path) -> String {
    let read = || -> std::io::Result<String> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(LOG_TAIL_BYTES)))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let lines: Vec<&str> = text.lines().collect();
        let start = lines.len().saturating_sub(LOG_TAIL_LINES);
        Ok(lines[start..].join("\n"))
    };
    read().unwrap_or_default()
}

impl From<ChildExit> for StackError {
    fn from(exit: ChildExit) -> StackError {
        StackError::ChildExited {
            name: exit.name,
            status: exit.status,
            log_path: exit.log_path,
            log_tail: exit.log_tail,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn sh(script: &str) -> (PathBuf, Vec<OsString>) {
        (PathBuf::from("/bin/sh"), vec!["-c".into(), script.into()])
    }

    #[tokio::test]
    async fn reports_the_child_that_died_with_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut sup = Supervisor::new();
        let (prog, args) = sh("exec sleep 30");
        sup.spawn(
            "sleeper",
            Stage::Servers,
            &prog,
            &args,
            &dir.path().join("sleeper.log"),
        )
        .unwrap();
        let (prog, args) = sh("echo starting; echo 'boom: bad config' >&2; exit 3");
        sup.spawn(
            "crasher",
            Stage::Daemons,
            &prog,
            &args,
            &dir.path().join("crasher.log"),
        )
        .unwrap();
        let exit = tokio::time::timeout(Duration::from_secs(20), sup.wait_any_exit())
            .await
            .unwrap();
        assert_eq!(exit.name, "crasher");
        assert!(
            exit.log_tail.contains("boom: bad config"),
            "{}",
            exit.log_tail
        );
        assert!(exit.status.contains('3'), "{}", exit.status);
        sup.shutdown(Duration::from_secs(5), Duration::from_secs(5))
            .await;
        assert!(sup.children.iter().all(|c| c.exited.is_some()));
    }

    #[tokio::test]
    async fn a_child_restarted_on_exit_is_started_again_until_its_restarts_run_out() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("flaky.log");
        let mut sup = Supervisor::new();
        let (prog, args) = sh("echo started; exit 4");
        sup.spawn_restarted_on_exit("flaky", Stage::Servers, &prog, &args, &log)
            .unwrap();
        let exit = tokio::time::timeout(Duration::from_secs(20), sup.wait_any_exit())
            .await
            .unwrap();
        assert_eq!(exit.name, "flaky");
        assert!(exit.status.contains('4'), "{}", exit.status);
        // The first start and MAX_RESTARTS more, each appending to the one log.
        let starts = std::fs::read_to_string(&log)
            .unwrap()
            .matches("started")
            .count();
        assert_eq!(starts, MAX_RESTARTS + 1);
        assert_eq!(ordinal(MAX_RESTARTS + 1), "6th");
    }

    #[test]
    fn ordinals() {
        for (n, want) in [
            (1, "1st"),
            (2, "2nd"),
            (3, "3rd"),
            (4, "4th"),
            (11, "11th"),
            (12, "12th"),
            (13, "13th"),
            (21, "21st"),
            (22, "22nd"),
            (101, "101st"),
            (111, "111th"),
        ] {
            assert_eq!(ordinal(n), want, "{n}");
        }
    }

    #[tokio::test]
    async fn shutdown_escalates_to_sigkill() {
        let dir = tempfile::tempdir().unwrap();
        let mut sup = Supervisor::new();
        let (prog, args) = sh("trap '' TERM; while :; do sleep 1; done");
        sup.spawn(
            "stubborn",
            Stage::Daemons,
            &prog,
            &args,
            &dir.path().join("s.log"),
        )
        .unwrap();
        let (prog, args) = sh("exec sleep 30");
        sup.spawn(
            "polite",
            Stage::Servers,
            &prog,
            &args,
            &dir.path().join("p.log"),
        )
        .unwrap();
        assert!(sup.find_exited().is_none());
        tokio::time::timeout(
            Duration::from_secs(20),
            sup.shutdown(Duration::from_millis(300), Duration::from_millis(300)),
        )
        .await
        .unwrap();
        let statuses: Vec<Option<ExitStatus>> = sup.children.iter().map(|c| c.exited).collect();
        assert!(statuses.iter().all(Option::is_some), "{statuses:?}");
    }

    #[tokio::test]
    async fn kill_all_reaps_everything() {
        let dir = tempfile::tempdir().unwrap();
        let mut sup = Supervisor::new();
        let (prog, args) = sh("trap '' TERM; exec sleep 30");
        sup.spawn("a", Stage::Daemons, &prog, &args, &dir.path().join("a.log"))
            .unwrap();
        tokio::time::timeout(Duration::from_secs(20), sup.kill_all())
            .await
            .unwrap();
        assert!(sup.children.iter().all(|c| c.exited.is_some()));
    }

    #[test]
    fn log_tail_keeps_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.log");
        let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&path, text).unwrap();
        let tail = log_tail(&path);
        assert!(tail.starts_with("line 70"), "{tail}");
        assert!(tail.ends_with("line 99"));
        assert_eq!(log_tail(&dir.path().join("missing")), "");
    }
}
