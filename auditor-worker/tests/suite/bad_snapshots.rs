//! Bucket metadata an executor wrote is never trusted for memory or disk: with the per-role
//! users of deploy/nats/, the executor's credentials plant a candidate whose manifest records
//! 10^12 bytes, one whose blob records as much, and a paged manifest of 10^7 entries. The real
//! auditor binary (auditor credentials, `[snapshot] max_manifest_entries = 10000`) reports
//! each as an untrustworthy candidate (integrity violated, the problem named), settles the
//! request on its first delivery, counts the refusal, and audits the next honest candidate.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use std::time::Duration;

use anyhow::Context;
use loopgate_protocol::snapshot::sha256_hex;
use loopgate_protocol::subjects::SNAPSHOT_BUCKET;
use loopgate_protocol::verdict::{AuditStatus, CheckVerdict, Integrity};
use loopgate_snapshot::{blob_object_name, manifest_object_name, SnapshotStore};
use loopgate_test_support::{
    free_port, http_get, plant_paged_manifest, record_size, ChildGuard, PAGE_ENTRIES,
};
use support::*;

const PASSWORD_ENV: &str = "LG_TEST_AUDITOR_PASSWORD";
const TERA: usize = 1_000_000_000_000;

/// `loopgate_security_refused_messages_total{kind="audit_request",reason=...}` on /metrics.
async fn refused(metrics: &str, reason: &str) -> anyhow::Result<u64> {
    let reply = http_get(
        &format!("http://{metrics}/metrics"),
        Duration::from_secs(10),
    )
    .await?;
    Ok(reply
        .body
        .lines()
        .filter(|l| l.starts_with("loopgate_security_refused_messages_total{"))
        .filter(|l| l.contains("kind=\"audit_request\"") && l.contains(reason))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_bucket_metadata_is_an_untrustworthy_candidate_not_a_crash() -> anyhow::Result<()> {
    let mut env = secured_env(false).await?;
    let passwords = env.passwords.clone().context("secured env")?;

    // What an executor's credentials can write to the snapshot bucket.
    let executor = connect_as(&env.url, "executor", &passwords.executor).await?;
    let js = executor.jetstream();
    let snapshots = SnapshotStore::from_jetstream(js, executor.request_timeout()).await?;
    let (base, honest) = freeze_hello(&snapshots).await?;
    let lying_head = freeze(&snapshots, &[("head.py", b"print('head')\n")]).await?;
    record_size(
        js,
        SNAPSHOT_BUCKET,
        &manifest_object_name(&lying_head),
        TERA,
    )
    .await?;
    let blob = b"print('blob')\n";
    let lying_blob = freeze(&snapshots, &[("blob.py", blob)]).await?;
    record_size(
        js,
        SNAPSHOT_BUCKET,
        &blob_object_name(&sha256_hex(blob)),
        TERA,
    )
    .await?;
    let listed = 10_000_000 / PAGE_ENTRIES + 1;
    let huge = plant_paged_manifest(js, SNAPSHOT_BUCKET, listed, 11, 1).await?;

    let work_dir = open_tempdir()?;
    let metrics = format!("127.0.0.1:{}", free_port()?);
    let config = work_dir.path().join("auditor.toml");
    std::fs::write(
        &config,
        format!(
            "[nats]\nurl = \"{}\"\nuser = \"auditor\"\npassword_env = \"{PASSWORD_ENV}\"\n\
             [auditor]\nworker_id = \"audit-caps\"\nwork_dir = \"{}\"\n\
             [snapshot]\nmax_manifest_entries = 10000\n[metrics]\naddr = \"{metrics}\"\n",
            env.url,
            work_dir.path().join("audit").display()
        ),
    )?;
    let mut command = auditor_command(&config);
    command.env(PASSWORD_ENV, &passwords.auditor);
    let mut auditor = ChildGuard::spawn("loopgate-auditor", command)?;

    let cases = [
        ("run-lying-head", &lying_head, "1000000000000 bytes"),
        ("run-lying-blob", &lying_blob, "1000000000000 bytes"),
        ("run-ten-million", &huge, "max_manifest_entries"),
    ];
    for (run_id, candidate, names) in cases {
        let contract = contract(vec![criterion("hello-exists", "test -f hello.py", 10)]);
        publish_request(&env.bus, &request(run_id, contract, &base, candidate)).await?;
        let report = next_report(&mut env.results).await.with_context(|| {
            format!(
                "{run_id}: exit {:?}\n{}",
                auditor.try_exit_status(),
                auditor.log_tail(4000)
            )
        })?;
        assert_eq!(report.run_id, run_id);
        assert_eq!(&report.snapshot, candidate);
        assert_eq!(report.delivery_attempt, 1, "settled on its first delivery");
        assert_eq!(
            report.verdicts.integrity,
            Integrity::Violation,
            "{report:?}"
        );
        assert_eq!(report.verdicts.status, AuditStatus::Incomplete);
        assert!(report
            .evidence
            .iter()
            .all(|e| e.verdict == CheckVerdict::Inconclusive));
        assert!(
            report.gaps.iter().any(|g| g.contains(names)),
            "{run_id}: the reason names the problem: {:?}",
            report.gaps
        );
    }

    // The auditor never went down and audits the next honest candidate.
    assert!(auditor.is_running(), "{}", auditor.log_tail(4000));
    let contract = contract(vec![criterion("hello-exists", "test -f hello.py", 10)]);
    publish_request(&env.bus, &request("run-honest", contract, &base, &honest)).await?;
    let report = next_report(&mut env.results)
        .await
        .with_context(|| auditor.log_tail(4000))?;
    assert_eq!(report.run_id, "run-honest");
    assert_eq!(report.verdicts.integrity, Integrity::Clean, "{report:?}");
    assert_eq!(report.verdicts.status, AuditStatus::Complete);

    assert!(refused(&metrics, "snapshot_object_too_large").await? >= 2);
    assert!(refused(&metrics, "snapshot_too_many_entries").await? >= 1);
    let log = auditor.log_text();
    assert!(
        log.contains("snapshot_refused"),
        "logged as a security event:\n{log}"
    );
    let status = auditor
        .terminate(Duration::from_secs(20))
        .await
        .context("auditor exit")?;
    assert!(status.success(), "{}", auditor.log_tail(4000));
    Ok(())
}
