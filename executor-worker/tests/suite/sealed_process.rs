//! Issue 38 item 2, the executor's part: the executor binary reads its secrets (the NATS
//! password, a model API key) once at start-up, removes their variables from its environment
//! and makes itself non-dumpable before anything starts, so a process of its own user — what
//! an agent's `shell`, a CLI agent or a self-check is with `sandbox = "off"`: a direct child —
//! cannot read `/proc/<executor>/environ` (which keeps the environment the process started
//! with, removed variables included); non-dumpable closes its `mem` and ptrace the same way.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::Context;
use loopgate_test_support::{wait_until, ChildGuard, NatsServer};

const USERS_CONF: &str = include_str!("../../../deploy/nats/loopgate-users.conf");
/// The uid/gid the executor and the reader run as when the tests run as root.
const UNPRIVILEGED: &str = "65534";

fn is_root() -> bool {
    uid() == 0
}

fn uid() -> u32 {
    Command::new("id")
        .arg("-u")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(u32::MAX)
}

/// `program` as the unprivileged user (itself when the tests are not root).
fn as_unprivileged(program: &Path) -> Command {
    if is_root() {
        let mut command = Command::new("setpriv");
        command
            .args([
                "--reuid",
                UNPRIVILEGED,
                "--regid",
                UNPRIVILEGED,
                "--clear-groups",
            ])
            .arg(program);
        command
    } else {
        Command::new(program)
    }
}

#[tokio::test]
async fn a_process_of_the_executors_user_cannot_read_its_secrets() -> anyhow::Result<()> {
    if is_root() && which("setpriv").is_none() {
        eprintln!("SKIP the sealed-executor test: running as root without setpriv");
        return Ok(());
    }
    let word = |tag: &str| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("{tag}-{nanos:x}")
    };
    let (executor_pw, model_key) = (word("pw-executor"), word("sk-model"));
    let conf = format!(
        "LOOPGATE_NATS_MANAGER_PASSWORD: \"{}\"\nLOOPGATE_NATS_EXECUTOR_PASSWORD: \"{executor_pw}\"\n\
         LOOPGATE_NATS_AUDITOR_PASSWORD: \"unused\"\n{USERS_CONF}",
        word("pw-manager")
    );
    let nats = NatsServer::start_with_config(&conf).await?;
    let dir = tempfile::tempdir()?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
    let binary = dir.path().join("loopgate-executor");
    std::fs::copy(env!("CARGO_BIN_EXE_loopgate-executor"), &binary)?;
    std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755))?;
    let work = dir.path().join("work");
    std::fs::create_dir(&work)?;
    if is_root() {
        std::os::unix::fs::chown(&work, Some(65534), Some(65534))?;
    }
    let config = dir.path().join("executor.toml");
    std::fs::write(
        &config,
        format!(
            "[nats]\nurl = \"{}\"\nuser = \"executor\"\npassword_env = \"LG_TEST_EXECUTOR_PW\"\n\
             [executor]\nworker_id = \"sealed\"\nwork_dir = \"{}\"\nsandbox = \"off\"\n\
             [models.m]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n\
             api_key_env = \"LG_TEST_MODEL_KEY\"\n",
            nats.url(),
            work.display()
        ),
    )?;
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644))?;
    let mut command = as_unprivileged(&binary);
    command
        .arg("--config")
        .arg(&config)
        .env("LG_TEST_EXECUTOR_PW", &executor_pw)
        .env("LG_TEST_MODEL_KEY", &model_key);
    let executor = ChildGuard::spawn("loopgate-executor", command)?;
    // Connected with its password (so it was read) and waiting for the manager's topology.
    wait_until(Duration::from_secs(60), || {
        let log = executor.log_text();
        async move { log.contains("waiting for the JetStream topology") }
    })
    .await
    .with_context(|| executor.log_tail(4000))?;

    let path = format!("/proc/{}/environ", executor.pid());
    let read = as_unprivileged(Path::new("/bin/cat")).arg(&path).output()?;
    let text = String::from_utf8_lossy(&read.stdout);
    assert!(
        !text.contains(&executor_pw) && !text.contains(&model_key),
        "{path} shows the executor's secrets to its own user"
    );
    assert!(
        !read.status.success(),
        "{path} is readable by the executor's own user"
    );
    Ok(())
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.exists())
}
