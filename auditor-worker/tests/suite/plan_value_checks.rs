//! A plan audit runs, with the proposal's own checks, the value checks the run will derive for
//! the goal clauses the proposal leaves uncovered, on the starting workspace: the manager reads
//! their evidence to refuse a proposal whose derived checks error out there.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use std::collections::BTreeMap;

use loopgate_protocol::contract::{Criterion, CriterionSource};
use loopgate_protocol::verdict::CheckVerdict;
use loopgate_protocol::wire::AuditPurpose;
use support::*;

const GOAL: &str = "Write people.csv from people.txt with a header name,age and one row per \
                    person, sorted by age.";

const PROPOSAL: &[u8] = b"[[acceptance]]\nid = \"rows\"\ncheck = \"test -f people.csv\"\n";

fn goal_criterion(id: &str, clause: &str) -> Criterion {
    Criterion {
        id: id.into(),
        description: String::new(),
        check: None,
        blocking: true,
        timeout_secs: 10,
        source: CriterionSource::Goal,
        clause: Some(clause.into()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_audit_runs_the_value_checks_the_run_will_derive() -> anyhow::Result<()> {
    let mut env = env().await?;
    let people: &[u8] = b"ada 19\nbob 7\n";
    let base = freeze(&env.store, &[("people.txt", people)]).await?;
    let candidate = freeze(
        &env.store,
        &[
            ("people.txt", people),
            ("spec.md", b"# Spec\n"),
            ("contract.toml", PROPOSAL),
        ],
    )
    .await?;
    let work_dir = tempfile::tempdir()?;
    let (cancel, worker) = spawn_worker(&env, work_dir.path(), BTreeMap::new());
    // The run's contract while it plans: the goal's derived criteria.
    let mut contract = contract(vec![goal_criterion("goal-1a", "Write people.csv")]);
    contract.goal = GOAL.into();
    let mut req = request("run-plan", contract, &base, &candidate);
    req.purpose = AuditPurpose::Plan;
    req.write_scope = vec!["contract.toml".into(), "spec.md".into()];
    publish_request(&env.bus, &req).await?;
    let report = next_report(&mut env.results).await?;
    let verdict = |id: &str| {
        report
            .evidence
            .iter()
            .find(|e| e.check_id == id)
            .map(|e| (e.verdict, e.exit_code))
    };
    // The proposal's check and the two value checks (header, order) ran, and each fails on the
    // starting workspace without erroring on its own (exit 1: no people.csv yet).
    assert_eq!(
        verdict("rows"),
        Some((CheckVerdict::Fail, Some(1))),
        "{report:#?}"
    );
    assert_eq!(
        verdict("goal-1b"),
        Some((CheckVerdict::Fail, Some(1))),
        "{report:#?}"
    );
    assert_eq!(
        verdict("goal-1d"),
        Some((CheckVerdict::Fail, Some(1))),
        "{report:#?}"
    );
    assert_eq!(report.evidence.len(), 3, "{report:#?}");
    cancel.cancel();
    worker.await?;
    Ok(())
}
