//! `loopgate up` with the REAL nats-server and redis-server and stand-in daemons (shell scripts
//! found through LOOPGATE_BIN_DIR; the manager's /readyz is served by the test).

use super::standin;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use loopgate_test_support::{find_binary, free_port, wait_until};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const HINT: &str = "scripts/install-deps.sh services";

fn script(dir: &Path, name: &str, body: &str) {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A stand-in daemon's body: log its arguments and pid, wait to be stopped.
const WAITING: &str = "echo \"started with $* as pid $$\" >&2\nexec sleep 600";

/// Stand-in daemons that log their arguments and wait to be stopped.
fn fake_daemons(dir: &Path, executor_body: &str) {
    let wait = WAITING;
    let manager = "echo \"redis url: $LOOPGATE_REDIS_URL as pid $$\" >&2\nexec sleep 600";
    script(dir, "loopgate-manager", manager);
    script(dir, "loopgate-auditor", wait);
    script(dir, "loopgate-executor", executor_body);
}

struct UpRun {
    child: Child,
    stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    nats_port: u16,
    redis_port: u16,
}

async fn spawn_up(bin_dir: &Path, data_dir: &Path, http_addr: &str) -> UpRun {
    spawn_up_with(bin_dir, data_dir, http_addr, &[]).await
}

async fn spawn_up_with(bin_dir: &Path, data_dir: &Path, http_addr: &str, extra: &[&str]) -> UpRun {
    let nats_port = free_port().unwrap();
    let redis_port = free_port().unwrap();
    let nats = find_binary("nats-server", "LOOPGATE_NATS_SERVER", HINT).unwrap();
    let redis = find_binary("redis-server", "LOOPGATE_REDIS_SERVER", HINT).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_loopgate"))
        .args(["up", "--executors", "2"])
        .args(extra)
        .arg("--dir")
        .arg(data_dir)
        .args([
            "--nats-port",
            &nats_port.to_string(),
            "--redis-port",
            &redis_port.to_string(),
        ])
        .args(["--http-addr", http_addr])
        .env("LOOPGATE_BIN_DIR", bin_dir)
        .env("LOOPGATE_NATS_SERVER", nats)
        .env("LOOPGATE_REDIS_SERVER", redis)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    UpRun {
        child,
        stdout,
        nats_port,
        redis_port,
    }
}

/// `up` with waiting stand-in daemons (and `extra` flags), come up. Bind every field: the
/// stand-in API and the daemons' directory must live as long as `up` (a `..` pattern drops
/// them at once, and the daemons `up` starts later are then missing).
struct Started {
    up: UpRun,
    data: tempfile::TempDir,
    _bins: tempfile::TempDir,
    _api: standin::Standin,
}

async fn start_up(extra: &[&str], data_mode: Option<u32>) -> Started {
    let api = standin::start(standin::Canned::default()).await;
    let http_addr = api.url.trim_start_matches("http://").to_string();
    let bins = tempfile::tempdir().unwrap();
    fake_daemons(bins.path(), WAITING);
    let data = tempfile::tempdir().unwrap();
    if let Some(mode) = data_mode {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(data.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let mut up = spawn_up_with(bins.path(), data.path(), &http_addr, extra).await;
    let first = tokio::time::timeout(Duration::from_secs(90), up.stdout.next_line())
        .await
        .expect("loopgate up did not come up in 90s")
        .unwrap();
    assert!(first.is_some(), "{}", stderr_of(&mut up.child).await);
    Started {
        up,
        data,
        _bins: bins,
        _api: api,
    }
}

/// SIGTERM to `up`, then its exit status and stderr.
async fn stop_with_sigterm(up: &mut UpRun) -> (std::process::ExitStatus, String) {
    let pid = up.child.id().unwrap().to_string();
    let killed = Command::new("kill")
        .args(["-s", "TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(60), up.child.wait())
        .await
        .expect("loopgate up did not stop within 60s")
        .unwrap();
    (status, stderr_of(&mut up.child).await)
}

async fn port_open(port: u16) -> bool {
    tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_ok()
}

async fn stderr_of(child: &mut Child) -> String {
    let mut text = String::new();
    if let Some(mut err) = child.stderr.take() {
        use tokio::io::AsyncReadExt;
        let _ = tokio::time::timeout(Duration::from_secs(5), err.read_to_string(&mut text)).await;
    }
    text
}

/// One inline command to the Redis server on `port`, one reply line.
async fn redis_command(port: u16, command: &str) -> String {
    use tokio::io::AsyncWriteExt;
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let mut reader = BufReader::new(stream);
    reader
        .get_mut()
        .write_all(format!("{command}\r\n").as_bytes())
        .await
        .unwrap();
    let mut line = String::new();
    tokio::time::timeout(Duration::from_secs(5), reader.read_line(&mut line))
        .await
        .unwrap()
        .unwrap();
    line
}

/// The stack's Redis refuses clients without the password; the password is in DIR/redis.conf
/// (mode 0600) and reaches the manager in its environment, not in `manager.toml`.
async fn redis_requires_the_password_only_the_manager_gets(dir: &Path, port: u16) {
    let reply = redis_command(port, "PING").await;
    assert!(
        reply.starts_with("-NOAUTH"),
        "unauthenticated PING: {reply}"
    );
    let reply = redis_command(port, "CONFIG GET dir").await;
    assert!(
        reply.starts_with("-NOAUTH"),
        "unauthenticated CONFIG: {reply}"
    );
    let conf = dir.join("redis.conf");
    let mode = std::fs::metadata(&conf).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", conf.display());
    let text = std::fs::read_to_string(&conf).unwrap();
    let password = text
        .lines()
        .find_map(|l| l.strip_prefix("requirepass "))
        .unwrap_or_else(|| panic!("no requirepass in {text}"))
        .trim()
        .to_string();
    assert!(password.len() >= 32, "{password}");
    let manager_log = dir.join("logs/manager.log");
    let url = format!("redis://:{password}@127.0.0.1:{port}");
    let logged = wait_until(Duration::from_secs(20), || async {
        std::fs::read_to_string(&manager_log).is_ok_and(|log| log.contains(&url))
    })
    .await;
    assert!(
        logged.is_ok(),
        "{:?}",
        std::fs::read_to_string(&manager_log)
    );
    let manager_toml = std::fs::read_to_string(dir.join("manager.toml")).unwrap();
    assert!(!manager_toml.contains(&password), "{manager_toml}");
    let reply = redis_command(port, &format!("AUTH {password}")).await;
    assert!(reply.starts_with("+OK"), "AUTH: {reply}");
}

#[tokio::test]
async fn up_starts_the_stack_and_stops_it_on_sigterm() {
    let manager_api = standin::start(standin::Canned::default()).await;
    let http_addr = manager_api.url.trim_start_matches("http://").to_string();
    let bins = tempfile::tempdir().unwrap();
    fake_daemons(bins.path(), "echo \"started with $*\" >&2\nexec sleep 600");
    let data = tempfile::tempdir().unwrap();
    let mut up = spawn_up(bins.path(), data.path(), &http_addr).await;
    let first = tokio::time::timeout(Duration::from_secs(60), up.stdout.next_line())
        .await
        .expect("loopgate up did not come up in 60s")
        .unwrap();
    let Some(first) = first else {
        panic!(
            "loopgate up exited early: {}",
            stderr_of(&mut up.child).await
        );
    };
    assert_eq!(first, format!("loopgate is up: http://{http_addr}"));
    assert!(port_open(up.nats_port).await && port_open(up.redis_port).await);
    for file in [
        "manager.toml",
        "executor-1.toml",
        "executor-2.toml",
        "auditor.toml",
    ] {
        assert!(data.path().join(file).is_file(), "{file}");
    }
    let exec_log = data.path().join("logs/exec-2.log");
    let logged_args = wait_until(Duration::from_secs(20), || async {
        std::fs::read_to_string(&exec_log)
            .is_ok_and(|log| log.contains("--config") && log.contains("executor-2.toml"))
    })
    .await;
    assert!(
        logged_args.is_ok(),
        "{:?}",
        std::fs::read_to_string(&exec_log)
    );

    redis_requires_the_password_only_the_manager_gets(data.path(), up.redis_port).await;

    let (status, stderr) = stop_with_sigterm(&mut up).await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(!port_open(up.nats_port).await, "nats-server still running");
    assert!(
        !port_open(up.redis_port).await,
        "redis-server still running"
    );
}

/// The pids the stand-in daemons logged (`as pid N`), nats-server's (its command line names the
/// data dir) and redis-server's (its title names its port).
fn stack_pids(data: &Path, redis_port: u16) -> Vec<u32> {
    let mut pids = Vec::new();
    if let Ok(logs) = std::fs::read_dir(data.join("logs")) {
        for log in logs.flatten() {
            let text = std::fs::read_to_string(log.path()).unwrap_or_default();
            pids.extend(
                text.split("as pid ")
                    .skip(1)
                    .filter_map(|rest| rest.split_whitespace().next()?.parse::<u32>().ok()),
            );
        }
    }
    let needles = [
        data.to_string_lossy().into_owned(),
        format!("redis-server 127.0.0.1:{redis_port}"),
    ];
    if let Ok(procs) = std::fs::read_dir("/proc") {
        for entry in procs.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if needles.iter().any(|n| cmdline.contains(n)) {
                pids.push(pid);
            }
        }
    }
    pids
}

/// Every log under `DATA/logs`, for a failure message.
fn logs_of(data: &Path) -> String {
    let mut out = String::new();
    if let Ok(logs) = std::fs::read_dir(data.join("logs")) {
        for log in logs.flatten() {
            let text = std::fs::read_to_string(log.path()).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(5).collect();
            out.push_str(&format!(
                "--- {} ---\n{}\n",
                log.path().display(),
                tail.join("\n")
            ));
        }
    }
    out
}

/// Whether `pid` still runs (a zombie counts as gone: its parent is init now).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

#[tokio::test]
async fn up_killed_with_sigkill_leaves_nothing_running() {
    let Started {
        mut up,
        data,
        _bins,
        _api,
    } = start_up(&[], None).await;
    // Every daemon has logged its pid (the executors start after the manager is ready).
    let logged = wait_until(Duration::from_secs(20), || async {
        stack_pids(data.path(), up.redis_port).len() >= 7
    })
    .await;
    let pids = stack_pids(data.path(), up.redis_port);
    assert!(logged.is_ok(), "{pids:?}\n{}", logs_of(data.path()));
    up.child.start_kill().unwrap();
    up.child.wait().await.unwrap();
    let gone = wait_until(Duration::from_secs(30), || async {
        pids.iter().all(|p| !running(*p))
    })
    .await;
    let left: Vec<u32> = pids.iter().copied().filter(|p| running(*p)).collect();
    // Whatever the guard left is killed here, so a failed run leaves nothing behind either.
    for pid in &left {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    assert!(
        gone.is_ok(),
        "still running after up was SIGKILLed: {left:?} of {pids:?}"
    );
    assert!(!port_open(up.nats_port).await, "nats-server still running");
    assert!(
        !port_open(up.redis_port).await,
        "redis-server still running"
    );
    let guard_log =
        std::fs::read_to_string(data.path().join("logs/stack-guard.log")).unwrap_or_default();
    assert!(guard_log.contains("loopgate up is gone"), "{guard_log}");
}

/// The pid a redis-server logged at its latest start (`pid=N, just started`).
fn logged_redis_pid(log: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(log).ok()?;
    let line = text.lines().rev().find(|l| l.contains("just started"))?;
    line.split("pid=")
        .nth(1)?
        .split(',')
        .next()?
        .trim()
        .parse()
        .ok()
}

/// The port a redis-server logged (`Running mode=standalone, port=N.`).
fn logged_redis_port(log: &Path) -> Option<u16> {
    let text = std::fs::read_to_string(log).ok()?;
    let rest = text.split("port=").nth(1)?;
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// `AUTH password` then `command` on one connection to the Redis node on `port`: the second
/// reply line.
async fn redis_command_as(port: u16, password: &str, command: &str) -> String {
    use tokio::io::AsyncWriteExt;
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let mut reader = BufReader::new(stream);
    reader
        .get_mut()
        .write_all(format!("AUTH {password}\r\n{command}\r\n").as_bytes())
        .await
        .unwrap();
    let mut lines = Vec::new();
    for _ in 0..2 {
        let mut line = String::new();
        tokio::time::timeout(Duration::from_secs(5), reader.read_line(&mut line))
            .await
            .unwrap()
            .unwrap();
        lines.push(line);
    }
    lines.pop().unwrap_or_default()
}

/// Files under `root` holding `secret` that another local user could read: the file is
/// group- or world-readable and every directory from `root` down to it lets them through.
fn exposed_secrets(root: &Path, secret: &str) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0)
    };
    let mut exposed = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(path);
                continue;
            }
            let holds =
                std::fs::read(&path).is_ok_and(|b| String::from_utf8_lossy(&b).contains(secret));
            let readable = mode(&path) & 0o044 != 0;
            let reachable = path
                .ancestors()
                .skip(1)
                .take_while(|a| a.starts_with(root))
                .all(|a| mode(a) & 0o011 != 0);
            if holds && readable && reachable {
                exposed.push(format!("{} ({:o})", path.display(), mode(&path)));
            }
        }
    }
    exposed
}

#[tokio::test]
async fn up_ha_starts_a_redis_node_that_dies_again_and_keeps_running() {
    // The data dir as `.loopgate` is made under a umask of 022.
    let Started {
        mut up,
        data,
        _bins,
        _api,
    } = start_up(&["--ha"], Some(0o755)).await;
    // The password stays private although the sentinels rewrite their configs (on start) and
    // the data nodes theirs (a failover's CONFIG REWRITE, done here by hand), mode 0644.
    let conf = std::fs::read_to_string(data.path().join("redis.conf")).unwrap();
    let password = conf
        .lines()
        .find_map(|l| l.strip_prefix("requirepass "))
        .unwrap()
        .trim()
        .to_string();
    for node in ["redis-server", "redis-replica"] {
        let port = logged_redis_port(&data.path().join(format!("logs/{node}.log"))).unwrap();
        let reply = redis_command_as(port, &password, "CONFIG REWRITE").await;
        assert!(reply.starts_with("+OK"), "{node}: {reply}");
    }
    let exposed = exposed_secrets(data.path(), &password);
    assert!(exposed.is_empty(), "readable by other users: {exposed:?}");
    let log = data.path().join("logs/redis-replica.log");
    let old = logged_redis_pid(&log).expect("the replica logged its pid");
    std::process::Command::new("kill")
        .args(["-9", &old.to_string()])
        .status()
        .unwrap();
    // A new replica starts (it logs a new pid) and `up` keeps running.
    let again = wait_until(Duration::from_secs(30), || async {
        logged_redis_pid(&log).is_some_and(|pid| pid != old)
    })
    .await;
    if again.is_err() {
        panic!(
            "no new replica within 30s\n{}\nup's stderr:\n{}",
            logs_of(data.path()),
            stderr_of(&mut up.child).await
        );
    }
    assert!(
        up.child.try_wait().unwrap().is_none(),
        "up stopped: {}",
        stderr_of(&mut up.child).await
    );
    let (status, stderr) = stop_with_sigterm(&mut up).await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("redis-replica exited") && stderr.contains("starting it again"),
        "{stderr}"
    );
}

#[tokio::test]
async fn up_reports_a_daemon_that_dies_and_stops_the_rest() {
    // The manager comes up (executors start once it is ready); an executor then dies.
    let manager_api = standin::start(standin::Canned::default()).await;
    let http_addr = manager_api.url.trim_start_matches("http://").to_string();
    let bins = tempfile::tempdir().unwrap();
    fake_daemons(
        bins.path(),
        "echo 'boom: model profile missing' >&2\nexit 7",
    );
    let data = tempfile::tempdir().unwrap();
    let mut up = spawn_up(bins.path(), data.path(), &http_addr).await;
    let status = tokio::time::timeout(Duration::from_secs(60), up.child.wait())
        .await
        .expect("loopgate up did not give up within 60s")
        .unwrap();
    let stderr = stderr_of(&mut up.child).await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("exec-") && stderr.contains("exited unexpectedly"),
        "{stderr}"
    );
    assert!(stderr.contains("boom: model profile missing"), "{stderr}");
    assert!(!port_open(up.nats_port).await, "nats-server still running");
    assert!(
        !port_open(up.redis_port).await,
        "redis-server still running"
    );
}

#[tokio::test]
async fn up_without_nats_server_says_how_to_install_it() {
    let bins = tempfile::tempdir().unwrap();
    fake_daemons(bins.path(), "exec sleep 600");
    let data = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_loopgate"))
        .args(["up", "--dir"])
        .arg(data.path())
        .env("LOOPGATE_BIN_DIR", bins.path())
        .env(
            "LOOPGATE_NATS_SERVER",
            data.path().join("no-such-nats-server"),
        )
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("nats-server not found") && stderr.contains(HINT),
        "{stderr}"
    );
}
