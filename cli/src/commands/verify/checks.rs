//! What `loopgate verify` checks in a certificate, pure: the format and state, the contract's
//! hash, the report bound to this run, snapshot and contract, its signature by a trusted key,
//! that the signed report is the run's completing audit, its verdicts, passing evidence for
//! every criterion the gate requires, and the manifest against the snapshot id. The blobs are
//! re-hashed by the caller (online: downloaded; offline: read from the checked-out tree).
//!
//! The certificate's `state` is not signed (managers hold no key), so "completed" is derived
//! from signed material only: a report whose claims say a pass completes the run (a final
//! audit, or a round audit signed with `completes_run`) and that passes the gate. A passing
//! round report of a run that went on, or was cancelled, proves nothing, whatever `state`
//! says.

use loopgate_api::{Certificate, CERTIFICATE_FORMAT};
use loopgate_common::state::RunState;
use loopgate_protocol::report::signing::{SignatureError, TrustedKeys};
use serde::Serialize;

use crate::commands::checkout::verify_manifest;

/// Why an unsigned completing report proves nothing, and how to get a run that verifies.
pub const UNSIGNED_HOW_TO: &str = "the completing report is not signed: the auditor that \
    audited this run has no signing key, so nothing proves the report is the auditor's. To get \
    a signed run, give the auditor pool a key (`loopgate keygen auditor.key`; `[auditor] \
    signing_key_file` or `signing_key_env`), trust its public key in the manager (`[manager] \
    auditor_keys`) and here (`--key auditor.key.pub`), then run the task again (`loopgate \
    submit`); `loopgate up` signs every report (its key: DIR/auditor-keys.pub)";

/// One thing that does not hold. `check` is a stable name (`--json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub check: &'static str,
    pub detail: String,
}

impl Problem {
    pub fn new(check: &'static str, detail: impl Into<String>) -> Problem {
        Problem {
            check,
            detail: detail.into(),
        }
    }
}

/// A criterion the gate requires, and whether the signed report has `pass` evidence for it
/// on the certified snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CriterionCheck {
    pub id: String,
    pub passed: bool,
}

/// What the certificate itself shows (before the blobs are re-hashed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateFindings {
    pub problems: Vec<Problem>,
    pub criteria: Vec<CriterionCheck>,
    /// The trusted key that signed the report, when the signature verified.
    pub signed_by: Option<String>,
}

/// Check everything `cert` claims against itself and against `trusted`.
pub fn check_certificate(cert: &Certificate, trusted: &TrustedKeys) -> CertificateFindings {
    let mut problems = Vec::new();
    if cert.format != CERTIFICATE_FORMAT {
        problems.push(Problem::new(
            "format",
            format!(
                "certificate format {:?}; this build reads {CERTIFICATE_FORMAT}",
                cert.format
            ),
        ));
    }
    if cert.state != RunState::Completed {
        problems.push(Problem::new(
            "not_completed",
            format!(
                "run {} is {}, not completed",
                cert.run_id,
                cert.state.as_str()
            ),
        ));
    }
    let contract = &cert.contract;
    if !contract.is_intact() {
        problems.push(Problem::new(
            "contract",
            format!(
                "the contract hashes to {}, not to its spec hash {}: it was edited",
                contract.compute_hash(),
                contract.spec_hash
            ),
        ));
    }
    let report = &cert.report;
    let bindings = [
        ("run", &report.run_id, &cert.run_id),
        ("snapshot", &report.snapshot, &cert.snapshot),
        ("spec hash", &report.spec_hash, &contract.spec_hash),
    ];
    for (what, signed, certified) in bindings {
        if signed != certified {
            problems.push(Problem::new(
                "binding",
                format!("the signed report names {what} {signed}, the certificate {certified}"),
            ));
        }
    }
    if !report.is_completing() {
        problems.push(Problem::new(
            "purpose",
            format!(
                "the signed report is a {} audit of round {} that does not complete the run \
                 (only a passing final audit, or a round audit signed as completing it, does; \
                 reports signed before `completes_run` existed never do): it proves no \
                 completion",
                report.purpose.as_str(),
                report.round
            ),
        ));
    }
    let signed_by = match trusted.verify_claims(report, &cert.signature) {
        Ok(key) => Some(key.key_id().to_string()),
        Err(SignatureError::Unsigned) => {
            problems.push(Problem::new("signature", UNSIGNED_HOW_TO));
            None
        }
        Err(e) => {
            problems.push(Problem::new("signature", e.to_string()));
            None
        }
    };
    if !report.verdicts.all_pass() {
        problems.push(Problem::new(
            "verdicts",
            format!(
                "the signed verdicts are {:?}/{:?}/{:?}, not complete/clean/aligned",
                report.verdicts.status, report.verdicts.integrity, report.verdicts.contract
            )
            .to_lowercase(),
        ));
    }
    let criteria: Vec<CriterionCheck> = contract
        .required_evidence()
        .map(|id| CriterionCheck {
            id: id.to_string(),
            passed: report.passes_on_snapshot(id),
        })
        .collect();
    for c in criteria.iter().filter(|c| !c.passed) {
        problems.push(Problem::new(
            "evidence",
            format!(
                "blocking criterion '{}' has no pass evidence on snapshot {} in the signed report",
                c.id, report.snapshot
            ),
        ));
    }
    if criteria.is_empty() {
        problems.push(Problem::new(
            "evidence",
            "the contract has no blocking criterion: nothing was proven",
        ));
    }
    if let Err(e) = verify_manifest(&cert.snapshot, &cert.manifest) {
        problems.push(Problem::new("manifest", e.to_string()));
    }
    CertificateFindings {
        problems,
        criteria,
        signed_by,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use loopgate_api::TrustedKey;
    use loopgate_protocol::contract::Contract;
    use loopgate_protocol::contract::Criterion;
    use loopgate_protocol::report::claims::ReportClaims;
    use loopgate_protocol::report::signing::ReportSigningKey;
    use loopgate_protocol::snapshot::{sha256_hex, Manifest, ManifestEntry};
    use loopgate_protocol::usage::Usage;
    use loopgate_protocol::verdict::{
        AuditStatus, CheckVerdict, ContractVerdict, Evidence, Integrity, Verdicts,
    };
    use loopgate_protocol::wire::{AuditPurpose, AuditReport};

    pub(crate) const FILE: &[u8] = b"print('hello, loopgate')\n";

    pub(crate) fn pool_key() -> ReportSigningKey {
        ReportSigningKey::from_seed(&[5u8; 32])
    }

    /// A valid certificate for one file `hello.py` and one blocking criterion, signed by
    /// `pool_key()`.
    pub(crate) fn certificate() -> Certificate {
        let manifest = Manifest::new(vec![ManifestEntry {
            path: "hello.py".into(),
            mode: 0o644,
            size: FILE.len() as u64,
            sha256: sha256_hex(FILE),
        }])
        .unwrap();
        let snapshot = manifest.id();
        let mut contract = Contract {
            goal: "g".into(),
            criteria: vec![Criterion {
                id: "prints".into(),
                description: String::new(),
                check: Some("true".into()),
                blocking: true,
                timeout_secs: 5,
                source: Default::default(),
                clause: None,
            }],
            protected_paths: Vec::new(),
            rubric: None,
            writable_paths: Vec::new(),
            spec_hash: String::new(),
        };
        contract.spec_hash = contract.compute_hash();
        let mut report = AuditReport {
            mechanical_only: false,
            run_id: "r1".into(),
            generation: 1,
            round: 1,
            purpose: AuditPurpose::Final,
            delivery_attempt: 1,
            worker: "a".into(),
            snapshot: snapshot.clone(),
            verdicts: Verdicts {
                status: AuditStatus::Complete,
                integrity: Integrity::Clean,
                contract: ContractVerdict::Aligned,
            },
            evidence: vec![Evidence {
                artifact_version: snapshot.clone(),
                check_id: "prints".into(),
                verdict: CheckVerdict::Pass,
                produced_at: 1,
                log_digest: None,
                exit_code: Some(0),
                duration_ms: 1,
                output_excerpt: String::new(),
                isolated: Some(true),
                screenshots: Vec::new(),
            }],
            gaps: Vec::new(),
            backcheck: Vec::new(),
            changed_paths: Vec::new(),
            added_paths: Vec::new(),
            judgment: None,
            usage: Usage::default(),
            duration_ms: 1,
            proposal: None,
            rubric: None,
            spec_hash: contract.spec_hash.clone(),
            completes_run: false,
            key_id: String::new(),
            signature: String::new(),
        };
        let key = pool_key();
        key.sign(&mut report);
        Certificate {
            format: CERTIFICATE_FORMAT.into(),
            run_id: "r1".into(),
            state: RunState::Completed,
            snapshot,
            contract,
            report: ReportClaims::of(&report),
            signature: report.signature.clone(),
            manifest,
            trusted_keys: vec![TrustedKey {
                key_id: key.key_id().into(),
                public_key: key.public_key().to_hex(),
            }],
        }
    }

    fn trusted() -> TrustedKeys {
        TrustedKeys::new([pool_key().public_key().clone()])
    }

    #[test]
    fn a_valid_certificate_holds() {
        let found = check_certificate(&certificate(), &trusted());
        assert_eq!(found.problems, vec![]);
        assert_eq!(found.signed_by.as_deref(), Some(pool_key().key_id()));
        assert_eq!(
            found.criteria,
            vec![CriterionCheck {
                id: "prints".into(),
                passed: true
            }]
        );
    }

    /// `certificate()` with its report changed by `change` and signed again by the pool.
    pub(crate) fn resigned(change: impl Fn(&mut ReportClaims)) -> Certificate {
        let mut cert = certificate();
        change(&mut cert.report);
        let signature = pool_key().sign_claims(&cert.report);
        cert.signature = signature;
        cert
    }

    /// A round report signed as completing the run (a `complete_on_gate` task) holds; the same
    /// round report without the mark, honestly signed by the pool, proves nothing.
    #[test]
    fn only_a_completing_report_proves_completion() {
        for (completes_run, want) in [(true, vec![]), (false, vec!["purpose"])] {
            let cert = resigned(|r| {
                r.purpose = AuditPurpose::Round;
                r.completes_run = completes_run;
            });
            let found = check_certificate(&cert, &trusted());
            let checks: Vec<&str> = found.problems.iter().map(|p| p.check).collect();
            assert_eq!(checks, want, "completes_run {completes_run}");
        }
    }

    #[test]
    fn each_broken_claim_is_named() {
        type Breakage = (&'static str, fn(&mut Certificate));
        let cases: Vec<Breakage> = vec![
            ("not_completed", |c| c.state = RunState::Running),
            ("format", |c| c.format = "loopgate.certificate.v0".into()),
            ("contract", |c| c.contract.goal.push('!')),
            // Another criterion in the contract (hash recomputed): no evidence, no binding.
            ("evidence", |c| {
                c.contract.criteria[0].id = "other".into();
                c.contract.spec_hash = c.contract.compute_hash();
            }),
            ("binding", |c| c.run_id = "r2".into()),
            ("signature", |c| c.report.round += 1),
            ("signature", |c| {
                c.report.verdicts.status = AuditStatus::Incomplete
            }),
            ("signature", |c| c.signature = String::new()),
            // A round audit made to look completing, or a plan audit: the claims are signed.
            ("signature", |c| c.report.completes_run = true),
            ("purpose", |c| c.report.purpose = AuditPurpose::Round),
            ("purpose", |c| c.report.purpose = AuditPurpose::Plan),
            ("manifest", |c| c.manifest.entries[0].size += 1),
        ];
        for (want, breakage) in cases {
            let mut cert = certificate();
            breakage(&mut cert);
            let found = check_certificate(&cert, &trusted());
            let checks: Vec<&str> = found.problems.iter().map(|p| p.check).collect();
            assert!(checks.contains(&want), "{want}: {:?}", found.problems);
        }
        // Not signed at all: the problem says how to get a signed run.
        let mut unsigned = certificate();
        unsigned.signature = String::new();
        unsigned.report.key_id = String::new();
        let found = check_certificate(&unsigned, &trusted());
        let signature = found.problems.iter().find(|p| p.check == "signature");
        assert!(
            signature.is_some_and(|p| p.detail.contains("To get a signed run")
                && p.detail.contains("loopgate keygen")),
            "{:?}",
            found.problems
        );
        // Signed correctly, but by a key nobody pinned.
        let stranger =
            TrustedKeys::new([ReportSigningKey::from_seed(&[6u8; 32]).public_key().clone()]);
        let found = check_certificate(&certificate(), &stranger);
        assert_eq!(found.problems.len(), 1, "{:?}", found.problems);
        assert_eq!(found.problems[0].check, "signature");
        assert!(found.problems[0]
            .detail
            .contains("not among the trusted keys"));
    }
}
