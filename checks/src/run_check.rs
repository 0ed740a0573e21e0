//! Running one acceptance check: `sh -c <check>` in a scratch directory, under the host's
//! sandbox (`sandbox/`: bubblewrap without network, an unprivileged user), in its own process
//! group (`loopgate_process::run_child`), with a scrubbed environment, a timeout
//! that kills the whole group, and stdout + stderr captured into a bounded buffer.

use std::path::Path;
use std::time::{Duration, Instant};

use loopgate_common::output_cap::OutputCap;
use loopgate_process::{run_child, shared, with_sink, ChildEnd, ChildError};
use loopgate_protocol::verdict::CheckVerdict;

use crate::sandbox::launch::{launch_args, sandbox_ran_command};
use crate::sandbox::Sandbox;
use crate::screenshots::CheckScreenshot;

/// PATH given to checks when the worker has none.
pub const DEFAULT_CHECK_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// LANG given to checks.
pub(crate) const CHECK_LANG: &str = "C.UTF-8";
/// Bytes of output kept from the start of a check's output.
pub(crate) const DEFAULT_HEAD_BYTES: usize = 16 * 1024;
/// Bytes of output kept from the end (where test runners print their summary).
pub(crate) const DEFAULT_TAIL_BYTES: usize = 48 * 1024;
/// Characters of the output tail that go into `Evidence::output_excerpt`.
pub const EXCERPT_CHARS: usize = 1500;

/// `PATH` for checks: the worker's own when it has a non-blank one, else [`DEFAULT_CHECK_PATH`].
pub fn check_path(worker_path: Option<String>) -> String {
    worker_path
        .filter(|p| !p.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_CHECK_PATH.to_string())
}

/// The check PATH with this process's own directory first when `loopgate` is installed
/// beside it (the daemons ship together), so browser checks can call `loopgate browse`.
/// Checks may run as another user (`check_user`) and `sandbox` may hide the directory (e.g.
/// binaries under `~/.cache/loopgate`): when that directory is not reachable by other users
/// (e.g. binaries under root's home) or hidden, the binary is exposed read-only through a
/// hard link (or a copy) in a world-reachable `/var/tmp/loopgate-bin-<device>-<inode>`, shared
/// by every daemon of the same binary.
pub fn with_loopgate_dir(check_path: &str, sandbox: &Sandbox) -> String {
    let own = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
        .filter(|dir| dir.join("loopgate").is_file());
    let Some(dir) = own else {
        return check_path.to_string();
    };
    let dir = if reachable_by_others(&dir) && !sandbox.hides(&dir) {
        dir
    } else {
        match expose_binary(&dir.join("loopgate"), Path::new("/var/tmp")) {
            Ok(exposed) => exposed,
            Err(err) => {
                tracing::warn!(error = %err, dir = %dir.display(),
                    "cannot expose `loopgate` to checks run as another user");
                dir
            }
        }
    };
    if check_path.split(':').any(|p| Path::new(p) == dir) {
        check_path.to_string()
    } else {
        format!("{}:{check_path}", dir.display())
    }
}

/// Can any user reach `dir` (every directory from `/` down to it searchable by others)?
fn reachable_by_others(dir: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    dir.ancestors()
        .all(|d| std::fs::metadata(d).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
}

/// `<under>/loopgate-bin-<dev>-<ino>/loopgate`: the binary, hard-linked (or copied) with mode
/// 0755 into a directory of mode 0755; an existing one for the same binary is reused.
fn expose_binary(binary: &Path, under: &Path) -> std::io::Result<std::path::PathBuf> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = std::fs::metadata(binary)?;
    let dir = under.join(format!("loopgate-bin-{}-{}", meta.dev(), meta.ino()));
    let target = dir.join("loopgate");
    if std::fs::metadata(&target).is_ok_and(|m| m.len() == meta.len()) {
        return Ok(dir);
    }
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(err) => return Err(err),
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    match std::fs::hard_link(binary, &target) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => return Ok(dir),
        Err(_) => {
            let partial = dir.join(format!(".loopgate.{}", std::process::id()));
            std::fs::copy(binary, &partial)?;
            std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o755))?;
            std::fs::rename(&partial, &target)?;
        }
    }
    Ok(dir)
}

/// What to run and where.
#[derive(Debug, Clone)]
pub struct CheckSpec<'a> {
    pub command: &'a str,
    /// Working directory: the check's scratch copy.
    pub cwd: &'a Path,
    /// `HOME` for the check: a scratch directory beside the copy.
    pub home: &'a Path,
    /// `PATH` for the check.
    pub path_var: &'a str,
    pub timeout: Duration,
    /// The isolation, hidden paths and network the check runs under.
    pub sandbox: &'a Sandbox,
    /// Where bubblewrap reports that it ran the check (writable by the check user).
    pub status_file: &'a Path,
    /// Variables added to the scrubbed environment (the task's `[gui]` as
    /// `LOOPGATE_GUI_URL` / `LOOPGATE_GUI_SERVE`); usually empty.
    pub extra_env: &'a [(String, String)],
}

/// How a check ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckEnd {
    /// The shell exited; `None` when a signal ended it.
    Exited(Option<i32>),
    /// It ran past its timeout and its process group was killed.
    TimedOut,
    /// It could not be started or waited on.
    SpawnFailed(String),
    /// The sandbox could not be set up (or is required and unavailable): the check never ran.
    SandboxFailed(String),
}

#[derive(Debug, Clone)]
pub struct CheckRun {
    pub end: CheckEnd,
    /// Captured stdout + stderr (interleaved as they arrived), capped.
    pub output: Vec<u8>,
    pub duration: Duration,
    /// The screenshots `loopgate browse` took in the check (filled by `run_in_scratch_copy`).
    pub screenshots: Vec<CheckScreenshot>,
}

impl CheckRun {
    pub fn verdict(&self) -> CheckVerdict {
        verdict_for(&self.end)
    }

    pub fn exit_code(&self) -> Option<i32> {
        match self.end {
            CheckEnd::Exited(code) => code,
            _ => None,
        }
    }
}

/// Exit 0 passes; any other exit (a signal included) fails; a timeout or a check that could
/// not run proves nothing either way.
pub fn verdict_for(end: &CheckEnd) -> CheckVerdict {
    match end {
        CheckEnd::Exited(Some(0)) => CheckVerdict::Pass,
        CheckEnd::Exited(_) => CheckVerdict::Fail,
        CheckEnd::TimedOut | CheckEnd::SpawnFailed(_) | CheckEnd::SandboxFailed(_) => {
            CheckVerdict::Inconclusive
        }
    }
}

/// Run one check to completion or timeout. Never fails: problems become `CheckEnd` values.
pub async fn run_check(spec: &CheckSpec<'_>) -> CheckRun {
    run_check_in(spec, None).await
}

/// How many times a check whose sandbox failed to set up is launched before it is given up
/// as [`CheckEnd::SandboxFailed`]. Setup fails transiently on a host where other workers mount
/// and unmount workspaces meanwhile: bubblewrap copies the host's mounts and remounts each
/// read-only, and one unmounted in between makes that remount fail.
pub(crate) const SANDBOX_SETUP_ATTEMPTS: u32 = 3;

/// Pause before launching again after a failed sandbox setup, times the attempt number.
const SANDBOX_SETUP_BACKOFF: Duration = Duration::from_millis(50);

/// [`run_check`], on a layered copy when `layer` holds the overlay's mount options (mounted on
/// `spec.cwd` by the launcher; see `sandbox/overlay.rs`). A sandbox that failed to set up
/// never ran the check, so it is launched again, up to [`SANDBOX_SETUP_ATTEMPTS`] times.
pub(crate) async fn run_check_in(spec: &CheckSpec<'_>, layer: Option<&str>) -> CheckRun {
    let started = Instant::now();
    if let Some(reason) = spec.sandbox.refusal() {
        return CheckRun {
            end: CheckEnd::SandboxFailed(reason.clone()),
            output: format!("[loopgate: check not run: {reason}]\n").into_bytes(),
            duration: started.elapsed(),
            screenshots: Vec::new(),
        };
    }
    let mut attempt = 1;
    loop {
        let mut run = launch_check(spec, layer).await;
        let CheckEnd::SandboxFailed(reason) = &run.end else {
            return run;
        };
        if attempt >= SANDBOX_SETUP_ATTEMPTS || started.elapsed() >= spec.timeout {
            let note =
                format!("\n[loopgate: check not run: {reason}, {attempt} launch(es) tried]\n");
            run.output.extend_from_slice(note.as_bytes());
            run.duration = started.elapsed();
            return run;
        }
        tracing::warn!(attempt, %reason, command = spec.command,
            "the check's sandbox failed to set up; launching it again");
        tokio::time::sleep(SANDBOX_SETUP_BACKOFF * attempt).await;
        attempt += 1;
    }
}

/// One launch of the check under its sandbox.
async fn launch_check(spec: &CheckSpec<'_>, layer: Option<&str>) -> CheckRun {
    let started = Instant::now();
    let (program, args) = launch_args(
        spec.sandbox,
        spec.command,
        spec.cwd,
        spec.home,
        spec.status_file,
        layer,
    );
    let mut command = tokio::process::Command::new(program);
    if let Some((uid, gid)) = spec.sandbox.run_as {
        command.uid(uid).gid(gid);
    }
    command
        .args(args)
        .current_dir(spec.cwd)
        .env_clear()
        .env("PATH", spec.path_var)
        .env("HOME", spec.home)
        .env("LANG", CHECK_LANG)
        .envs(spec.extra_env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let cap = shared(OutputCap::new(DEFAULT_HEAD_BYTES, DEFAULT_TAIL_BYTES));
    let timeout = spec.timeout.max(Duration::from_millis(100));
    let (end, duration) = match run_child(command, timeout, cap.clone(), cap.clone()).await {
        Ok(run) => match run.end {
            ChildEnd::Exited(code) => (CheckEnd::Exited(code), run.elapsed),
            ChildEnd::TimedOut(_) => (CheckEnd::TimedOut, run.elapsed),
        },
        Err(ChildError::Spawn { source, .. }) => {
            return CheckRun {
                end: CheckEnd::SpawnFailed(source.to_string()),
                output: Vec::new(),
                duration: started.elapsed(),
                screenshots: Vec::new(),
            }
        }
        Err(ChildError::Wait { source, .. }) => (
            CheckEnd::SpawnFailed(format!("waiting for the check: {source}")),
            started.elapsed(),
        ),
    };
    let end = match end {
        CheckEnd::Exited(code) if spec.sandbox.bwrap.is_some() => {
            let status = std::fs::read_to_string(spec.status_file).unwrap_or_default();
            if sandbox_ran_command(&status) {
                CheckEnd::Exited(code)
            } else {
                CheckEnd::SandboxFailed(format!("bubblewrap did not run the check (exit {code:?})"))
            }
        }
        other => other,
    };
    let mut bytes = with_sink(&cap, |cap| cap.to_bytes());
    if end == CheckEnd::TimedOut {
        bytes.extend_from_slice(
            format!(
                "\n[loopgate: check timed out after {}s; process group killed]\n",
                timeout.as_secs()
            )
            .as_bytes(),
        );
    }
    CheckRun {
        end,
        output: bytes,
        duration,
        screenshots: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]
    use super::*;

    #[test]
    fn verdict_mapping_table() {
        let cases = [
            (CheckEnd::Exited(Some(0)), CheckVerdict::Pass),
            (CheckEnd::Exited(Some(1)), CheckVerdict::Fail),
            (CheckEnd::Exited(Some(127)), CheckVerdict::Fail),
            (CheckEnd::Exited(None), CheckVerdict::Fail),
            (CheckEnd::TimedOut, CheckVerdict::Inconclusive),
            (
                CheckEnd::SpawnFailed("no sh".into()),
                CheckVerdict::Inconclusive,
            ),
            (
                CheckEnd::SandboxFailed("no userns".into()),
                CheckVerdict::Inconclusive,
            ),
        ];
        for (end, want) in cases {
            assert_eq!(verdict_for(&end), want, "{end:?}");
        }
    }

    async fn run(command: &str, timeout: Duration) -> (CheckRun, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("hello.py"), "print('hi')\n").unwrap();
        let sandbox = Sandbox::unisolated("unit test");
        let status = dir.path().join("status");
        let spec = CheckSpec {
            command,
            cwd: &ws,
            home: &home,
            path_var: DEFAULT_CHECK_PATH,
            timeout,
            sandbox: &sandbox,
            status_file: &status,
            extra_env: &[],
        };
        (run_check(&spec).await, dir)
    }

    #[tokio::test]
    async fn exit_codes_and_output() {
        let secs = Duration::from_secs(10);
        let cases: &[(&str, CheckEnd, &str)] = &[
            ("test -f hello.py", CheckEnd::Exited(Some(0)), ""),
            ("false", CheckEnd::Exited(Some(1)), ""),
            (
                "echo out; echo err >&2; exit 3",
                CheckEnd::Exited(Some(3)),
                "out",
            ),
            ("kill -9 $$", CheckEnd::Exited(None), ""),
        ];
        for (command, end, contains) in cases {
            let (run, _dir) = run(command, secs).await;
            assert_eq!(&run.end, end, "{command}");
            assert!(
                String::from_utf8_lossy(&run.output).contains(contains),
                "{command}"
            );
        }
        let (run, _dir) = run("echo out; echo err >&2", secs).await;
        let text = String::from_utf8_lossy(&run.output).into_owned();
        assert!(text.contains("out") && text.contains("err"), "{text}");
    }

    #[tokio::test]
    async fn environment_is_scrubbed() {
        let (run, dir) = run("env", Duration::from_secs(10)).await;
        let text = String::from_utf8_lossy(&run.output).into_owned();
        let mut names: Vec<&str> = text
            .lines()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k))
            // The shell itself exports PWD, SHLVL and `_`.
            .filter(|k| !matches!(*k, "PWD" | "SHLVL" | "_" | "OLDPWD"))
            .collect();
        names.sort_unstable();
        assert_eq!(names, vec!["HOME", "LANG", "PATH"], "{text}");
        assert!(text.contains(&format!("HOME={}", dir.path().join("home").display())));
    }

    #[tokio::test]
    async fn output_is_capped() {
        let (run, _dir) = run(
            "head -c 1000000 /dev/zero | tr '\\0' x; echo END",
            Duration::from_secs(20),
        )
        .await;
        assert_eq!(run.end, CheckEnd::Exited(Some(0)));
        assert!(run.output.len() < 70 * 1024, "{}", run.output.len());
        assert!(String::from_utf8_lossy(&run.output)
            .trim_end()
            .ends_with("END"));
    }

    /// True while `pid` is a live (not zombie) process.
    fn alive(pid: u32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => !stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
            Err(_) => false,
        }
    }

    async fn wait_dead(pid: u32) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if !alive(pid) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_group() {
        let started = Instant::now();
        let (run, dir) = run(
            "sleep 30 & echo $! > bg.pid; sleep 30",
            Duration::from_secs(1),
        )
        .await;
        assert_eq!(run.end, CheckEnd::TimedOut);
        assert_eq!(run.verdict(), CheckVerdict::Inconclusive);
        // The background sleep held the pipes open; killing the group closed them promptly.
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "{:?}",
            started.elapsed()
        );
        let pid: u32 = std::fs::read_to_string(dir.path().join("ws/bg.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(
            wait_dead(pid).await,
            "background job {pid} survived the timeout"
        );
    }

    #[tokio::test]
    async fn background_jobs_do_not_outlive_a_finished_check() {
        let started = Instant::now();
        let (run, _dir) = run("sleep 30 & echo started", Duration::from_secs(20)).await;
        assert_eq!(run.end, CheckEnd::Exited(Some(0)));
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn missing_directory_is_inconclusive() {
        let sandbox = Sandbox::unisolated("unit test");
        let spec = CheckSpec {
            command: "true",
            cwd: Path::new("/nonexistent/loopgate/dir"),
            home: Path::new("/tmp"),
            path_var: DEFAULT_CHECK_PATH,
            timeout: Duration::from_secs(5),
            sandbox: &sandbox,
            status_file: Path::new("/nonexistent/status"),
            extra_env: &[],
        };
        let run = run_check(&spec).await;
        assert!(matches!(run.end, CheckEnd::SpawnFailed(_)), "{:?}", run.end);
        assert_eq!(run.verdict(), CheckVerdict::Inconclusive);
    }
    /// A sandbox that fails to set up after bubblewrap cloned its child (here: a hidden file
    /// removed after the probe, so bubblewrap cannot bind an empty file over it on the
    /// read-only host; on a busy host: a workspace unmounted while bubblewrap remounts the
    /// host's mounts) never ran the check: it is launched again, and in the end inconclusive
    /// with bubblewrap's own words, never a failing check. Skipped (said so) without bubblewrap.
    #[tokio::test]
    async fn a_sandbox_that_fails_to_set_up_is_retried_and_never_a_failing_check() {
        use crate::sandbox::confine::HiddenPath;
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let open = |path: &Path, mode| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
        };
        open(dir.path(), 0o755);
        let secret = dir.path().join("secret.txt");
        std::fs::write(&secret, "s3cret").unwrap();
        open(&secret, 0o644);
        let (work, home, status_dir) = (
            dir.path().join("work"),
            dir.path().join("home"),
            dir.path().join("status"),
        );
        for path in [&work, &home, &status_dir] {
            std::fs::create_dir(path).unwrap();
            open(path, 0o777);
        }
        let settings = crate::SandboxSettings::default();
        let sandbox = crate::sandbox::probe::probe_hiding(
            &settings,
            &work,
            "auditor",
            vec![HiddenPath::File(secret.clone())],
        )
        .await
        .unwrap();
        if !sandbox.isolates() {
            eprintln!(
                "SKIP a_sandbox_that_fails_to_set_up_is_retried: no bubblewrap sandbox here ({:?})",
                sandbox.limitations
            );
            return;
        }
        let status = status_dir.join("status");
        let spec = CheckSpec {
            command: "exit 1",
            cwd: &work,
            home: &home,
            path_var: DEFAULT_CHECK_PATH,
            timeout: Duration::from_secs(20),
            sandbox: &sandbox,
            status_file: &status,
            extra_env: &[],
        };
        // The sandbox sets up: the check runs and fails.
        let ran = run_check(&spec).await;
        assert_eq!(ran.end, CheckEnd::Exited(Some(1)), "{ran:?}");
        std::fs::remove_file(&secret).unwrap();
        let failed = run_check(&spec).await;
        let output = String::from_utf8_lossy(&failed.output);
        assert!(
            matches!(failed.end, CheckEnd::SandboxFailed(_)),
            "{:?}: {output}",
            failed.end
        );
        assert_eq!(failed.verdict(), CheckVerdict::Inconclusive);
        assert!(output.contains("bwrap: "), "{output}");
        assert!(
            output.contains(&format!("{SANDBOX_SETUP_ATTEMPTS} launch(es) tried")),
            "{output}"
        );
    }
}
