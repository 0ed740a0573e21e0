//! The judge is not asked while one of the task's blocking checks fails (the gate stays closed
//! whatever it says): no request reaches the stand-in judge, the clause has no evidence and the
//! report says why. Once the checks pass, the same clause is put to the judge.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use loopgate_protocol::contract::Contract;
use loopgate_protocol::contract::{Criterion, CriterionSource};
use loopgate_protocol::verdict::{AuditStatus, CheckVerdict};
use loopgate_protocol::wire::AuditReport;
use loopgate_test_support::{Reply, Script, StandInModel};
use support::*;

fn goal_clause() -> Criterion {
    Criterion {
        id: "goal-1".into(),
        description: "goal clause: it prints hello".into(),
        check: None,
        blocking: true,
        timeout_secs: 10,
        source: CriterionSource::Goal,
        clause: Some("hello.py prints hello".into()),
    }
}

/// Audits `candidate` under `contract` with the judge profile `judge`; the worker's report.
async fn audit_with_judge(
    env: &mut Env,
    run_id: &str,
    contract: Contract,
    base: &str,
    candidate: &str,
) -> anyhow::Result<AuditReport> {
    let mut req = request(run_id, contract, base, candidate);
    req.auditor_profile = Some("judge".into());
    publish_request(&env.bus, &req).await?;
    next_report(&mut env.results).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_judge_waits_until_every_blocking_check_passes() -> anyhow::Result<()> {
    let mut env = env().await?;
    let (base, candidate) = freeze_hello(&env.store).await?;
    let model = "standin-judge";
    let standin = StandInModel::start(
        Script::new().fallback(model, Reply::content("met - `print('hello')` prints hello")),
    )
    .await?;
    let judges = standin_judges(&standin, "judge", model)?;
    let work_dir = tempfile::tempdir()?;
    let (cancel, worker) = spawn_worker(&env, work_dir.path(), judges);
    let evidence_of = |report: &AuditReport, id: &str| {
        report
            .evidence
            .iter()
            .find(|e| e.check_id == id)
            .map(|e| e.verdict)
    };

    // A blocking check fails: no model call, no evidence for the clause, one gap saying why.
    let failing = contract(vec![
        criterion("greets-loudly", "grep -q HELLO hello.py", 10),
        goal_clause(),
    ]);
    let report = audit_with_judge(&mut env, "run-defer", failing, &base, &candidate).await?;
    assert_eq!(
        evidence_of(&report, "greets-loudly"),
        Some(CheckVerdict::Fail)
    );
    assert_eq!(
        evidence_of(&report, "goal-1"),
        None,
        "{:?}",
        report.evidence
    );
    assert_eq!(report.verdicts.status, AuditStatus::Incomplete);
    assert!(
        report
            .gaps
            .iter()
            .any(|g| g.starts_with("judge not asked") && g.contains("'greets-loudly'")),
        "{:?}",
        report.gaps
    );
    assert_eq!(report.judgment, None);
    assert_eq!(report.usage.total(), 0);
    assert_eq!(standin.request_count(model), 0);

    // Every blocking check passes: the clause is judged (and passes on `met`).
    let passing = contract(vec![
        criterion("hello-exists", "test -f hello.py", 10),
        goal_clause(),
    ]);
    let report = audit_with_judge(&mut env, "run-judged", passing, &base, &candidate).await?;
    assert_eq!(evidence_of(&report, "goal-1"), Some(CheckVerdict::Pass));
    assert!(
        !report.gaps.iter().any(|g| g.starts_with("judge not asked")),
        "{:?}",
        report.gaps
    );
    assert!(standin.request_count(model) >= 1);

    cancel.cancel();
    worker.await?;
    Ok(())
}
