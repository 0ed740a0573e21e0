//! The pure records of an audit: the report's message id, a check run's evidence, the
//! backcheck lines, what an untrustworthy candidate yields, and which store errors mean the
//! snapshot cannot be trusted.

use loopgate_checks::{CheckRun, EXCERPT_CHARS};
use loopgate_common::output_cap::output_excerpt;
use loopgate_protocol::contract::Contract;
use loopgate_protocol::dispatch_id::StepKey;
use loopgate_protocol::verdict::{
    AuditStatus, CheckVerdict, ContractVerdict, Evidence, Integrity, Verdicts,
};
use loopgate_protocol::wire::AuditReport;
use loopgate_snapshot::SnapshotError;

use crate::prompt_text::verdict_word;

/// Does this store error mean the snapshot itself cannot be trusted (as opposed to the store
/// being unreachable)? A snapshot over the `[snapshot]` caps, or an object whose metadata
/// records more bytes than a reader takes, is: the audit reports it (integrity violated, the
/// reason in the evidence) and the request is settled, never redelivered.
pub(super) fn is_untrustworthy(err: &SnapshotError) -> bool {
    matches!(
        err,
        SnapshotError::Integrity { .. }
            | SnapshotError::ManifestNotFound { .. }
            | SnapshotError::BlobNotFound { .. }
            | SnapshotError::InvalidDigest(_)
            | SnapshotError::InvalidManifest(_)
            | SnapshotError::UnsafeDestination { .. }
            | SnapshotError::ObjectTooLarge { .. }
            | SnapshotError::TooManyEntries { .. }
            | SnapshotError::TreeTooLarge { .. }
    )
}

/// Count a snapshot an audit refused for the `[snapshot]` caps (the store logged it as a
/// security event) in `loopgate.security.refused_messages{kind="audit_request", reason}`.
pub(super) fn count_over_limit(err: &SnapshotError) {
    if let Some(reason) = err.over_limit_reason() {
        loopgate_telemetry::metrics::Metrics::new()
            .refused_messages
            .add(
                1,
                &[
                    opentelemetry::KeyValue::new("kind", "audit_request"),
                    opentelemetry::KeyValue::new("reason", reason),
                ],
            );
    }
}

/// `{run}:{generation}:{round}:audit-report:{purpose}:{attempt}`: the prefix of the report's id,
/// which the runtime seals with a nonce stored with the report (a republish keeps it; JetStream
/// drops the duplicate).
pub(crate) fn report_msg_id(report: &AuditReport) -> String {
    StepKey {
        run_id: &report.run_id,
        generation: report.generation,
        round: report.round,
    }
    .audit_report_msg_id(report.purpose, report.delivery_attempt)
}

/// Evidence for one check run, bound to the candidate snapshot; `isolated`: whether it ran
/// under the sandbox (see `Evidence::isolated`).
pub(super) fn evidence_from_run(
    check_id: &str,
    run: &CheckRun,
    candidate: &str,
    log_digest: Option<String>,
    produced_at: i64,
    isolated: bool,
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
        isolated: Some(isolated),
        screenshots: Vec::new(),
    }
}

/// One line per criterion: `<id>: pass|fail|inconclusive|not checked`.
pub(super) fn backcheck_lines(contract: &Contract, evidence: &[Evidence]) -> Vec<String> {
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
pub(super) fn integrity_failure(
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
            isolated: None,
            screenshots: Vec::new(),
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::audit::test_contracts::checked_contract;
    use loopgate_checks::CheckEnd;
    use loopgate_protocol::usage::Usage;
    use loopgate_protocol::wire::AuditPurpose;
    use std::time::Duration;

    #[test]
    fn msg_id_names_run_round_purpose_and_attempt() {
        let report = AuditReport {
            mechanical_only: false,
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
            added_paths: Vec::new(),
            judgment: None,
            usage: Usage::default(),
            duration_ms: 0,
            proposal: None,
            rubric: None,
            spec_hash: String::new(),
            completes_run: false,
            key_id: String::new(),
            signature: String::new(),
        };
        assert_eq!(report_msg_id(&report), "r1:2:3:audit-report:final:4");
    }

    #[test]
    fn evidence_and_backcheck() {
        let run = |end: CheckEnd| CheckRun {
            end,
            output: format!("{}END", "y".repeat(3000)).into_bytes(),
            duration: Duration::from_millis(12),
            screenshots: Vec::new(),
        };
        let evidence = vec![
            evidence_from_run(
                "a",
                &run(CheckEnd::Exited(Some(0))),
                "snap",
                Some("d".into()),
                5,
                true,
            ),
            evidence_from_run("b", &run(CheckEnd::TimedOut), "snap", None, 6, false),
        ];
        assert_eq!(evidence[0].isolated, Some(true));
        assert_eq!(evidence[1].isolated, Some(false));
        assert_eq!(evidence[0].verdict, CheckVerdict::Pass);
        assert_eq!(evidence[0].exit_code, Some(0));
        assert_eq!(evidence[0].artifact_version, "snap");
        assert_eq!(evidence[0].duration_ms, 12);
        assert!(evidence[0].output_excerpt.ends_with("END"));
        assert!(evidence[0].output_excerpt.chars().count() <= EXCERPT_CHARS + 1);
        assert_eq!(evidence[1].verdict, CheckVerdict::Inconclusive);
        assert_eq!(evidence[1].exit_code, None);
        assert_eq!(
            backcheck_lines(&checked_contract(), &evidence),
            vec!["a: pass", "b: inconclusive", "c: not checked"]
        );
    }

    #[test]
    fn integrity_failure_marks_everything_inconclusive() {
        let (verdicts, evidence, gaps) =
            integrity_failure(&checked_contract(), "snap", "at 'hello.py': bad", 9);
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
                SnapshotError::ObjectTooLarge {
                    object: "manifest/x".into(),
                    size: 1_000_000_000_000,
                    limit: 1,
                },
                true,
            ),
            (
                SnapshotError::TooManyEntries {
                    id: "x".into(),
                    limit: 1,
                    detail: "d".into(),
                },
                true,
            ),
            (
                SnapshotError::TreeTooLarge {
                    id: "x".into(),
                    limit: 1,
                },
                true,
            ),
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
}
