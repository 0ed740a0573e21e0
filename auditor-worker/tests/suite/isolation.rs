//! Isolation proven by denial: with the per-role NATS users of deploy/nats/, the auditor's
//! credentials can pull audit work, read snapshots, store evidence and publish reports — and
//! the server refuses everything else (reading exec work, events or other inboxes, publishing
//! work, writing or deleting snapshots, creating consumers). A normal audit still succeeds.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use async_nats::jetstream;
use base64::Engine;
use loopgate_protocol::snapshot::sha256_hex;
use loopgate_protocol::subjects::SNAPSHOT_BUCKET;
use loopgate_protocol::verdict::{AuditStatus, CheckVerdict, Integrity};
use loopgate_snapshot::SnapshotStore;
use loopgate_test_support::{wait_until, ChildGuard};
use loopgate_transport::inbox_prefix_for_user;
use support::*;

/// A server refusal, as reported on the connection (`-ERR 'Permissions Violation ...'`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Denial {
    Publish(String),
    Subscribe(String),
}

fn parse_denial(error: &str) -> Option<Denial> {
    let lower = error.to_ascii_lowercase();
    let subject = error.split('"').nth(1)?.to_string();
    if lower.contains("permissions violation for publish") {
        Some(Denial::Publish(subject))
    } else if lower.contains("permissions violation for subscription") {
        Some(Denial::Subscribe(subject))
    } else {
        None
    }
}

/// A raw client for `user` (with that user's inbox prefix) that records the server's denials.
async fn watched_client(
    url: &str,
    user: &str,
    password: &str,
) -> anyhow::Result<(async_nats::Client, Arc<Mutex<Vec<Denial>>>)> {
    let denials = Arc::new(Mutex::new(Vec::new()));
    let sink = denials.clone();
    let client = async_nats::ConnectOptions::with_user_and_password(user.into(), password.into())
        .custom_inbox_prefix(inbox_prefix_for_user(user).context("plain user name")?)
        .event_callback(move |event| {
            let sink = sink.clone();
            async move {
                if let async_nats::Event::ServerError(async_nats::ServerError::Other(text)) = event
                {
                    if let Some(denial) = parse_denial(&text) {
                        sink.lock().unwrap().push(denial);
                    }
                }
            }
        })
        .connect(url)
        .await?;
    Ok((client, denials))
}

async fn expect_denial(denials: &Arc<Mutex<Vec<Denial>>>, want: Denial) -> anyhow::Result<()> {
    let seen = denials.clone();
    let probe = want.clone();
    wait_until(Duration::from_secs(10), move || {
        let found = seen.lock().unwrap().contains(&probe);
        async move { found }
    })
    .await
    .with_context(|| {
        format!(
            "{want:?} not denied; denials: {:?}",
            denials.lock().unwrap()
        )
    })?;
    Ok(())
}

/// Publishes denied on a subject starting with `prefix`.
fn denied_publishes(denials: &Arc<Mutex<Vec<Denial>>>, prefix: &str) -> usize {
    denials
        .lock()
        .unwrap()
        .iter()
        .filter(|d| matches!(d, Denial::Publish(s) if s.starts_with(prefix)))
        .count()
}

#[test]
fn denials_parse() {
    assert_eq!(
        parse_denial("Permissions Violation for Publish to \"loopgate.exec.cli\""),
        Some(Denial::Publish("loopgate.exec.cli".into()))
    );
    assert_eq!(
        parse_denial("permissions violation for subscription to \"loopgate.events.>\""),
        Some(Denial::Subscribe("loopgate.events.>".into()))
    );
    assert_eq!(parse_denial("Authorization Violation"), None);
}

/// auditor.toml for the restricted auditor: its user, its password from the environment.
fn auditor_config(url: &str, work_dir: &std::path::Path) -> String {
    format!(
        "[nats]\nurl = \"{url}\"\nuser = \"auditor\"\npassword_env = \"{PASSWORD_ENV}\"\n\
         [auditor]\nworker_id = \"audit-restricted\"\nwork_dir = \"{}\"\n",
        work_dir.display()
    )
}

const PASSWORD_ENV: &str = "LG_TEST_AUDITOR_PASSWORD";

/// Run a normal audit with the real auditor binary holding only the auditor's credentials.
async fn audit_as_restricted_auditor(
    env: &mut Env,
    command: std::process::Command,
    run_id: &str,
) -> anyhow::Result<()> {
    let passwords = env.passwords.clone().context("secured env")?;
    let executor = connect_as(&env.url, "executor", &passwords.executor).await?;
    // With read-only rights on the topology the executor sees all of it that it needs (the
    // dead letters are the manager's alone, so it may not even look them up).
    let missing = executor
        .missing_topology(loopgate_transport::TopologyRole::Executor)
        .await;
    anyhow::ensure!(missing.is_empty(), "missing for the executor: {missing:?}");
    let snapshots =
        SnapshotStore::from_jetstream(executor.jetstream(), executor.request_timeout()).await?;
    let (base, candidate) = freeze_hello(&snapshots).await?;
    let mut auditor = ChildGuard::spawn("loopgate-auditor", command)?;
    let contract = contract(vec![
        criterion("hello-exists", "test -f hello.py", 10),
        criterion("prints", "grep -q hello hello.py", 10),
    ]);
    publish_request(&env.bus, &request(run_id, contract, &base, &candidate)).await?;
    let report = next_report(&mut env.results)
        .await
        .with_context(|| auditor.log_tail(4000))?;
    assert_eq!(report.run_id, run_id);
    assert_eq!(report.worker, "audit-restricted");
    assert_eq!(report.verdicts.status, AuditStatus::Complete, "{report:?}");
    assert_eq!(report.verdicts.integrity, Integrity::Clean);
    for evidence in &report.evidence {
        assert_eq!(evidence.verdict, CheckVerdict::Pass);
        let digest = evidence.log_digest.as_deref().context("log digest")?;
        env.evidence.get_bytes(digest).await?;
    }
    let status = auditor
        .terminate(Duration::from_secs(20))
        .await
        .context("auditor exit")?;
    assert!(status.success(), "{}", auditor.log_tail(4000));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auditor_credentials_audit_and_are_denied_everything_else() -> anyhow::Result<()> {
    let mut env = secured_env(false).await?;
    let passwords = env.passwords.clone().context("secured env")?;

    // 1. A normal audit, by the real binary, with the auditor's credentials only.
    let work_dir = open_tempdir()?;
    let config = work_dir.path().join("auditor.toml");
    std::fs::write(
        &config,
        auditor_config(&env.url, &work_dir.path().join("audit")),
    )?;
    let mut command = auditor_command(&config);
    command.env(PASSWORD_ENV, &passwords.auditor);
    audit_as_restricted_auditor(&mut env, command, "run-restricted").await?;
    // The permission set is sufficient: the server refused the auditor nothing.
    let log = env.nats.log_text();
    assert!(
        !log.lines()
            .any(|l| l.contains("Violation") && l.contains("user:auditor")),
        "{log}"
    );

    // 2. The same credentials, used for anything else, are refused by the server.
    let (client, denials) = watched_client(&env.url, "auditor", &passwords.auditor).await?;
    for subject in [
        "loopgate.exec.>",
        "loopgate.events.>",
        "_INBOX.>",
        "_INBOX_manager.>",
    ] {
        let _subscription = client.subscribe(subject.to_string()).await?;
        client.flush().await?;
        expect_denial(&denials, Denial::Subscribe(subject.into())).await?;
    }
    client
        .publish("loopgate.exec.cli", "{\"v\":1}".into())
        .await?;
    client.flush().await?;
    expect_denial(&denials, Denial::Publish("loopgate.exec.cli".into())).await?;

    let js = jetstream::ContextBuilder::new()
        .timeout(Duration::from_secs(1))
        .build(client.clone());
    // Reading the bucket's metadata is allowed; writing and deleting are not.
    let bucket = js.get_object_store(SNAPSHOT_BUCKET).await?;
    let victim = format!("blob/{}", sha256_hex(HELLO));
    let mut forged: &[u8] = b"print('pwned')\n";
    assert!(bucket.put(victim.as_str(), &mut forged).await.is_err());
    let chunk_denials = denied_publishes(&denials, "$O.lg-snapshots.C.");
    assert!(chunk_denials > 0, "{:?}", denials.lock().unwrap());
    assert!(bucket.delete(victim.as_str()).await.is_err());
    expect_denial(
        &denials,
        Denial::Publish(format!(
            "$O.lg-snapshots.M.{}",
            base64::engine::general_purpose::URL_SAFE.encode(victim.as_bytes())
        )),
    )
    .await?;
    assert!(js.delete_object_store(SNAPSHOT_BUCKET).await.is_err());
    expect_denial(
        &denials,
        Denial::Publish("$JS.API.STREAM.DELETE.OBJ_lg-snapshots".into()),
    )
    .await?;
    let create = js
        .create_consumer_on_stream(
            jetstream::consumer::pull::Config {
                durable_name: Some("sneaky".into()),
                ..Default::default()
            },
            "LG_EXEC",
        )
        .await;
    assert!(create.is_err());
    assert!(denied_publishes(&denials, "$JS.API.CONSUMER.CREATE.LG_EXEC") > 0);

    // Nothing changed: the manager still reads the intact blob, and no work was injected.
    assert_eq!(env.store.blob(&sha256_hex(HELLO)).await?, HELLO);
    let mut exec = env.bus.jetstream().get_stream("LG_EXEC").await?;
    assert_eq!(exec.info().await?.state.messages, 0);
    // The server logs refusals, so the clean log after the normal audit above means something.
    let log = env.nats.log_text();
    assert!(
        log.lines()
            .any(|l| l.contains("Violation") && l.contains("user:auditor")),
        "{log}"
    );
    Ok(())
}

#[test]
fn deployment_server_config_is_valid() -> anyhow::Result<()> {
    let nats = loopgate_test_support::find_binary(
        "nats-server",
        "LOOPGATE_NATS_SERVER",
        "run scripts/install-deps.sh services",
    )?;
    let config = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/nats/nats-server.conf"
    );
    let out = std::process::Command::new(nats)
        .args(["-t", "-c", config])
        .env("LOOPGATE_NATS_MANAGER_PASSWORD", "m")
        .env("LOOPGATE_NATS_EXECUTOR_PASSWORD", "e")
        .env("LOOPGATE_NATS_AUDITOR_PASSWORD", "a")
        .output()?;
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}
