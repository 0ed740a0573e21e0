//! The auditor against a real nats-server: reports bound to the candidate, integrity violations
//! on corrupted blobs, hung checks, junk on the audit subject, and the Redis refusal.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use loopgate_auditor::WorkerOptions;
use loopgate_models::{ChatClient, ModelProfileConfig, Provider};
use loopgate_protocol::snapshot::sha256_hex;
use loopgate_protocol::verdict::{AuditStatus, CheckVerdict, ContractVerdict, Integrity};
use loopgate_test_support::ChildGuard;
use loopgate_test_support::{Reply, Script, StandInModel};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_audits_a_candidate_with_evidence_bound_to_it() -> anyhow::Result<()> {
    let mut env = env().await?;
    let (base, candidate) = freeze_hello(&env.store).await?;
    let scratch = open_tempdir()?;
    let work_dir = scratch.path().join("audit");
    let config = scratch.path().join("auditor.toml");
    std::fs::write(
        &config,
        format!(
            "[nats]\nurl = \"{}\"\n[auditor]\nworker_id = \"audit-it\"\nwork_dir = \"{}\"\n",
            env.url,
            work_dir.display()
        ),
    )?;
    let mut auditor = ChildGuard::spawn("loopgate-auditor", auditor_command(&config))?;

    let contract = contract(vec![
        criterion("hello-exists", "test -f hello.py", 10),
        criterion("always-fails", "echo failing on purpose; false", 10),
    ]);
    let req = request("run-pass-fail", contract, &base, &candidate);
    publish_request(&env.bus, &req).await?;
    let report = next_report(&mut env.results)
        .await
        .with_context(|| auditor.log_tail(4000))?;

    assert_eq!(report.run_id, "run-pass-fail");
    assert_eq!(report.worker, "audit-it");
    assert_eq!(report.delivery_attempt, 1);
    assert_eq!(report.snapshot, candidate);
    assert_eq!(report.verdicts.status, AuditStatus::Incomplete);
    assert_eq!(report.verdicts.integrity, Integrity::Clean);
    assert_eq!(report.verdicts.contract, ContractVerdict::Aligned);
    assert_eq!(report.changed_paths, vec!["hello.py"]);
    assert_eq!(
        report.backcheck,
        vec!["hello-exists: pass", "always-fails: fail"]
    );
    assert_eq!(report.evidence.len(), 2);
    for evidence in &report.evidence {
        assert_eq!(evidence.artifact_version, candidate, "{evidence:?}");
        assert!(evidence.produced_at > 0);
        let digest = evidence.log_digest.as_deref().context("log digest")?;
        let log = env.evidence.get_bytes(digest).await?;
        assert_eq!(sha256_hex(&log), digest);
    }
    let fails = report
        .evidence
        .iter()
        .find(|e| e.check_id == "always-fails")
        .context("fails")?;
    assert_eq!(fails.verdict, CheckVerdict::Fail);
    assert_eq!(fails.exit_code, Some(1));
    assert!(fails.output_excerpt.contains("failing on purpose"));
    let log = env
        .evidence
        .get_bytes(fails.log_digest.as_deref().unwrap_or_default())
        .await?;
    assert!(String::from_utf8_lossy(&log).contains("failing on purpose"));
    let passes = report
        .evidence
        .iter()
        .find(|e| e.check_id == "hello-exists")
        .context("pass")?;
    assert_eq!(passes.verdict, CheckVerdict::Pass);
    assert!(
        report.gaps.iter().any(|g| g.contains("always-fails")),
        "{:?}",
        report.gaps
    );
    assert!(dir_is_empty(&work_dir), "scratch dir left behind");

    let status = auditor
        .terminate(Duration::from_secs(20))
        .await
        .context("auditor exit")?;
    assert!(status.success(), "{status:?}\n{}", auditor.log_tail(4000));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupted_blob_is_an_integrity_violation() -> anyhow::Result<()> {
    let mut env = env().await?;
    let (base, candidate) = freeze_hello(&env.store).await?;
    // Same length, different bytes, written over the stored blob.
    tamper_hello_blob(&env.bus).await?;

    let work_dir = tempfile::tempdir()?;
    let (cancel, worker) = spawn_worker(&env, work_dir.path(), BTreeMap::new());
    let contract = contract(vec![criterion("hello-exists", "test -f hello.py", 10)]);
    publish_request(
        &env.bus,
        &request("run-corrupt", contract, &base, &candidate),
    )
    .await?;
    let report = next_report(&mut env.results).await?;

    assert_eq!(report.snapshot, candidate);
    assert_eq!(report.verdicts.integrity, Integrity::Violation);
    assert_eq!(report.verdicts.status, AuditStatus::Incomplete);
    assert_eq!(report.verdicts.contract, ContractVerdict::Unknown);
    assert_eq!(report.evidence.len(), 1);
    assert!(report
        .evidence
        .iter()
        .all(|e| e.verdict == CheckVerdict::Inconclusive && e.artifact_version == candidate));
    assert!(
        report.gaps.iter().any(|g| g.contains("hello.py")),
        "{:?}",
        report.gaps
    );
    assert!(dir_is_empty(work_dir.path()));

    cancel.cancel();
    worker.await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_check_is_inconclusive_and_junk_is_dropped() -> anyhow::Result<()> {
    let mut env = env().await?;
    let (base, candidate) = freeze_hello(&env.store).await?;
    let work_dir = tempfile::tempdir()?;
    let (cancel, worker) = spawn_worker(&env, work_dir.path(), BTreeMap::new());

    // Not an audit request: terminated, and the worker carries on.
    publish_raw(
        &env.bus,
        br#"{"v":1,"kind":"decide_request","run_id":"x","generation":1,"seq":1}"#,
        "junk-1",
    )
    .await?;
    publish_raw(&env.bus, br#"{"v":99,"kind":"audit_request"}"#, "junk-2").await?;

    let contract = contract(vec![
        criterion("hangs", "sleep 30 & sleep 30", 1),
        criterion("hello-exists", "test -f hello.py", 10),
    ]);
    let mut req = request("run-hang", contract, &base, &candidate);
    req.auditor_profile = Some("ghost".into());
    let started = Instant::now();
    publish_request(&env.bus, &req).await?;
    let report = next_report(&mut env.results).await?;
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "{:?}",
        started.elapsed()
    );

    assert_eq!(report.run_id, "run-hang");
    let verdict = |id: &str| {
        report
            .evidence
            .iter()
            .find(|e| e.check_id == id)
            .map(|e| e.verdict)
    };
    assert_eq!(verdict("hangs"), Some(CheckVerdict::Inconclusive));
    assert_eq!(verdict("hello-exists"), Some(CheckVerdict::Pass));
    assert_eq!(report.verdicts.status, AuditStatus::Incomplete);
    assert_eq!(report.verdicts.contract, ContractVerdict::Unknown);
    assert!(
        report
            .gaps
            .iter()
            .any(|g| g.contains("auditor model 'ghost' not configured here")),
        "{:?}",
        report.gaps
    );

    cancel.cancel();
    worker.await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_refuses_to_start_with_a_redis_url() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("auditor.toml");
    std::fs::write(&config, "[nats]\nurl = \"nats://127.0.0.1:1\"\n")?;
    let mut command = auditor_command(&config);
    command.env("LOOPGATE_REDIS_URL", "redis://127.0.0.1:6379");
    let mut auditor = ChildGuard::spawn("loopgate-auditor", command)?;
    let status = auditor.wait_exit(Duration::from_secs(20)).await?;
    assert!(!status.success());
    assert!(
        auditor.log_text().contains("LOOPGATE_REDIS_URL"),
        "{}",
        auditor.log_text()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn judge_can_only_tighten_and_sees_no_more_than_the_facts() -> anyhow::Result<()> {
    let mut env = env().await?;
    let (base, candidate) = freeze_hello(&env.store).await?;
    let model = "standin-auditor";
    let standin = StandInModel::start(Script::new().replies(
        model,
        [
            Reply::content("Looks fine to me overall."),
            Reply::content("**Status:** incomplete\n**Integrity:** suspect\n**Contract audit:** needs_revision"),
        ],
    ))
    .await?;
    let profile = ModelProfileConfig {
        provider: Provider::OpenAi,
        base_url: standin.base_url(),
        model: model.into(),
        timeout_secs: 20,
        ..ModelProfileConfig::default()
    }
    .resolve("judge", &|_| None)?;
    let judges = BTreeMap::from([("judge".to_string(), ChatClient::from_profile(&profile)?)]);
    let work_dir = tempfile::tempdir()?;
    let (cancel, worker) = spawn_worker(&env, work_dir.path(), judges);

    let contract = contract(vec![criterion("hello-exists", "test -f hello.py", 10)]);
    let mut req = request("run-judge", contract, &base, &candidate);
    req.auditor_profile = Some("judge".into());
    publish_request(&env.bus, &req).await?;
    let report = next_report(&mut env.results).await?;

    // Mechanically complete/clean/aligned; the judge (after one repair request) tightened it.
    assert_eq!(report.evidence[0].verdict, CheckVerdict::Pass);
    assert_eq!(report.verdicts.status, AuditStatus::Incomplete);
    assert_eq!(report.verdicts.integrity, Integrity::Suspect);
    assert_eq!(report.verdicts.contract, ContractVerdict::NeedsRevision);
    assert!(
        report.gaps.iter().any(|g| g.contains("tightened")),
        "{:?}",
        report.gaps
    );
    assert!(report
        .judgment
        .as_deref()
        .unwrap_or_default()
        .contains("needs_revision"));
    assert!(report.usage.total() > 0);
    let requests = standin.requests(model);
    assert_eq!(requests.len(), 2);
    let first = requests[0]["messages"].as_array().context("messages")?;
    assert_eq!(first.len(), 2, "system + one user prompt only");
    let prompt = first[1]["content"].as_str().context("prompt")?;
    for needle in [
        "Write hello.py that prints hello",
        "create hello.py",
        "- hello.py",
        "hello-exists: pass",
    ] {
        assert!(prompt.contains(needle), "prompt lacks {needle}:\n{prompt}");
    }

    cancel.cancel();
    worker.await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_acks_keep_a_long_audit_from_being_redelivered() -> anyhow::Result<()> {
    let mut env = env().await?;
    let (base, candidate) = freeze_hello(&env.store).await?;
    let work_dir = tempfile::tempdir()?;
    let options = WorkerOptions {
        ack_wait: Duration::from_secs(3),
        shutdown_grace: Duration::from_secs(5),
        concurrency: 1,
    };
    // The durable itself must redeliver after 3 s (auditors only bind it).
    env.bus
        .work_consumer(
            loopgate_transport::Work::Audit,
            loopgate_transport::ConsumerOptions {
                ack_wait: Duration::from_secs(3),
                ..Default::default()
            },
        )
        .await?;
    // Two workers on the durable: the idle one would take a redelivery at once.
    let (cancel, worker) = spawn_worker_with(&env, work_dir.path(), BTreeMap::new(), options);
    let (cancel2, worker2) = spawn_worker_with(&env, work_dir.path(), BTreeMap::new(), options);
    // Runs past ack_wait: only progress acks stop JetStream from handing it out again.
    let contract = contract(vec![criterion("slow", "sleep 5", 20)]);
    publish_request(&env.bus, &request("run-slow", contract, &base, &candidate)).await?;
    let report = next_report(&mut env.results).await?;
    assert_eq!(report.delivery_attempt, 1);
    assert_eq!(report.evidence[0].verdict, CheckVerdict::Pass);
    // Nobody was handed the same request again.
    let again = support::next_besides_progress(&mut env.results, Duration::from_secs(6)).await?;
    assert!(again.is_none(), "{:?}", again.map(|m| m.kind()));
    cancel.cancel();
    cancel2.cancel();
    worker.await?;
    worker2.await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_hands_an_unfinished_audit_back() -> anyhow::Result<()> {
    let mut env = env().await?;
    let (base, candidate) = freeze_hello(&env.store).await?;
    let marker_dir = tempfile::tempdir()?;
    let marker = marker_dir.path().join("first-run");
    // First delivery hangs (and leaves a marker outside the snapshot); the second passes.
    let check = format!(
        "test -f {m} && exit 0; touch {m}; sleep 60",
        m = marker.display()
    );
    let contract = contract(vec![criterion("second-time-lucky", &check, 120)]);
    publish_request(
        &env.bus,
        &request("run-shutdown", contract, &base, &candidate),
    )
    .await?;

    let work_dir = tempfile::tempdir()?;
    let options = WorkerOptions {
        ack_wait: Duration::from_secs(30),
        shutdown_grace: Duration::from_secs(1),
        concurrency: 1,
    };
    let (cancel, worker) = spawn_worker_with(&env, work_dir.path(), BTreeMap::new(), options);
    loopgate_test_support::wait_until(Duration::from_secs(30), || {
        let exists = marker.exists();
        async move { exists }
    })
    .await?;
    let stopping = Instant::now();
    cancel.cancel();
    worker.await?;
    assert!(
        stopping.elapsed() < Duration::from_secs(10),
        "{:?}",
        stopping.elapsed()
    );
    assert!(dir_is_empty(work_dir.path()), "scratch dir left behind");

    // The nak'ed request goes to the next worker at once.
    let (cancel, worker) = spawn_worker(&env, work_dir.path(), BTreeMap::new());
    let report = next_report(&mut env.results).await?;
    assert_eq!(report.delivery_attempt, 2);
    assert_eq!(report.evidence[0].verdict, CheckVerdict::Pass);
    cancel.cancel();
    worker.await?;
    Ok(())
}

#[path = "suite/mod.rs"]
mod suite;
