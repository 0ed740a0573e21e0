//! The rubric judge against a real nats-server and a stand-in judge model speaking the OpenAI
//! wire format: its scores become the `rubric` evidence the gate counts (pass only on a pass,
//! PIVOT fails whatever the scores), a prose reply gets one repair request, and no score at all
//! is inconclusive.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use anyhow::Context;
use loopgate_protocol::contract::Contract;
use loopgate_protocol::contract::RUBRIC_EVIDENCE_ID;
use loopgate_protocol::rubric::{
    Rubric, RubricDimension, RubricOutcome, RubricVerdict, ScoreLayer, Strategy,
};
use loopgate_protocol::verdict::{AuditStatus, CheckVerdict, Evidence, Integrity};
use loopgate_protocol::wire::AuditReport;
use loopgate_test_support::{last_message_content, Reply, Script, StandInModel};
use serde_json::Value;
use support::*;

const MODEL: &str = "standin-rubric";
const PROFILE: &str = "judge";
/// The judge's opinion (the first call of every audit with a judge): agrees with the checks.
const AGREES: &str = "Status: complete\nIntegrity: clean\nContract audit: aligned\n\
Acceptance-constraint backcheck:\nhello-exists: met - hello.py is there";

fn rubric() -> Rubric {
    Rubric {
        dimensions: vec![
            RubricDimension {
                name: "correctness".into(),
                weight: 2.0,
                description: "prints exactly hello".into(),
            },
            RubricDimension {
                name: "clarity".into(),
                weight: 1.0,
                description: "reads at a glance".into(),
            },
        ],
        threshold: 8.0,
    }
}

fn rubric_contract() -> Contract {
    let mut contract = contract(vec![criterion("hello-exists", "test -f hello.py", 10)]);
    contract.rubric = Some(rubric());
    contract.spec_hash = contract.compute_hash();
    contract
}

fn scores_json(correctness: u32, clarity: u32, strategy: &str) -> String {
    format!(
        "My scores:\n```json\n{{\"scores\": {{\"correctness\": {correctness}, \"clarity\": \
         {clarity}}}, \"overall\": 9, \"strategy\": \"{strategy}\", \
         \"reason\": \"judged-{strategy}\"}}\n```"
    )
}

/// Audit the hello candidate (plus a binary file) with the rubric contract, the stand-in
/// answering `rubric_replies` after the opinion call; returns the report and the stand-in.
async fn audit_with(
    run_id: &str,
    rubric_replies: Vec<Reply>,
) -> anyhow::Result<(AuditReport, StandInModel, Env)> {
    let mut env = env().await?;
    let candidate = freeze(
        &env.store,
        &[("hello.py", HELLO), ("logo.bin", b"\x89PNG\0\x01\x02")],
    )
    .await?;
    let base = env.store.freeze_empty().await?.id;
    let replies = std::iter::once(Reply::content(AGREES)).chain(rubric_replies);
    let standin = StandInModel::start(Script::new().replies(MODEL, replies)).await?;
    let work_dir = tempfile::tempdir()?;
    let (cancel, worker) = spawn_worker(
        &env,
        work_dir.path(),
        standin_judges(&standin, PROFILE, MODEL)?,
    );
    let mut req = request(run_id, rubric_contract(), &base, &candidate);
    req.auditor_profile = Some(PROFILE.into());
    publish_request(&env.bus, &req).await?;
    let report = next_report(&mut env.results).await?;
    cancel.cancel();
    worker.await?;
    assert_eq!(report.snapshot, candidate);
    Ok((report, standin, env))
}

fn rubric_evidence(report: &AuditReport) -> anyhow::Result<&Evidence> {
    let evidence = report
        .evidence
        .iter()
        .find(|e| e.check_id == RUBRIC_EVIDENCE_ID)
        .context("no rubric evidence")?;
    assert_eq!(evidence.artifact_version, report.snapshot);
    assert_eq!(evidence.exit_code, None);
    Ok(evidence)
}

fn rubric_verdict(report: &AuditReport) -> anyhow::Result<&RubricVerdict> {
    let verdict = report.rubric.as_ref().context("no rubric verdict")?;
    assert_eq!(verdict.threshold, 8.0);
    Ok(verdict)
}

fn messages(request: &Value) -> Vec<Value> {
    request["messages"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn high_scores_and_finish_pass_the_rubric() -> anyhow::Result<()> {
    let (report, standin, env) = audit_with(
        "run-rubric-pass",
        vec![Reply::with_usage(
            1000,
            50,
            Reply::content(scores_json(9, 9, "FINISH")),
        )],
    )
    .await?;

    // The checks and the opinion are untouched; the rubric adds its own evidence.
    assert_eq!(report.verdicts.status, AuditStatus::Complete);
    assert_eq!(report.evidence.len(), 2);
    let evidence = rubric_evidence(&report)?;
    assert_eq!(evidence.verdict, CheckVerdict::Pass);
    let log = env
        .evidence
        .get_bytes(evidence.log_digest.as_deref().context("log digest")?)
        .await?;
    assert!(String::from_utf8_lossy(&log).contains("judged-FINISH"));
    let verdict = rubric_verdict(&report)?;
    assert_eq!(verdict.outcome, Some(RubricOutcome::Pass));
    assert!(verdict.passed());
    assert_eq!(verdict.average(), Some(9.0));
    assert_eq!(verdict.strategy(), Some(Strategy::Finish));
    assert_eq!(verdict.reason, "judged-FINISH");
    assert_eq!(
        verdict.score.as_ref().map(|s| s.layer),
        Some(ScoreLayer::Json)
    );
    assert!(report.usage.input_tokens >= 1000, "{:?}", report.usage);
    assert!(
        !report.backcheck.iter().any(|l| l.starts_with("rubric")),
        "{:?}",
        report.backcheck
    );

    // A separate call after the opinion, holding the rubric and the changed text.
    let requests = standin.requests(MODEL);
    assert_eq!(requests.len(), 2);
    let opinion = last_message_content(&requests[0], "user").context("opinion prompt")?;
    assert!(!opinion.contains("rubric"), "{opinion}");
    let asked = messages(&requests[1]);
    assert_eq!(asked.len(), 2, "system + one user prompt");
    let prompt = last_message_content(&requests[1], "user").context("rubric prompt")?;
    for needle in [
        "Write hello.py that prints hello",
        "correctness (weight 2): prints exactly hello",
        "clarity (weight 1): reads at a glance",
        "weighted average of 8 or more",
        "### hello-exists: pass",
        "- hello.py (added)",
        "print('hello')",
        "logo.bin (binary)",
        "FINISH|REFINE|PIVOT",
    ] {
        assert!(prompt.contains(needle), "prompt lacks {needle}:\n{prompt}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pivot_fails_the_rubric_even_with_perfect_scores() -> anyhow::Result<()> {
    let (report, standin, _env) = audit_with(
        "run-rubric-pivot",
        vec![Reply::content(scores_json(10, 10, "PIVOT"))],
    )
    .await?;

    assert_eq!(rubric_evidence(&report)?.verdict, CheckVerdict::Fail);
    let verdict = rubric_verdict(&report)?;
    assert_eq!(verdict.outcome, Some(RubricOutcome::Pivot));
    assert_eq!(verdict.average(), Some(10.0));
    assert_eq!(verdict.strategy(), Some(Strategy::Pivot));
    assert!(!verdict.passed());
    assert!(
        report.gaps.contains(&verdict.summary()),
        "{:?}",
        report.gaps
    );
    // The mechanical verdicts stand: the rubric counts through its evidence only.
    assert_eq!(report.verdicts.status, AuditStatus::Complete);
    assert_eq!(standin.request_count(MODEL), 2);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prose_reply_gets_one_repair_request() -> anyhow::Result<()> {
    let (report, standin, _env) = audit_with(
        "run-rubric-repair",
        vec![
            Reply::content("A tidy little script; I like it."),
            Reply::content("Correctness: 9/10\nClarity: 7/10\nStrategy: REFINE"),
        ],
    )
    .await?;

    let verdict = rubric_verdict(&report)?;
    let score = verdict
        .score
        .as_ref()
        .context("no score after the repair")?;
    assert_eq!(score.layer, ScoreLayer::DimensionLines);
    assert_eq!(score.scores.len(), 2);
    // (2 * 9 + 7) / 3 = 8.33: a pass, whatever REFINE says.
    assert_eq!(verdict.outcome, Some(RubricOutcome::Pass));
    assert_eq!(rubric_evidence(&report)?.verdict, CheckVerdict::Pass);
    assert!(rubric_evidence(&report)?
        .output_excerpt
        .contains("dimension_lines"));

    let requests = standin.requests(MODEL);
    assert_eq!(requests.len(), 3);
    let repair = messages(&requests[2]);
    assert_eq!(
        repair.len(),
        4,
        "system, prompt, prose reply, repair request"
    );
    assert_eq!(repair[2]["role"], "assistant");
    let asked = last_message_content(&requests[2], "user").context("repair prompt")?;
    assert!(asked.contains("\"correctness\": <0-10>"), "{asked}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_score_at_all_is_inconclusive() -> anyhow::Result<()> {
    let (report, standin, mut env) = audit_with(
        "run-rubric-none",
        vec![
            Reply::content("Looks good."),
            Reply::content("Really, it looks good."),
        ],
    )
    .await?;

    let verdict = rubric_verdict(&report)?;
    assert!(verdict.score.is_none() && verdict.outcome.is_none());
    assert!(!verdict.reason.is_empty());
    let evidence = rubric_evidence(&report)?;
    assert_eq!(evidence.verdict, CheckVerdict::Inconclusive);
    assert!(evidence.log_digest.is_some(), "the replies are kept");
    assert!(
        report.gaps.contains(&verdict.summary()),
        "{:?}",
        report.gaps
    );
    assert_eq!(standin.request_count(MODEL), 3, "one repair request only");

    // Without an auditor model nothing is asked and the rubric is not scored either.
    let candidate = freeze(&env.store, &[("hello.py", HELLO)]).await?;
    let base = env.store.freeze_empty().await?.id;
    let work_dir = tempfile::tempdir()?;
    let (cancel, worker) = spawn_worker(
        &env,
        work_dir.path(),
        standin_judges(&standin, PROFILE, MODEL)?,
    );
    let req = request("run-rubric-nojudge", rubric_contract(), &base, &candidate);
    publish_request(&env.bus, &req).await?;
    let report = next_report(&mut env.results).await?;
    cancel.cancel();
    worker.await?;
    assert_eq!(report.run_id, "run-rubric-nojudge");
    assert_eq!(
        rubric_evidence(&report)?.verdict,
        CheckVerdict::Inconclusive
    );
    assert!(rubric_verdict(&report)?.score.is_none());
    assert_eq!(standin.request_count(MODEL), 3);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrustworthy_candidate_is_not_scored() -> anyhow::Result<()> {
    let mut env = env().await?;
    let (base, candidate) = freeze_hello(&env.store).await?;
    tamper_hello_blob(&env.bus).await?;
    let standin = StandInModel::start(Script::new()).await?;
    let work_dir = tempfile::tempdir()?;
    let (cancel, worker) = spawn_worker(
        &env,
        work_dir.path(),
        standin_judges(&standin, PROFILE, MODEL)?,
    );
    let mut req = request("run-rubric-corrupt", rubric_contract(), &base, &candidate);
    req.auditor_profile = Some(PROFILE.into());
    publish_request(&env.bus, &req).await?;
    let report = next_report(&mut env.results).await?;
    cancel.cancel();
    worker.await?;

    assert_eq!(report.verdicts.integrity, Integrity::Violation);
    assert_eq!(
        rubric_evidence(&report)?.verdict,
        CheckVerdict::Inconclusive
    );
    assert!(rubric_verdict(&report)?.score.is_none());
    assert_eq!(standin.request_count(MODEL), 0);
    Ok(())
}

/// A sibling's checks-only audit (`mechanical_only`, issue 40): the checks run, no model is
/// asked (no clause judge, no opinion, no rubric), the flag is in the report, and it never
/// completes a run whatever the request says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checks_only_audit_asks_no_model() -> anyhow::Result<()> {
    let mut env = env().await?;
    let candidate = freeze(&env.store, &[("hello.py", HELLO)]).await?;
    let base = env.store.freeze_empty().await?.id;
    let standin = StandInModel::start(Script::new()).await?;
    let work_dir = tempfile::tempdir()?;
    let (cancel, worker) = spawn_worker(
        &env,
        work_dir.path(),
        standin_judges(&standin, PROFILE, MODEL)?,
    );
    let mut req = request("run-checks-only", rubric_contract(), &base, &candidate);
    req.auditor_profile = Some(PROFILE.into());
    req.mechanical_only = true;
    req.completes_run = true;
    publish_request(&env.bus, &req).await?;
    let report = next_report(&mut env.results).await?;
    cancel.cancel();
    worker.await?;
    assert!(report.mechanical_only);
    assert!(!report.completes_run);
    assert!(report.rubric.is_none() && report.judgment.is_none());
    let ids: Vec<&str> = report
        .evidence
        .iter()
        .map(|e| e.check_id.as_str())
        .collect();
    assert_eq!(ids, ["hello-exists"]);
    assert_eq!(report.evidence[0].verdict, CheckVerdict::Pass);
    assert_eq!(standin.request_count(MODEL), 0);
    assert_eq!(report.usage.input_tokens + report.usage.output_tokens, 0);
    Ok(())
}
