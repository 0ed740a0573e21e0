//! Host-level isolation, where the host allows it (root, iproute2, util-linux; else a visible
//! SKIP line): the auditor in a network namespace that reaches NATS but not Redis still
//! audits; and where user namespaces are unavailable to it, bubblewrap cannot start, the
//! checks still run (timeouts, caps, scrubbed env) and every report says they ran without
//! network isolation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use crate::support;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context};
use loopgate_protocol::verdict::{AuditStatus, CheckVerdict};
use loopgate_snapshot::SnapshotStore;
use loopgate_test_support::{wait_until, ChildGuard, RedisServer};
use support::*;

const PASSWORD_ENV: &str = "LG_TEST_AUDITOR_PASSWORD";

fn run(program: &str, args: &[&str]) -> anyhow::Result<std::process::Output> {
    Ok(Command::new(program).args(args).output()?)
}

fn must(program: &str, args: &[&str]) -> anyhow::Result<()> {
    let out = run(program, args)?;
    if !out.status.success() {
        bail!(
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// A network namespace joined to the host by a veth pair; deleted on drop.
struct NetNs {
    name: String,
    host_ip: String,
}

impl NetNs {
    fn create() -> anyhow::Result<NetNs> {
        let tag = &uuid::Uuid::new_v4().simple().to_string()[..6];
        let n = u32::from_str_radix(tag, 16)?;
        let (a, b) = (n % 250, (n / 250) % 60);
        let ns = NetNs {
            name: format!("lg-audit-{tag}"),
            host_ip: format!("10.231.{a}.{}", 4 * b + 1),
        };
        let ns_ip = format!("10.231.{a}.{}", 4 * b + 2);
        let (host_if, ns_if) = (format!("lgh{tag}"), format!("lgn{tag}"));
        must("ip", &["netns", "add", &ns.name])?;
        must(
            "ip",
            &[
                "link", "add", &host_if, "type", "veth", "peer", "name", &ns_if,
            ],
        )?;
        must("ip", &["link", "set", &ns_if, "netns", &ns.name])?;
        must(
            "ip",
            &[
                "addr",
                "add",
                &format!("{}/30", ns.host_ip),
                "dev",
                &host_if,
            ],
        )?;
        must("ip", &["link", "set", &host_if, "up"])?;
        let inside = |args: &[&str]| {
            let mut full = vec!["netns", "exec", ns.name.as_str(), "ip"];
            full.extend_from_slice(args);
            must("ip", &full)
        };
        inside(&["addr", "add", &format!("{ns_ip}/30"), "dev", &ns_if])?;
        inside(&["link", "set", &ns_if, "up"])?;
        inside(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Can a TCP connection be opened from inside the namespace?
    fn connects(&self, host: &str, port: u16) -> anyhow::Result<bool> {
        let script = format!("exec 3<>/dev/tcp/{host}/{port}");
        let out = run(
            "ip",
            &[
                "netns", "exec", &self.name, "timeout", "5", "bash", "-c", &script,
            ],
        )?;
        Ok(out.status.success())
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        // Deleting the namespace deletes its veth end, and with it the host end.
        let _ = run("ip", &["netns", "del", &self.name]);
    }
}

fn auditor_toml(url: &str, work_dir: &Path, sandbox: &str) -> String {
    format!(
        "[nats]\nurl = \"{url}\"\nuser = \"auditor\"\npassword_env = \"{PASSWORD_ENV}\"\n\
         [auditor]\nworker_id = \"audit-restricted\"\nwork_dir = \"{}\"\nsandbox = \"{sandbox}\"\n",
        work_dir.display()
    )
}

async fn audit_hello(
    env: &mut Env,
    mut auditor: ChildGuard,
    run_id: &str,
    extra: Vec<loopgate_protocol::contract::Criterion>,
) -> anyhow::Result<loopgate_protocol::wire::AuditReport> {
    let passwords = env.passwords.clone().context("secured env")?;
    let executor = connect_as(&env.url, "executor", &passwords.executor).await?;
    let snapshots =
        SnapshotStore::from_jetstream(executor.jetstream(), executor.request_timeout()).await?;
    let (base, candidate) = freeze_hello(&snapshots).await?;
    let mut criteria = vec![criterion("hello-exists", "test -f hello.py", 10)];
    criteria.extend(extra);
    publish_request(
        &env.bus,
        &request(run_id, contract(criteria), &base, &candidate),
    )
    .await?;
    let report = next_report(&mut env.results)
        .await
        .with_context(|| auditor.log_tail(4000))?;
    let status = auditor
        .terminate(Duration::from_secs(20))
        .await
        .context("auditor exit")?;
    assert!(status.success(), "{}", auditor.log_tail(4000));
    Ok(report)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auditor_in_a_namespace_without_redis_still_audits() -> anyhow::Result<()> {
    if !is_root() {
        eprintln!("SKIP network-namespace test: needs root (ip netns)");
        return Ok(());
    }
    let ns = match NetNs::create() {
        Ok(ns) => ns,
        Err(err) => {
            eprintln!("SKIP network-namespace test: this host does not allow it: {err}");
            return Ok(());
        }
    };
    let mut env = secured_env(true).await?;
    let redis = RedisServer::start().await?;
    let nats_port = env.nats.port();
    assert!(
        ns.connects(&ns.host_ip, nats_port)?,
        "NATS must be reachable"
    );
    assert!(
        !ns.connects(&ns.host_ip, redis.port())?,
        "Redis must not be"
    );
    assert!(
        !ns.connects("127.0.0.1", redis.port())?,
        "Redis must not be"
    );

    let passwords = env.passwords.clone().context("secured env")?;
    let work_dir = open_tempdir()?;
    let config = work_dir.path().join("auditor.toml");
    let url = format!("nats://{}:{nats_port}", ns.host_ip);
    std::fs::write(
        &config,
        auditor_toml(&url, &work_dir.path().join("audit"), "auto"),
    )?;
    let mut command = Command::new("ip");
    command
        .args([
            "netns",
            "exec",
            &ns.name,
            env!("CARGO_BIN_EXE_loopgate-auditor"),
        ])
        .arg("--config")
        .arg(&config)
        .env_remove("LOOPGATE_REDIS_URL")
        .env_remove("LOOPGATE_NATS_URL")
        .env(PASSWORD_ENV, &passwords.auditor);
    let auditor = ChildGuard::spawn("loopgate-auditor", command)?;
    let report = audit_hello(&mut env, auditor, "run-netns", vec![]).await?;
    assert_eq!(report.verdicts.status, AuditStatus::Complete, "{report:?}");
    assert_eq!(report.evidence[0].verdict, CheckVerdict::Pass);
    drop(redis);
    Ok(())
}

/// Copy the auditor binary where an unprivileged user can run it (the target dir may sit in
/// root's home).
fn runnable_copy(dir: &Path) -> anyhow::Result<PathBuf> {
    let copy = dir.join("loopgate-auditor");
    std::fs::copy(env!("CARGO_BIN_EXE_loopgate-auditor"), &copy)?;
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755))?;
    Ok(copy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_user_namespaces_checks_run_unisolated_and_reports_say_so() -> anyhow::Result<()> {
    let tools = ["unshare", "setpriv", "bwrap", "bash"];
    if !is_root()
        || tools.iter().any(|t| {
            run("which", &[t])
                .map(|o| !o.status.success())
                .unwrap_or(true)
        })
    {
        eprintln!("SKIP user-namespace fallback test: needs root and {tools:?}");
        return Ok(());
    }
    let mut env = secured_env(false).await?;
    let passwords = env.passwords.clone().context("secured env")?;
    let dir = open_tempdir()?;
    let binary = runnable_copy(dir.path())?;
    let work_dir = dir.path().join("audit");
    std::fs::create_dir(&work_dir)?;
    std::os::unix::fs::chown(&work_dir, Some(65534), Some(65534))?;
    let config = dir.path().join("auditor.toml");
    std::fs::write(&config, auditor_toml(&env.url, &work_dir, "auto"))?;
    let go = dir.path().join("go");

    // A user namespace whose root maps to root, which forbids further user namespaces and
    // then drops to `nobody`: exactly an unprivileged auditor on a host without them.
    // The inner shell is exec'd after the uid map exists, so it is root (with capabilities)
    // inside the namespace and may lower the namespace limit.
    let script = format!(
        "while [ ! -e {go} ]; do sleep 0.05; done; \
         exec sh -c 'echo 0 > /proc/sys/user/max_user_namespaces || exit 97; \
         exec setpriv --reuid 65534 --regid 65534 --clear-groups \"$@\"' sh \"$@\"",
        go = go.display()
    );
    let mut command = Command::new("unshare");
    command
        .args(["--user", "sh", "-c", &script, "sh"])
        .arg(&binary)
        .arg("--config")
        .arg(&config)
        .env_remove("LOOPGATE_REDIS_URL")
        .env_remove("LOOPGATE_NATS_URL")
        .env(PASSWORD_ENV, &passwords.auditor);
    let auditor = ChildGuard::spawn("loopgate-auditor", command)?;
    let pid = auditor.pid();
    let own = std::fs::read_link("/proc/self/ns/user")?;
    wait_until(Duration::from_secs(10), || {
        let theirs = std::fs::read_link(format!("/proc/{pid}/ns/user")).ok();
        let own = own.clone();
        async move { theirs.is_some_and(|ns| ns != own) }
    })
    .await
    .context("the auditor's user namespace never appeared")?;
    let full = "0 0 4294967295\n";
    std::fs::write(format!("/proc/{pid}/uid_map"), full)?;
    std::fs::write(format!("/proc/{pid}/gid_map"), full)?;
    std::fs::write(&go, b"")?;

    let port = env.nats.port();
    let report = audit_hello(
        &mut env,
        auditor,
        "run-no-userns",
        vec![
            criterion("unprivileged", "test \"$(id -u)\" = 65534", 10),
            // Without a network namespace the host's NATS port is reachable.
            criterion(
                "reaches-nats",
                &format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}'"),
                10,
            ),
        ],
    )
    .await?;
    for evidence in &report.evidence {
        assert_eq!(evidence.verdict, CheckVerdict::Pass, "{report:?}");
    }
    assert!(
        report
            .gaps
            .iter()
            .any(|g| g.contains("without network isolation") && g.contains("bubblewrap cannot run")),
        "{:?}",
        report.gaps
    );
    Ok(())
}
