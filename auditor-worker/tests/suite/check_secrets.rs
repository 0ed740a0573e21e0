//! Issue 38 item 2: an audit check never reaches the signing key or the auditor's NATS
//! password, whether it runs in the sandbox or outside it. The auditor binary runs with the
//! per-role NATS users of deploy/nats/ and a signing key; the contract's check is the hostile
//! artifact: it prints `/proc/$PPID/environ` (outside bubblewrap its parent is the auditor
//! itself), the configured key file, the config file and the work dir, and exits 1. Its output
//! lands in the report's evidence (excerpt and stored log), so neither may hold the key, the
//! password, the config or another audit's tree.
//!
//! - In the sandbox (`auto` with bubblewrap): the key file (mode 0644, outside /tmp, as a
//!   Kubernetes Secret mounts it), the config and the work dir are hidden from the check.
//! - Outside it (`sandbox = "off"`, the auditor and its checks one unprivileged user, as in a
//!   pod without user namespaces): the auditor removed its secret variables and made itself
//!   non-dumpable before anything started, so `/proc/<auditor>/environ` is closed to its own
//!   user; signing there needs `allow_unsandboxed_signing`, and every report says so.
//! - A signing auditor whose checks would run unsandboxed refuses to start without the allow,
//!   and with it when the check's user could read the key file.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use crate::support;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Context;
use loopgate_auditor::{probe, SandboxSettings};
use loopgate_protocol::verdict::{CheckVerdict, Evidence};
use loopgate_protocol::wire::AuditReport;
use loopgate_test_support::ChildGuard;
use support::*;

/// Where the secrets these tests plant live: outside `/tmp` (every sandbox's `/tmp` is fresh
/// anyway) and below directories the check user may search, so hiding them is what keeps them
/// out of reach (under a 0700 home such as the default target dir in `/root/.cache`, the check
/// user could not reach them at all, and the test would prove nothing).
const REACHABLE_TMP: &str = "/var/tmp";

const PASSWORD_ENV: &str = "LG_TEST_AUDITOR_PASSWORD";
const SIGNING_KEY_ENV: &str = "LG_TEST_AUDITOR_SIGNING_KEY";
/// The uid/gid an unprivileged auditor runs as when the tests run as root.
const UNPRIVILEGED: u32 = 65534;

/// A fresh Ed25519 seed (64 hex digits).
fn seed() -> String {
    let a = uuid::Uuid::new_v4().simple().to_string();
    let b = uuid::Uuid::new_v4().simple().to_string();
    format!("{a}{b}")
}

/// The hostile check: everything of the auditor it can reach, then a failure (so its output
/// is kept as evidence).
fn hostile_check(key_file: Option<&Path>, config: &Path, work_dir: &Path) -> String {
    let key = key_file.map_or(String::new(), |k| {
        format!("echo key:; cat {} 2>&1; ", k.display())
    });
    format!(
        "echo environ:; tr '\\0' '\\n' < /proc/$PPID/environ 2>&1; {key}\
         echo config:; cat {config} 2>&1; echo work:; ls -A {work} 2>&1; exit 1",
        config = config.display(),
        work = work_dir.display()
    )
}

/// The report's one evidence item with its whole stored output.
async fn evidence_and_log(env: &Env, report: &AuditReport) -> anyhow::Result<(Evidence, String)> {
    let evidence = report
        .evidence
        .first()
        .cloned()
        .with_context(|| format!("no evidence: {report:?}"))?;
    let digest = evidence.log_digest.as_deref().context("log digest")?;
    let log = String::from_utf8_lossy(&env.evidence.get_bytes(digest).await?).into_owned();
    Ok((evidence, log))
}

/// Neither the excerpt nor the stored log holds any of `secrets` (name, value).
fn assert_holds_none(evidence: &Evidence, log: &str, secrets: &[(&str, &str)]) {
    for (name, value) in secrets {
        assert!(
            !evidence.output_excerpt.contains(value) && !log.contains(value),
            "the check's output holds the {name}:\n{log}"
        );
    }
}

async fn audit_with(
    env: &mut Env,
    auditor: &mut ChildGuard,
    check: &str,
) -> anyhow::Result<AuditReport> {
    let (base, candidate) = freeze_hello(&env.store).await?;
    let run_id = format!("run-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let criteria = vec![criterion("hostile", check, 20)];
    publish_request(
        &env.bus,
        &request(&run_id, contract(criteria), &base, &candidate),
    )
    .await?;
    let report = next_report(&mut env.results)
        .await
        .with_context(|| auditor.log_tail(4000))?;
    auditor.terminate(Duration::from_secs(20)).await;
    Ok(report)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_check_reads_no_key_file_no_config_and_no_other_tree() -> anyhow::Result<()> {
    // Outside /tmp (every sandbox's /tmp is fresh anyway), traversable by the check user.
    let dir = tempfile::tempdir_in(REACHABLE_TMP)?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
    let sandbox = probe(&SandboxSettings::default(), &dir.path().join("probe")).await?;
    if !sandbox.isolates() {
        eprintln!(
            "SKIP the sandboxed variant: bubblewrap cannot run here ({:?}); the unsandboxed \
             variant below still runs",
            sandbox.limitations
        );
        return Ok(());
    }
    let mut env = secured_env(false).await?;
    let passwords = env.passwords.clone().context("secured env")?;
    let seed = seed();
    let key_file = dir.path().join("signing-key");
    std::fs::write(&key_file, format!("{seed}\n"))?;
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644))?;
    let work_dir = dir.path().join("audit");
    let canary = format!("other-audit-{}", uuid::Uuid::new_v4().simple());
    std::fs::create_dir_all(work_dir.join(&canary))?;
    let marker = format!("config-marker-{}", uuid::Uuid::new_v4().simple());
    let config = dir.path().join("auditor.toml");
    std::fs::write(
        &config,
        format!(
            "# {marker}\n[nats]\nurl = \"{}\"\nuser = \"auditor\"\npassword_env = \"{PASSWORD_ENV}\"\n\
             [auditor]\nworker_id = \"audit-hidden\"\nwork_dir = \"{}\"\nsandbox = \"auto\"\n\
             signing_key_file = \"{}\"\n",
            env.url,
            work_dir.display(),
            key_file.display()
        ),
    )?;
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644))?;
    let mut command = auditor_command(&config);
    command.env(PASSWORD_ENV, &passwords.auditor);
    let mut auditor = ChildGuard::spawn("loopgate-auditor", command)?;

    let check = hostile_check(Some(&key_file), &config, &work_dir);
    let report = audit_with(&mut env, &mut auditor, &check).await?;
    let (evidence, log) = evidence_and_log(&env, &report).await?;
    // The check ran, in the sandbox, and failed as written.
    assert_eq!(evidence.verdict, CheckVerdict::Fail, "{log}");
    assert_eq!(evidence.isolated, Some(true), "{evidence:?}");
    assert!(
        log.contains("environ:") && log.contains("key:") && log.contains("work:"),
        "{log}"
    );
    assert!(
        !report.signature.is_empty(),
        "the report is signed: {report:?}"
    );
    assert_holds_none(
        &evidence,
        &log,
        &[
            ("signing key", &seed),
            ("NATS password", &passwords.auditor),
            ("config file", &marker),
            ("work dir's listing", &canary),
        ],
    );
    Ok(())
}

/// The auditor binary as an unprivileged user: itself when the tests do not run as root,
/// else `nobody` through `setpriv` (`None` when setpriv is missing). The binary is copied
/// where that user can run it; `dir` becomes that user's.
fn unprivileged_auditor(dir: &Path, config: &Path) -> anyhow::Result<Option<Command>> {
    let binary = dir.join("loopgate-auditor");
    std::fs::copy(env!("CARGO_BIN_EXE_loopgate-auditor"), &binary)?;
    std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755))?;
    let mut command = if is_root() {
        if !Path::new("/usr/bin/setpriv").exists() && !Path::new("/bin/setpriv").exists() {
            return Ok(None);
        }
        for entry in walk(dir)? {
            std::os::unix::fs::chown(&entry, Some(UNPRIVILEGED), Some(UNPRIVILEGED))?;
        }
        let mut command = Command::new("setpriv");
        command
            .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .arg(&binary);
        command
    } else {
        Command::new(&binary)
    };
    command
        .arg("--config")
        .arg(config)
        .env_remove("LOOPGATE_REDIS_URL")
        .env_remove("LOOPGATE_NATS_URL");
    Ok(Some(command))
}

/// `dir` and everything under it.
fn walk(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut all = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < all.len() {
        if all[i].is_dir() {
            for entry in std::fs::read_dir(&all[i])? {
                all.push(entry?.path());
            }
        }
        i += 1;
    }
    Ok(all)
}

fn unsandboxed_config(url: &str, work_dir: &Path, signing: &str) -> String {
    format!(
        "[nats]\nurl = \"{url}\"\nuser = \"auditor\"\npassword_env = \"{PASSWORD_ENV}\"\n\
         [auditor]\nworker_id = \"audit-unsandboxed\"\nwork_dir = \"{}\"\nsandbox = \"off\"\n\
         {signing}",
        work_dir.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsandboxed_check_cannot_read_the_auditors_environment() -> anyhow::Result<()> {
    let mut env = secured_env(false).await?;
    let passwords = env.passwords.clone().context("secured env")?;
    let seed = seed();
    let dir = open_tempdir()?;
    let work_dir = dir.path().join("audit");
    std::fs::create_dir(&work_dir)?;
    let config = dir.path().join("auditor.toml");
    std::fs::write(
        &config,
        unsandboxed_config(
            &env.url,
            &work_dir,
            &format!("signing_key_env = \"{SIGNING_KEY_ENV}\"\nallow_unsandboxed_signing = true\n"),
        ),
    )?;
    let Some(mut command) = unprivileged_auditor(dir.path(), &config)? else {
        eprintln!("SKIP the unsandboxed variant: running as root without setpriv");
        return Ok(());
    };
    command
        .env(PASSWORD_ENV, &passwords.auditor)
        .env(SIGNING_KEY_ENV, &seed);
    let mut auditor = ChildGuard::spawn("loopgate-auditor", command)?;

    let check = hostile_check(None, &config, &work_dir);
    let report = audit_with(&mut env, &mut auditor, &check).await?;
    let (evidence, log) = evidence_and_log(&env, &report).await?;
    // The check ran as a plain child of the auditor, as its user, and failed as written.
    assert_eq!(evidence.verdict, CheckVerdict::Fail, "{log}");
    assert_eq!(evidence.isolated, Some(false), "{evidence:?}");
    assert!(log.contains("environ:") && log.contains("work:"), "{log}");
    assert_holds_none(
        &evidence,
        &log,
        &[
            ("signing key", &seed),
            ("NATS password", &passwords.auditor),
        ],
    );
    // Signed, and the report says its checks ran unsandboxed although it is.
    assert!(!report.signature.is_empty(), "{report:?}");
    assert!(
        report
            .gaps
            .iter()
            .any(|g| g.contains("allow_unsandboxed_signing = true")),
        "{:?}",
        report.gaps
    );
    Ok(())
}

#[tokio::test]
async fn a_signing_auditor_refuses_checks_that_would_run_unsandboxed() -> anyhow::Result<()> {
    let dir = open_tempdir()?;
    let key_file = dir.path().join("signing-key");
    std::fs::write(&key_file, format!("{}\n", seed()))?;
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644))?;
    // (signing lines, what the refusal names); NATS is never reached.
    let cases = [
        (
            format!("signing_key_env = \"{SIGNING_KEY_ENV}\"\n"),
            "allow_unsandboxed_signing = true",
        ),
        (
            format!(
                "signing_key_file = \"{}\"\nallow_unsandboxed_signing = true\n",
                key_file.display()
            ),
            "could read the signing key file",
        ),
    ];
    for (i, (signing, names)) in cases.iter().enumerate() {
        let work_dir = dir.path().join(format!("audit-{i}"));
        let config = dir.path().join(format!("auditor-{i}.toml"));
        std::fs::write(
            &config,
            unsandboxed_config("nats://127.0.0.1:1", &work_dir, signing),
        )?;
        let mut command = auditor_command(&config);
        command
            .env(PASSWORD_ENV, "unused")
            .env(SIGNING_KEY_ENV, seed());
        let mut auditor = ChildGuard::spawn("loopgate-auditor", command)?;
        let status = auditor
            .wait_exit(Duration::from_secs(30))
            .await
            .with_context(|| auditor.log_tail(4000))?;
        let log = auditor.log_text();
        assert!(!status.success(), "{signing}: {log}");
        assert!(
            log.contains("refusing to sign audit reports") && log.contains(names),
            "{signing}: {log}"
        );
    }
    Ok(())
}
