//! `loopgate up --ha` with the real daemons, nats-server, redis-server and redis-sentinel: the
//! stack comes up with a Redis primary, a replica and three sentinels, the manager finds the
//! primary through the sentinels, a run completes, and its record is on the replica.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use loopgate_test_support::{
    find_binary, free_port, redis_command_as, wait_until, workspace_bin, Reply, Script,
    StandInModel,
};
use loopgate_tests::episode_faults::hello_executor;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const HINT: &str = "scripts/install-deps.sh services";
const MODEL: &str = "standin";

const TASK: &str = r#"
goal = "Create hello.py that prints exactly: hello, loopgate"
[[acceptance]]
id = "prints-greeting"
check = "test \"$(python3 hello.py)\" = 'hello, loopgate'"
[roles]
manager = "local"
executor = "local"
[budget]
max_rounds = 3
"#;

/// Every role of `up` uses the one `local` profile: the manager's requests carry no tools, the
/// executor's do.
async fn model() -> Result<StandInModel> {
    let executor = hello_executor(Duration::ZERO);
    StandInModel::start(Script::new().fallback(
        MODEL,
        Reply::dynamic(move |req: &Value| {
            let has_tools = req["tools"].as_array().is_some_and(|t| !t.is_empty());
            if has_tools {
                executor.clone()
            } else {
                Reply::content("Next: cli\nTask: write hello.py")
            }
        }),
    ))
    .await
}

async fn spawn_up(dir: &Path, model_url: &str, http_addr: &str) -> Result<Child> {
    let loopgate = workspace_bin("loopgate")?;
    let bin_dir = loopgate.parent().context("the binaries' directory")?;
    let child = Command::new(&loopgate)
        .args(["up", "--ha", "--executors", "1", "--dir"])
        .arg(dir)
        .args(["--nats-port", &free_port()?.to_string()])
        .args(["--redis-port", &free_port()?.to_string()])
        .args(["--http-addr", http_addr])
        .env("LOOPGATE_BIN_DIR", bin_dir)
        .env(
            "LOOPGATE_NATS_SERVER",
            find_binary("nats-server", "LOOPGATE_NATS_SERVER", HINT)?,
        )
        .env(
            "LOOPGATE_REDIS_SERVER",
            find_binary("redis-server", "LOOPGATE_REDIS_SERVER", HINT)?,
        )
        .env("LOOPGATE_MODEL_URL", model_url)
        .env("LOOPGATE_MODEL", MODEL)
        .env("LOOPGATE_STRUCTURED_OUTPUT", "off")
        .env_remove("LOOPGATE_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    Ok(child)
}

/// Stops `loopgate up` as Ctrl-C does when dropped, and waits (up to 30 s) for it to take its
/// stack down. `kill_on_drop` alone SIGKILLs only `up`, and each of its children runs in a
/// process group of its own: a test that failed half-way left its nats-server, redis-servers,
/// sentinels and daemons running (seen after a failed run). A stack that shut down already
/// is gone, and the signal then finds nothing.
struct StopOnDrop(u32);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let pid = self.0.to_string();
        let _ = std::process::Command::new("kill")
            .args(["-INT", &pid])
            .stderr(Stdio::null())
            .status();
        // Exited once /proc has no live entry for it (gone, or a zombie nobody reaped yet).
        let live = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rsplit(')')
                    .next()
                    .is_some_and(|r| !r.trim_start().starts_with('Z'))
            })
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while live() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The text of every log under `DIR/logs/`, for a failure message.
fn logs(dir: &Path) -> String {
    let mut text = String::new();
    if let Ok(entries) = std::fs::read_dir(dir.join("logs")) {
        for entry in entries.flatten() {
            let body = std::fs::read_to_string(entry.path()).unwrap_or_default();
            let tail: String = body
                .lines()
                .rev()
                .take(40)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n");
            text.push_str(&format!("--- {}\n{tail}\n", entry.path().display()));
        }
    }
    text
}

async fn wait_terminal(client: &reqwest::Client, base: &str, id: &str) -> Result<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let run: Value = client
            .get(format!("{base}/v1/runs/{id}"))
            .send()
            .await?
            .json()
            .await?;
        let state = run["state"].as_str().unwrap_or("");
        if !["", "queued", "running", "paused", "waiting"].contains(&state) {
            return Ok(run);
        }
        if tokio::time::Instant::now() > deadline {
            bail!("run {id} still {state} after 120s: {run}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The password `up` wrote into `DIR/redis.conf`.
fn redis_password(dir: &Path) -> Result<String> {
    let text = std::fs::read_to_string(dir.join("redis.conf"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("requirepass "))
        .map(|p| p.trim().to_string())
        .context("no requirepass in redis.conf")
}

/// `[redis]` of the manager.toml `up` wrote.
fn redis_section(dir: &Path) -> Result<toml::Table> {
    let text = std::fs::read_to_string(dir.join("manager.toml"))?;
    let table: toml::Table = toml::from_str(&text)?;
    table
        .get("redis")
        .and_then(|r| r.as_table())
        .cloned()
        .context("no [redis] in manager.toml")
}

async fn submit(client: &reqwest::Client, base: &str) -> Result<String> {
    let task = loopgate_common::task::parse_task_file_toml(TASK)?;
    let created = client
        .post(format!("{base}/v1/runs"))
        .json(&json!({ "task": task }))
        .send()
        .await?;
    let status = created.status();
    let created: Value = created.json().await?;
    if !status.is_success() {
        bail!("submit: {status} {created}");
    }
    Ok(created["id"].as_str().context("run id")?.to_string())
}

/// The port the sentinel on `port` names as the primary.
async fn sentinel_primary(port: u16, password: &str) -> Option<u16> {
    let named = redis_command_as(
        port,
        Some(password),
        &["SENTINEL", "get-master-addr-by-name", "loopgate"],
    )
    .await
    .ok()?;
    let (_, primary): (String, u16) = redis::from_redis_value(named).ok()?;
    Some(primary)
}

/// The pid of the redis-server on `port` (`INFO server`).
async fn process_id(port: u16, password: &str) -> Result<String> {
    let info = redis_command_as(port, Some(password), &["INFO", "server"]).await?;
    let text: String = redis::from_redis_value(info)?;
    text.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .map(|p| p.trim().to_string())
        .context("no process_id in INFO server")
}

async fn signal(pid: &str, name: &str) -> Result<()> {
    let status = Command::new("kill")
        .args(["-s", name, pid])
        .status()
        .await?;
    anyhow::ensure!(status.success(), "kill -s {name} {pid}");
    Ok(())
}

#[tokio::test]
async fn up_ha_comes_up_and_a_run_completes() -> Result<()> {
    let model = model().await?;
    let data = tempfile::tempdir()?;
    let dir = data.path();
    let http_addr = format!("127.0.0.1:{}", free_port()?);
    let base = format!("http://{http_addr}");
    let mut up = spawn_up(dir, &model.base_url(), &http_addr).await?;
    let stop = StopOnDrop(up.id().context("pid")?);
    let mut stdout = BufReader::new(up.stdout.take().context("stdout")?).lines();
    let first = tokio::time::timeout(Duration::from_secs(120), stdout.next_line()).await;
    let Ok(Ok(Some(first))) = first else {
        bail!("loopgate up --ha did not come up: {first:?}\n{}", logs(dir));
    };
    assert_eq!(first, format!("loopgate is up: {base}"));
    let mut replica = None;
    while let Ok(Ok(Some(line))) =
        tokio::time::timeout(Duration::from_secs(5), stdout.next_line()).await
    {
        if let Some(rest) = line.trim().strip_prefix("redis:") {
            replica = rest
                .split("replica 127.0.0.1:")
                .nth(1)
                .and_then(|r| r.split(',').next())
                .and_then(|p| p.parse::<u16>().ok());
        }
        if line.starts_with("Ctrl-C") {
            break;
        }
    }
    let replica = replica.context("no replica port in the announcement")?;

    let redis = redis_section(dir)?;
    assert!(redis.get("url").is_none(), "{redis:?}");
    assert_eq!(
        redis.get("master_name").and_then(|v| v.as_str()),
        Some("loopgate")
    );
    let sentinels: Vec<u16> = redis
        .get("sentinels")
        .and_then(|v| v.as_array())
        .context("redis.sentinels")?
        .iter()
        .filter_map(|v| v.as_str()?.rsplit_once(':')?.1.parse().ok())
        .collect();
    assert_eq!(sentinels.len(), 3, "{redis:?}");
    let password = redis_password(dir)?;
    // The sentinels require the password too.
    assert!(redis_command_as(sentinels[0], None, &["PING"])
        .await
        .is_err());
    let primary = sentinel_primary(sentinels[0], &password)
        .await
        .context("the sentinel names no primary")?;

    let client = reqwest::Client::new();
    let id = submit(&client, &base).await?;
    let done = wait_terminal(&client, &base, &id).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", logs(dir));

    let manager_log = std::fs::read_to_string(dir.join("logs/manager.log"))?;
    assert!(
        manager_log.contains("sentinel loopgate via"),
        "{manager_log}"
    );
    // The run's record is on the replica as well as on the primary.
    let key = format!("lg:run:{id}");
    for port in [primary, replica] {
        let exists = redis_command_as(port, Some(&password), &["EXISTS", &key]).await?;
        assert_eq!(
            redis::from_redis_value::<i64>(exists)?,
            1,
            "{key} on port {port}"
        );
    }
    let role = redis_command_as(replica, Some(&password), &["ROLE"]).await?;
    assert!(format!("{role:?}").contains("slave"), "{role:?}");

    // A failover: the primary stopped, the sentinels promote the replica; once the old primary
    // is back (as a replica of the new one) a second run completes through the new primary.
    let pid = process_id(primary, &password).await?;
    signal(&pid, "STOP").await?;
    let promoted = wait_until(Duration::from_secs(30), || async {
        sentinel_primary(sentinels[1], &password).await == Some(replica)
    })
    .await;
    signal(&pid, "CONT").await?;
    assert!(promoted.is_ok(), "no failover within 30s\n{}", logs(dir));
    let rejoined = wait_until(Duration::from_secs(30), || async {
        let info = redis_command_as(primary, Some(&password), &["INFO", "replication"]).await;
        info.ok()
            .and_then(|v| redis::from_redis_value::<String>(v).ok())
            .is_some_and(|text| text.lines().any(|l| l.trim() == "master_link_status:up"))
    })
    .await;
    assert!(
        rejoined.is_ok(),
        "the old primary is not a replica within 30s\n{}",
        logs(dir)
    );
    let id2 = submit(&client, &base).await?;
    let done = wait_terminal(&client, &base, &id2).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", logs(dir));
    let manager_log = std::fs::read_to_string(dir.join("logs/manager.log"))?;
    assert!(
        manager_log.contains("following the new primary"),
        "{manager_log}"
    );

    let pid = up.id().context("pid")?.to_string();
    signal(&pid, "TERM").await?;
    let status = tokio::time::timeout(Duration::from_secs(90), up.wait()).await??;
    // Reaped: its pid may be another process's now.
    std::mem::forget(stop);
    assert_eq!(status.code(), Some(0), "{}", logs(dir));
    for port in sentinels.iter().copied().chain([primary, replica]) {
        let open = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok();
        assert!(!open, "port {port} still open after up stopped");
    }
    Ok(())
}
