//! Mechanical evidence against a real nats-server: protected paths and write scope decide
//! integrity; checks run in separate scratch copies, sandboxed (no network, unprivileged) where
//! the host allows it, and a required sandbox that is missing makes them inconclusive.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use crate::support;
use std::collections::BTreeMap;

use loopgate_auditor::{probe, SandboxMode, SandboxSettings};
use loopgate_protocol::verdict::{AuditStatus, CheckVerdict, Integrity};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protected_paths_and_write_scope_decide_integrity() -> anyhow::Result<()> {
    let mut env = env().await?;
    let test_v1: &[u8] = b"assert open('hello.py').read()\n";
    let test_v2: &[u8] = b"pass\n";
    let base = freeze(&env.store, &[("tests/test_hello.py", test_v1)]).await?;
    let honest = freeze(
        &env.store,
        &[("tests/test_hello.py", test_v1), ("hello.py", HELLO)],
    )
    .await?;
    let edits_tests = freeze(
        &env.store,
        &[("tests/test_hello.py", test_v2), ("hello.py", HELLO)],
    )
    .await?;
    let outside = freeze(
        &env.store,
        &[
            ("tests/test_hello.py", test_v1),
            ("hello.py", HELLO),
            ("notes.txt", b"n"),
        ],
    )
    .await?;
    let work_dir = tempfile::tempdir()?;
    let (cancel, worker) = spawn_worker(&env, work_dir.path(), BTreeMap::new());
    let contract = contract_protecting(
        vec![criterion("hello", "test -f hello.py", 10)],
        vec!["tests/".into()],
    );
    let cases = [
        ("run-honest", &honest, Integrity::Clean),
        ("run-edits-tests", &edits_tests, Integrity::Violation),
        ("run-outside", &outside, Integrity::Suspect),
    ];
    for (run, candidate, integrity) in cases {
        let mut req = request(run, contract.clone(), &base, candidate);
        req.write_scope = vec!["hello.py".into()];
        publish_request(&env.bus, &req).await?;
        let report = next_report(&mut env.results).await?;
        assert_eq!(report.run_id, run);
        assert_eq!(
            report.verdicts.integrity, integrity,
            "{run}: {:?}",
            report.gaps
        );
        assert_eq!(report.evidence[0].verdict, CheckVerdict::Pass, "{run}");
    }
    cancel.cancel();
    worker.await?;

    // Strict scope: the same out-of-scope change is a violation.
    let mut auditor = auditor_on(&env, work_dir.path(), BTreeMap::new());
    auditor.strict_scope = true;
    let (cancel, worker) = spawn_auditor(&env.bus, auditor, worker_options());
    let mut req = request("run-strict", contract, &base, &outside);
    req.write_scope = vec!["hello.py".into()];
    publish_request(&env.bus, &req).await?;
    let report = next_report(&mut env.results).await?;
    assert_eq!(report.verdicts.integrity, Integrity::Violation);
    assert!(
        report.gaps.iter().any(|g| g.contains("notes.txt")),
        "{:?}",
        report.gaps
    );
    cancel.cancel();
    worker.await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandboxed_checks_have_no_network_run_unprivileged_and_do_not_share_copies(
) -> anyhow::Result<()> {
    let mut env = env().await?;
    let work_dir = open_tempdir()?;
    let sandbox = probe(&SandboxSettings::default(), work_dir.path()).await?;
    if sandbox.bwrap.is_none() {
        eprintln!(
            "SKIP network-isolation assertions: no bubblewrap here ({:?})",
            sandbox.limitations
        );
        return Ok(());
    }
    let (base, candidate) = freeze_hello(&env.store).await?;
    let port = env.nats.port();
    let mut auditor = auditor_on(&env, work_dir.path(), BTreeMap::new());
    auditor.sandbox = sandbox.clone();
    let (cancel, worker) = spawn_auditor(&env.bus, auditor, worker_options());
    let contract = contract(vec![
        // The NATS port is open on the host's loopback; the sandbox has its own.
        criterion(
            "reaches-nats",
            &format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}'"),
            10,
        ),
        criterion(
            "writes-its-copy",
            "echo scribble > scratch.txt && test -f hello.py",
            10,
        ),
        criterion("fresh-copy", "test ! -e scratch.txt", 10),
        criterion("unprivileged", "test \"$(id -u)\" != 0", 10),
    ]);
    publish_request(
        &env.bus,
        &request("run-sandbox", contract, &base, &candidate),
    )
    .await?;
    let report = next_report(&mut env.results).await?;
    let verdict = |id: &str| {
        report
            .evidence
            .iter()
            .find(|e| e.check_id == id)
            .map(|e| e.verdict)
    };
    assert_eq!(
        verdict("reaches-nats"),
        Some(CheckVerdict::Fail),
        "{report:?}"
    );
    assert_eq!(
        verdict("writes-its-copy"),
        Some(CheckVerdict::Pass),
        "{report:?}"
    );
    assert_eq!(
        verdict("fresh-copy"),
        Some(CheckVerdict::Pass),
        "{report:?}"
    );
    let privileged = sandbox.run_as.is_none() && is_root();
    assert_eq!(
        verdict("unprivileged"),
        Some(if privileged {
            CheckVerdict::Fail
        } else {
            CheckVerdict::Pass
        }),
        "{report:?}"
    );
    assert!(
        !report.gaps.iter().any(|g| g.contains("network isolation")),
        "{:?}",
        report.gaps
    );
    assert!(dir_is_empty(work_dir.path()), "scratch dir left behind");
    cancel.cancel();
    worker.await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_sandbox_that_is_missing_makes_checks_inconclusive() -> anyhow::Result<()> {
    let mut env = env().await?;
    let work_dir = open_tempdir()?;
    let settings = SandboxSettings {
        mode: SandboxMode::Required,
        check_user: None,
        bwrap: Some("/nonexistent/bwrap".into()),
    };
    let sandbox = probe(&settings, work_dir.path()).await?;
    assert!(sandbox.bwrap.is_none() && sandbox.required, "{sandbox:?}");
    let (base, candidate) = freeze_hello(&env.store).await?;
    let mut auditor = auditor_on(&env, work_dir.path(), BTreeMap::new());
    auditor.sandbox = sandbox;
    let (cancel, worker) = spawn_auditor(&env.bus, auditor, worker_options());
    let contract = contract(vec![criterion("hello", "test -f hello.py", 10)]);
    publish_request(
        &env.bus,
        &request("run-required", contract, &base, &candidate),
    )
    .await?;
    let report = next_report(&mut env.results).await?;
    assert_eq!(report.evidence[0].verdict, CheckVerdict::Inconclusive);
    assert_eq!(report.verdicts.status, AuditStatus::Incomplete);
    assert!(report.evidence[0]
        .output_excerpt
        .contains("sandbox required"));
    assert!(
        report
            .gaps
            .iter()
            .any(|g| g.contains("without network isolation")),
        "{:?}",
        report.gaps
    );
    cancel.cancel();
    worker.await?;
    Ok(())
}

/// A tree large enough to get layered check copies (where the host allows them): each check
/// still sees the whole candidate, may change it in its own copy only, cannot write the shared
/// base it is layered over, has no network and runs unprivileged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layered_check_copies_keep_checks_apart_and_the_base_read_only() -> anyhow::Result<()> {
    let mut env = env().await?;
    let work_dir = open_tempdir()?;
    let sandbox = probe(&SandboxSettings::default(), work_dir.path()).await?;
    if !sandbox.layers() {
        eprintln!(
            "SKIP layered-copy assertions: not available here ({:?})",
            sandbox.limitations
        );
        return Ok(());
    }
    let names: Vec<String> = (0..loopgate_checks::LAYER_MIN_FILES)
        .map(|i| format!("src/m{}/f{i}.txt", i / 40))
        .collect();
    let mut files: Vec<(&str, &[u8])> = names
        .iter()
        .map(|n| (n.as_str(), b"x".as_slice()))
        .collect();
    files.push(("hello.py", HELLO));
    let candidate = support::freeze(&env.store, &files).await?;
    let base = env.store.freeze_empty().await?.id;
    let port = env.nats.port();
    let mut auditor = auditor_on(&env, work_dir.path(), BTreeMap::new());
    auditor.sandbox = sandbox.clone();
    let (cancel, worker) = spawn_auditor(&env.bus, auditor, worker_options());
    let lower = "sed -n 's/.*lowerdir=\\([^,]*\\).*/\\1/p' /proc/self/mountinfo | head -n 1";
    let contract = contract(vec![
        criterion(
            "reaches-nats",
            &format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}'"),
            10,
        ),
        criterion(
            "changes-its-copy",
            "test -f src/m0/f0.txt && echo y >> src/m0/f0.txt && rm hello.py && echo s > scratch.txt",
            10,
        ),
        criterion(
            "base-read-only",
            &format!("l=$({lower}); test -n \"$l\" && ! touch \"$l/evil.txt\" 2>/dev/null && ! rm \"$l/hello.py\" 2>/dev/null"),
            10,
        ),
        criterion(
            "fresh-copy",
            "test ! -e scratch.txt && test ! -e evil.txt && test -f hello.py && test \"$(cat src/m0/f0.txt)\" = x",
            10,
        ),
        criterion("unprivileged", "test \"$(id -u)\" != 0", 10),
    ]);
    publish_request(
        &env.bus,
        &request("run-layered", contract, &base, &candidate),
    )
    .await?;
    let report = next_report(&mut env.results).await?;
    let verdict = |id: &str| {
        report
            .evidence
            .iter()
            .find(|e| e.check_id == id)
            .map(|e| e.verdict)
    };
    assert_eq!(
        verdict("reaches-nats"),
        Some(CheckVerdict::Fail),
        "{report:?}"
    );
    for id in ["changes-its-copy", "base-read-only", "fresh-copy"] {
        assert_eq!(verdict(id), Some(CheckVerdict::Pass), "{id}: {report:?}");
    }
    // Layered copies are only probed for when checks run unprivileged.
    assert_eq!(
        verdict("unprivileged"),
        Some(CheckVerdict::Pass),
        "{report:?}"
    );
    assert!(dir_is_empty(work_dir.path()), "scratch dir left behind");
    cancel.cancel();
    worker.await?;
    Ok(())
}
