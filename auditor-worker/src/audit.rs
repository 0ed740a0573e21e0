//! One audit of a frozen candidate: materialize it into a fresh scratch directory (every blob
//! re-hashed), diff it against the base, run every contract check, derive the verdicts
//! mechanically, optionally ask the judge model (which may only tighten them) and build the
//! report. I/O stays in `Auditor::audit`; the decisions are the pure functions below and
//! `loopgate_common::verdict`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use loopgate_common::contract::Contract;
use loopgate_common::snapshot::{diff_manifests, PathChange};
use loopgate_common::usage::Usage;
use loopgate_common::verdict::{
    mechanical_verdicts, merge_opinion, AuditStatus, CheckVerdict, ContractVerdict, Evidence,
    Integrity, Verdicts,
};
use loopgate_common::wire::{AuditPurpose, AuditReport, AuditRequest};
use loopgate_models::ChatClient;
use loopgate_transport::{SnapshotError, SnapshotStore};

use crate::checks::{run_check, CheckRun, CheckSpec};
use crate::judge::judge;
use crate::judge_prompt::{verdict_word, JudgeInput};
use crate::output_cap::{output_excerpt, EXCERPT_CHARS};

/// Errors that leave no report: the request should be retried (nak) on this or another worker.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("snapshot store unavailable: {0}")]
    Store(#[from] SnapshotError),
    #[error("scratch directory under {path:?}: {source}")]
    Scratch {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What the auditor needs to run audits. Cheap to share behind an `Arc`.
pub struct Auditor {
    pub store: SnapshotStore,
    /// Each audit materializes into a fresh directory under this one.
    pub work_dir: PathBuf,
    pub worker_id: String,
    /// `PATH` for acceptance checks.
    pub check_path: String,
    /// Judge clients by model profile name.
    pub judges: BTreeMap<String, ChatClient>,
}

pub fn unix_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Does this store error mean the snapshot itself cannot be trusted (as opposed to the store
/// being unreachable)?
pub fn is_untrustworthy(err: &SnapshotError) -> bool {
    matches!(
        err,
        SnapshotError::Integrity { .. }
            | SnapshotError::ManifestNotFound { .. }
            | SnapshotError::BlobNotFound { .. }
            | SnapshotError::InvalidDigest(_)
            | SnapshotError::InvalidManifest(_)
            | SnapshotError::UnsafeDestination { .. }
    )
}

pub fn purpose_word(purpose: AuditPurpose) -> &'static str {
    match purpose {
        AuditPurpose::Round => "round",
        AuditPurpose::Final => "final",
    }
}

/// `{run}:{generation}:{round}:audit-report:{round|final}:{attempt}`
pub fn report_msg_id(report: &AuditReport) -> String {
    format!(
        "{}:{}:{}:audit-report:{}:{}",
        report.run_id,
        report.generation,
        report.round,
        purpose_word(report.purpose),
        report.delivery_attempt
    )
}

/// Evidence for one check run, bound to the candidate snapshot.
pub fn evidence_from_run(
    check_id: &str,
    run: &CheckRun,
    candidate: &str,
    log_digest: Option<String>,
    produced_at: i64,
) -> Evidence {
    Evidence {
        artifact_version: candidate.to_string(),
        check_id: check_id.to_string(),
        verdict: run.verdict(),
        produced_at,
        log_digest,
        exit_code: run.exit_code(),
        duration_ms: u64::try_from(run.duration.as_millis()).unwrap_or(u64::MAX),
        output_excerpt: output_excerpt(&run.output, EXCERPT_CHARS),
    }
}

/// One line per criterion: `<id>: pass|fail|inconclusive|not checked`.
pub fn backcheck_lines(contract: &Contract, evidence: &[Evidence]) -> Vec<String> {
    contract
        .criteria
        .iter()
        .map(|c| {
            let word = evidence
                .iter()
                .find(|e| e.check_id == c.id)
                .map(|e| verdict_word(e.verdict))
                .unwrap_or("not checked");
            format!("{}: {word}", c.id)
        })
        .collect()
}

/// The candidate failed verification: nothing was run, nothing is accepted.
pub fn integrity_failure(
    contract: &Contract,
    candidate: &str,
    reason: &str,
    produced_at: i64,
) -> (Verdicts, Vec<Evidence>, Vec<String>) {
    let evidence = contract
        .criteria
        .iter()
        .map(|c| Evidence {
            artifact_version: candidate.to_string(),
            check_id: c.id.clone(),
            verdict: CheckVerdict::Inconclusive,
            produced_at,
            log_digest: None,
            exit_code: None,
            duration_ms: 0,
            output_excerpt: "not run: the candidate snapshot failed verification".to_string(),
        })
        .collect();
    let verdicts = Verdicts {
        status: AuditStatus::Incomplete,
        integrity: Integrity::Violation,
        contract: ContractVerdict::Unknown,
    };
    (
        verdicts,
        evidence,
        vec![format!("candidate snapshot failed verification: {reason}")],
    )
}

/// A gap line describing how the judge tightened the mechanical verdicts, if it did.
pub fn tightening_gap(mechanical: Verdicts, merged: Verdicts) -> Option<String> {
    (mechanical != merged).then(|| {
        format!(
            "auditor model tightened the verdicts to status={}, integrity={}, contract={}",
            wire_word(&merged.status),
            wire_word(&merged.integrity),
            wire_word(&merged.contract)
        )
    })
}

/// The snake_case wire name of a verdict enum value.
fn wire_word<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(word)) => word,
        _ => "?".to_string(),
    }
}

/// Pieces of a report, assembled by `Auditor::audit`.
struct Findings {
    verdicts: Verdicts,
    evidence: Vec<Evidence>,
    gaps: Vec<String>,
    changes: Vec<PathChange>,
    judgment: Option<String>,
    usage: Usage,
}

impl Auditor {
    /// Audit one request. `Err` only when the store or the local disk failed (retry later); an
    /// untrustworthy candidate is a report with an integrity violation, never an error.
    pub async fn audit(&self, req: &AuditRequest, attempt: u64) -> Result<AuditReport, AuditError> {
        let started = Instant::now();
        let scratch_err = |source| AuditError::Scratch {
            path: self.work_dir.clone(),
            source,
        };
        tokio::fs::create_dir_all(&self.work_dir)
            .await
            .map_err(scratch_err)?;
        let scratch = tempfile::Builder::new()
            .prefix("audit-")
            .tempdir_in(&self.work_dir)
            .map_err(scratch_err)?;
        let findings = self.findings(req, scratch.path()).await;
        let path = scratch.path().to_path_buf();
        // Removing a large tree blocks; keep it off the async threads.
        match tokio::task::spawn_blocking(move || scratch.close()).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => {
                tracing::warn!(path = %path.display(), error = %err, "removing scratch dir")
            }
            Err(err) => {
                tracing::warn!(path = %path.display(), error = %err, "removing scratch dir")
            }
        }
        let findings = findings?;
        Ok(AuditReport {
            run_id: req.run_id.clone(),
            generation: req.generation,
            round: req.round,
            purpose: req.purpose,
            delivery_attempt: attempt,
            worker: self.worker_id.clone(),
            snapshot: req.candidate_snapshot.clone(),
            verdicts: findings.verdicts,
            backcheck: backcheck_lines(&req.contract, &findings.evidence),
            evidence: findings.evidence,
            gaps: findings.gaps,
            changed_paths: findings
                .changes
                .iter()
                .map(|c| c.path().to_string())
                .collect(),
            judgment: findings.judgment,
            usage: findings.usage,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        })
    }

    async fn findings(
        &self,
        req: &AuditRequest,
        scratch: &std::path::Path,
    ) -> Result<Findings, AuditError> {
        let workspace = scratch.join("snapshot");
        let home = scratch.join("home");
        tokio::fs::create_dir_all(&home)
            .await
            .map_err(|source| AuditError::Scratch {
                path: home.clone(),
                source,
            })?;
        let candidate = match self
            .store
            .materialize(&req.candidate_snapshot, &workspace)
            .await
        {
            Ok(manifest) => manifest,
            Err(err) if is_untrustworthy(&err) => {
                tracing::warn!(run_id = %req.run_id, snapshot = %req.candidate_snapshot, error = %err,
                    "candidate snapshot failed verification");
                let (verdicts, evidence, gaps) = integrity_failure(
                    &req.contract,
                    &req.candidate_snapshot,
                    &err.to_string(),
                    unix_millis(),
                );
                return Ok(Findings {
                    verdicts,
                    evidence,
                    gaps,
                    changes: Vec::new(),
                    judgment: None,
                    usage: Usage::default(),
                });
            }
            Err(err) => return Err(err.into()),
        };
        let mut extra_gaps = Vec::new();
        let mut base_unverified = false;
        let changes = match self.store.manifest(&req.base_snapshot).await {
            Ok(base) => diff_manifests(&base, &candidate),
            Err(err) if is_untrustworthy(&err) => {
                base_unverified = true;
                extra_gaps.push(format!(
                    "base snapshot unusable, changes not verified: {err}"
                ));
                Vec::new()
            }
            Err(err) => return Err(err.into()),
        };

        let mut evidence = Vec::new();
        for criterion in &req.contract.criteria {
            let Some(command) = &criterion.check else {
                continue;
            };
            let run = run_check(&CheckSpec {
                command,
                cwd: &workspace,
                home: &home,
                path_var: &self.check_path,
                timeout: Duration::from_secs(criterion.timeout_secs.max(1)),
            })
            .await;
            tracing::info!(run_id = %req.run_id, check = %criterion.id, verdict = ?run.verdict(),
                end = ?run.end, duration_ms = run.duration.as_millis() as u64, "check finished");
            let log_digest = match self.store.put_bytes(&run.output).await {
                Ok(digest) => Some(digest),
                Err(err) => {
                    tracing::warn!(check = %criterion.id, error = %err, "storing check output");
                    extra_gaps.push(format!(
                        "output of check '{}' could not be stored",
                        criterion.id
                    ));
                    None
                }
            };
            evidence.push(evidence_from_run(
                &criterion.id,
                &run,
                &req.candidate_snapshot,
                log_digest,
                unix_millis(),
            ));
        }

        let (mut verdicts, mut gaps) =
            mechanical_verdicts(&req.contract, &evidence, &changes, &req.write_scope);
        gaps.append(&mut extra_gaps);
        if base_unverified {
            verdicts.integrity = verdicts.integrity.max(Integrity::Suspect);
        }
        if !req.contract.is_intact() {
            verdicts.contract = ContractVerdict::Invalid;
            gaps.push("contract spec hash does not match its content".to_string());
        }

        let mut judgment = None;
        let mut usage = Usage::default();
        if let Some(name) = &req.auditor_profile {
            match self.judges.get(name) {
                None => gaps.push(format!(
                    "auditor model '{name}' not configured here; mechanical audit only"
                )),
                Some(client) => {
                    let changed: Vec<String> =
                        changes.iter().map(|c| c.path().to_string()).collect();
                    let input = JudgeInput {
                        contract: &req.contract,
                        objective: &req.objective,
                        changed_paths: &changed,
                        evidence: &evidence,
                    };
                    let outcome =
                        judge(client, &input, Duration::from_secs(req.episode_secs.max(1))).await;
                    usage.add(outcome.usage);
                    gaps.extend(outcome.gaps);
                    judgment = outcome.judgment;
                    if let Some(opinion) = outcome.opinion {
                        let merged = merge_opinion(verdicts, opinion.verdicts);
                        gaps.extend(tightening_gap(verdicts, merged));
                        verdicts = merged;
                    }
                }
            }
        }
        Ok(Findings {
            verdicts,
            evidence,
            gaps,
            changes,
            judgment,
            usage,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::checks::CheckEnd;
    use loopgate_common::task::Criterion;

    fn contract() -> Contract {
        let criterion = |id: &str, check: Option<&str>| Criterion {
            id: id.into(),
            description: String::new(),
            check: check.map(str::to_string),
            blocking: true,
            timeout_secs: 5,
        };
        let mut c = Contract {
            goal: "g".into(),
            criteria: vec![
                criterion("a", Some("true")),
                criterion("b", Some("false")),
                criterion("c", None),
            ],
            protected_paths: vec![],
            spec_hash: String::new(),
        };
        c.spec_hash = c.compute_hash();
        c
    }

    #[test]
    fn msg_id_names_run_round_purpose_and_attempt() {
        let report = AuditReport {
            run_id: "r1".into(),
            generation: 2,
            round: 3,
            purpose: AuditPurpose::Final,
            delivery_attempt: 4,
            worker: "w".into(),
            snapshot: "s".into(),
            verdicts: Verdicts {
                status: AuditStatus::Complete,
                integrity: Integrity::Clean,
                contract: ContractVerdict::Aligned,
            },
            evidence: vec![],
            gaps: vec![],
            backcheck: vec![],
            changed_paths: vec![],
            judgment: None,
            usage: Usage::default(),
            duration_ms: 0,
        };
        assert_eq!(report_msg_id(&report), "r1:2:3:audit-report:final:4");
    }

    #[test]
    fn evidence_and_backcheck() {
        let run = |end: CheckEnd| CheckRun {
            end,
            output: format!("{}END", "y".repeat(3000)).into_bytes(),
            duration: Duration::from_millis(12),
        };
        let evidence = vec![
            evidence_from_run(
                "a",
                &run(CheckEnd::Exited(Some(0))),
                "snap",
                Some("d".into()),
                5,
            ),
            evidence_from_run("b", &run(CheckEnd::TimedOut), "snap", None, 6),
        ];
        assert_eq!(evidence[0].verdict, CheckVerdict::Pass);
        assert_eq!(evidence[0].exit_code, Some(0));
        assert_eq!(evidence[0].artifact_version, "snap");
        assert_eq!(evidence[0].duration_ms, 12);
        assert!(evidence[0].output_excerpt.ends_with("END"));
        assert!(evidence[0].output_excerpt.chars().count() <= EXCERPT_CHARS + 1);
        assert_eq!(evidence[1].verdict, CheckVerdict::Inconclusive);
        assert_eq!(evidence[1].exit_code, None);
        assert_eq!(
            backcheck_lines(&contract(), &evidence),
            vec!["a: pass", "b: inconclusive", "c: not checked"]
        );
    }

    #[test]
    fn integrity_failure_marks_everything_inconclusive() {
        let (verdicts, evidence, gaps) =
            integrity_failure(&contract(), "snap", "at 'hello.py': bad", 9);
        assert_eq!(verdicts.integrity, Integrity::Violation);
        assert_eq!(verdicts.status, AuditStatus::Incomplete);
        assert_eq!(verdicts.contract, ContractVerdict::Unknown);
        assert_eq!(evidence.len(), 3);
        assert!(evidence
            .iter()
            .all(|e| e.verdict == CheckVerdict::Inconclusive && e.artifact_version == "snap"));
        assert!(gaps[0].contains("hello.py"));
    }

    #[test]
    fn untrustworthy_errors_table() {
        let cases = [
            (
                SnapshotError::Integrity {
                    path: "a".into(),
                    reason: "r".into(),
                },
                true,
            ),
            (SnapshotError::ManifestNotFound { id: "x".into() }, true),
            (SnapshotError::InvalidDigest("x".into()), true),
            (
                SnapshotError::Store {
                    op: "get",
                    reason: "down".into(),
                },
                false,
            ),
            (
                SnapshotError::Timeout {
                    op: "get",
                    after: Duration::from_secs(1),
                },
                false,
            ),
        ];
        for (err, want) in cases {
            assert_eq!(is_untrustworthy(&err), want, "{err:?}");
        }
    }

    #[test]
    fn tightening_gap_only_when_changed() {
        let good = Verdicts {
            status: AuditStatus::Complete,
            integrity: Integrity::Clean,
            contract: ContractVerdict::Aligned,
        };
        assert_eq!(tightening_gap(good, good), None);
        let worse = merge_opinion(
            good,
            Verdicts {
                status: AuditStatus::Incomplete,
                ..good
            },
        );
        assert!(tightening_gap(good, worse)
            .unwrap()
            .contains("status=incomplete"));
    }
}
