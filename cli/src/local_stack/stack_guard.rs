//! The stack's guard: a small `loopgate stack-guard` process that `up` starts first and tells
//! about every child's process group over a pipe. When `up` stops its stack itself it says
//! `release` and the guard exits; when `up` dies without doing so (SIGKILL, OOM kill, a crash),
//! the pipe closes and the guard stops what `up` left: the daemons first, then the servers,
//! SIGTERM and, after a grace period, SIGKILL, as `up` itself would.
//!
//! Each child runs in its own process group (so a terminal's Ctrl-C reaches only `up`), which is
//! why nothing else takes them down with `up`. A pipe is used instead of `PR_SET_PDEATHSIG`
//! because that needs `unsafe` in `pre_exec` (this workspace forbids it) and fires when the
//! forking *thread* exits, not the process.

use std::io::Write;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{kill_process_group, test_kill_process_group, Pid, Signal};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::error::{io_err, StackError};
use crate::output;

/// The hidden subcommand that runs the guard.
pub const GUARD_COMMAND: &str = "stack-guard";
/// How long the guard waits for one stage's groups to exit after SIGTERM.
const STAGE_GRACE: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(100);

/// `up`'s end of the guard: the pipe it writes each child's process group to.
pub(super) struct StackGuard {
    child: Child,
    to_guard: Option<ChildStdin>,
}

impl StackGuard {
    /// Starts the guard (this same executable), its output appended to `log_path`.
    pub(super) fn start(log_path: &Path) -> std::io::Result<StackGuard> {
        use std::os::unix::process::CommandExt;
        let log = std::fs::File::create(log_path)?;
        let mut child = Command::new(std::env::current_exe()?)
            .arg(GUARD_COMMAND)
            .stdin(Stdio::piped())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            // Its own group: a terminal's Ctrl-C (which `up` answers by stopping the stack)
            // does not reach it.
            .process_group(0)
            .spawn()?;
        let to_guard = child.stdin.take();
        Ok(StackGuard { child, to_guard })
    }

    /// Tells the guard about a child in process group `group`: one of the loopgate daemons
    /// (stopped first) or a server they use.
    pub(super) fn watch(&mut self, daemon: bool, group: u32) {
        let word = if daemon { "daemon" } else { "server" };
        self.send(&format!("{word} {group}\n"));
    }

    /// `up` stopped its children itself: the guard exits without touching anything.
    pub(super) fn release(&mut self) {
        self.send("release\n");
        self.to_guard = None;
        let deadline = Instant::now() + Duration::from_secs(2);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A line to the guard. A guard that is gone (killed by hand) only costs the protection it
    /// gave: `up` runs on.
    fn send(&mut self, line: &str) {
        let sent = self
            .to_guard
            .as_mut()
            .map(|pipe| pipe.write_all(line.as_bytes()).and_then(|()| pipe.flush()));
        if let Some(Err(_)) = sent {
            self.to_guard = None;
        }
    }
}

/// What the guard was told: the process groups per stage, and whether `up` released it.
#[derive(Debug, Default, PartialEq)]
struct Watched {
    daemons: Vec<i32>,
    servers: Vec<i32>,
    released: bool,
}

impl Watched {
    /// One line from `up`; anything else is ignored (the pipe is `up`'s alone).
    fn read(&mut self, line: &str) {
        let mut words = line.split_whitespace();
        match (
            words.next(),
            words.next().and_then(|g| g.parse::<i32>().ok()),
        ) {
            (Some("release"), None) => self.released = true,
            (Some("daemon"), Some(group)) if group > 1 => self.daemons.push(group),
            (Some("server"), Some(group)) if group > 1 => self.servers.push(group),
            _ => {}
        }
    }
}

/// The guard itself: reads `up`'s lines until the pipe closes, then stops what is left unless
/// `up` released it.
pub async fn serve() -> Result<(), StackError> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut watched = Watched::default();
    while let Some(line) = lines
        .next_line()
        .await
        .map_err(io_err("stack-guard: reading from loopgate up"))?
    {
        watched.read(&line);
        if watched.released {
            return Ok(());
        }
    }
    output::note(format!(
        "stack-guard: loopgate up is gone without stopping its stack; stopping {} daemon(s) and {} server(s)",
        watched.daemons.len(),
        watched.servers.len()
    ));
    stop_groups(&watched.daemons).await;
    stop_groups(&watched.servers).await;
    Ok(())
}

/// SIGTERM to every group still there, SIGKILL to those left after [`STAGE_GRACE`].
async fn stop_groups(groups: &[i32]) {
    let pids: Vec<Pid> = groups.iter().filter_map(|g| Pid::from_raw(*g)).collect();
    let alive = |pid: &&Pid| test_kill_process_group(**pid).is_ok();
    for pid in pids.iter().filter(alive) {
        let _ = kill_process_group(*pid, Signal::TERM);
    }
    let deadline = Instant::now() + STAGE_GRACE;
    while pids.iter().any(|p| alive(&p)) && Instant::now() < deadline {
        tokio::time::sleep(POLL).await;
    }
    for pid in pids.iter().filter(alive) {
        output::note(format!(
            "stack-guard: process group {} outlived SIGTERM; SIGKILL",
            pid.as_raw_nonzero()
        ));
        let _ = kill_process_group(*pid, Signal::KILL);
    }
}

#[cfg(test)]
mod tests {
    use super::Watched;

    #[test]
    fn lines_table() {
        let cases: &[(&[&str], Watched)] = &[
            (&[], Watched::default()),
            (
                &["server 40", "daemon 41", "daemon 42"],
                Watched {
                    daemons: vec![41, 42],
                    servers: vec![40],
                    released: false,
                },
            ),
            (
                &["daemon 41", "release"],
                Watched {
                    daemons: vec![41],
                    servers: vec![],
                    released: true,
                },
            ),
            // Never a group that would hit init or every process: 0, 1, negative, junk.
            (
                &[
                    "daemon 0",
                    "daemon 1",
                    "server -5",
                    "daemon x",
                    "kill 9",
                    "",
                ],
                Watched::default(),
            ),
        ];
        for (lines, want) in cases {
            let mut got = Watched::default();
            for line in *lines {
                got.read(line);
            }
            assert_eq!(&got, want, "{lines:?}");
        }
    }
}
