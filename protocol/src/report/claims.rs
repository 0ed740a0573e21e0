//! The canonical form of an audit report: exactly what an auditor signs, and what a completion
//! certificate carries. Defined once, here.
//!
//! The claims are the report's run, generation, round, purpose, whether a pass completes the
//! run (`completes_run`), audited snapshot, spec hash, verdicts and every evidence record (with
//! its log digest and its screenshots' digests), plus the id of the signing key.
//! Their canonical bytes are the compact JSON of [`ReportClaims`] with every object's keys in
//! lexicographic order and integers only, which is the RFC 8785 (JCS) form of that object:
//! another implementation can rebuild the bytes from the JSON alone. The `format` field
//! versions them (`loopgate.audit_report.v1`); a change to the claims is a new format.
//!
//! Not signed (advice for people and the manager's prompt, never what the gate counts): gaps,
//! backcheck lines, changed paths, the judge's opinion, usage, durations, the rubric's scores
//! (the rubric's pass or fail is signed as its own evidence record).

use serde::{Deserialize, Serialize};

use crate::verdict::{
    AuditStatus, CheckVerdict, ContractVerdict, Evidence, EvidenceScreenshot, Integrity, Verdicts,
};
use crate::wire::{AuditPurpose, AuditReport};

/// The version of the canonical form, inside the signed bytes.
pub const REPORT_CLAIMS_FORMAT: &str = "loopgate.audit_report.v1";

/// What an audit report claims, in canonical field order (keys sorted, see the module doc).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReportClaims {
    /// A pass of this audit completes the run (the request said so: a round audit of a task
    /// with `complete_on_gate`; final audits always do). Absent when false, so the signed
    /// form of every report without it, older ones included, stays byte-identical.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub completes_run: bool,
    pub evidence: Vec<EvidenceClaim>,
    /// Always [`REPORT_CLAIMS_FORMAT`] for this version.
    pub format: String,
    pub generation: u32,
    /// The signing key's id (see `report_signing::key_id`).
    pub key_id: String,
    /// A sibling's checks-only audit (see `AuditRequest::mechanical_only`): it scores a
    /// candidate and never completes a run. Absent when false, so the signed form of every
    /// other report stays byte-identical.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mechanical_only: bool,
    pub purpose: AuditPurpose,
    pub round: u32,
    pub run_id: String,
    /// The snapshot the verdicts and evidence are bound to.
    pub snapshot: String,
    /// The contract the audit checked.
    pub spec_hash: String,
    pub verdicts: VerdictClaims,
}

/// One evidence record as signed (the fields of [`Evidence`], keys sorted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EvidenceClaim {
    /// The snapshot id the check ran on.
    pub artifact_version: String,
    pub check_id: String,
    pub duration_ms: u64,
    pub exit_code: Option<i32>,
    /// Whether the check ran in the sandbox (absent when the auditor did not say: older
    /// auditors, and then left out of the signed form, which stays byte-identical).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolated: Option<bool>,
    /// sha256 of the full check output (a blob in the evidence bucket).
    pub log_digest: Option<String>,
    pub output_excerpt: String,
    pub produced_at: i64,
    /// The check's own screenshots by digest (absent when none: the signed form of every
    /// other check stays byte-identical).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub screenshots: Vec<EvidenceScreenshot>,
    pub verdict: CheckVerdict,
}

/// The three verdicts as signed (keys sorted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VerdictClaims {
    pub contract: ContractVerdict,
    pub integrity: Integrity,
    pub status: AuditStatus,
}

impl From<&Evidence> for EvidenceClaim {
    fn from(e: &Evidence) -> Self {
        EvidenceClaim {
            artifact_version: e.artifact_version.clone(),
            check_id: e.check_id.clone(),
            duration_ms: e.duration_ms,
            exit_code: e.exit_code,
            isolated: e.isolated,
            log_digest: e.log_digest.clone(),
            output_excerpt: e.output_excerpt.clone(),
            produced_at: e.produced_at,
            screenshots: e.screenshots.clone(),
            verdict: e.verdict,
        }
    }
}

impl From<Verdicts> for VerdictClaims {
    fn from(v: Verdicts) -> Self {
        VerdictClaims {
            contract: v.contract,
            integrity: v.integrity,
            status: v.status,
        }
    }
}

impl VerdictClaims {
    /// Complete, clean and aligned: the verdicts the gate needs.
    pub fn all_pass(&self) -> bool {
        self.status == AuditStatus::Complete
            && self.integrity == Integrity::Clean
            && self.contract == ContractVerdict::Aligned
    }
}

impl ReportClaims {
    /// The claims of `report`, under the key id it names.
    pub fn of(report: &AuditReport) -> ReportClaims {
        ReportClaims {
            completes_run: report.completes_run,
            evidence: report.evidence.iter().map(EvidenceClaim::from).collect(),
            format: REPORT_CLAIMS_FORMAT.to_string(),
            generation: report.generation,
            key_id: report.key_id.clone(),
            mechanical_only: report.mechanical_only,
            purpose: report.purpose,
            round: report.round,
            run_id: report.run_id.clone(),
            snapshot: report.snapshot.clone(),
            spec_hash: report.spec_hash.clone(),
            verdicts: report.verdicts.into(),
        }
    }

    /// The bytes a signature covers (RFC 8785 form, see the module doc).
    pub fn canonical_bytes(&self) -> Vec<u8> {
        // Plain structs of strings, integers and enums: serializing cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Whether a pass of this audit completes the run, by what was signed: a final audit, or
    /// one marked `completes_run`. A round or plan audit without the mark never does, nor
    /// does a sibling's checks-only audit, so a certificate carrying one proves no completion.
    pub fn is_completing(&self) -> bool {
        !self.mechanical_only && (self.purpose == AuditPurpose::Final || self.completes_run)
    }

    /// Whether `check_id` has `pass` evidence bound to the claims' own snapshot.
    pub fn passes_on_snapshot(&self, check_id: &str) -> bool {
        self.evidence.iter().any(|e| {
            e.check_id == check_id
                && e.artifact_version == self.snapshot
                && e.verdict == CheckVerdict::Pass
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::usage::Usage;

    pub(crate) fn sample_report() -> AuditReport {
        AuditReport {
            mechanical_only: false,
            run_id: "0190a3c2-7b1e-7c4d-9f00-123456789abc".into(),
            generation: 1,
            round: 2,
            purpose: AuditPurpose::Final,
            delivery_attempt: 1,
            worker: "audit-1".into(),
            snapshot: "a".repeat(64),
            verdicts: Verdicts {
                status: AuditStatus::Complete,
                integrity: Integrity::Clean,
                contract: ContractVerdict::Aligned,
            },
            evidence: vec![Evidence {
                artifact_version: "a".repeat(64),
                check_id: "prints-greeting".into(),
                verdict: CheckVerdict::Pass,
                produced_at: 1_700_000_000_000,
                log_digest: Some("b".repeat(64)),
                exit_code: Some(0),
                duration_ms: 12,
                output_excerpt: "hello, \"loopgate\"\n\u{1}é".into(),
                isolated: None,
                screenshots: Vec::new(),
            }],
            gaps: vec!["not signed".into()],
            backcheck: Vec::new(),
            changed_paths: vec!["hello.py".into()],
            added_paths: Vec::new(),
            judgment: None,
            usage: Usage::default(),
            duration_ms: 99,
            proposal: None,
            rubric: None,
            spec_hash: "c".repeat(64),
            completes_run: false,
            key_id: "0123456789abcdef".into(),
            signature: String::new(),
        }
    }

    /// The canonical bytes, byte for byte: a change here is a new format.
    #[test]
    fn canonical_bytes_vector() {
        let bytes = ReportClaims::of(&sample_report()).canonical_bytes();
        let want = concat!(
            r#"{"evidence":[{"artifact_version":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","#,
            r#""check_id":"prints-greeting","duration_ms":12,"exit_code":0,"#,
            r#""log_digest":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","#,
            r#""output_excerpt":"hello, \"loopgate\"\n\u0001é","produced_at":1700000000000,"verdict":"pass"}],"#,
            r#""format":"loopgate.audit_report.v1","generation":1,"key_id":"0123456789abcdef","#,
            r#""purpose":"final","round":2,"run_id":"0190a3c2-7b1e-7c4d-9f00-123456789abc","#,
            r#""snapshot":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","#,
            r#""spec_hash":"cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc","#,
            r#""verdicts":{"contract":"aligned","integrity":"clean","status":"complete"}}"#
        );
        assert_eq!(String::from_utf8(bytes).unwrap(), want);
    }

    /// `completes_run` is signed (its key sorts first) and absent when false: the bytes of a
    /// report without it are the vector above, so signatures made before it existed verify.
    #[test]
    fn completes_run_is_signed_and_absent_when_false() {
        let mut round = sample_report();
        round.purpose = AuditPurpose::Round;
        let plain = ReportClaims::of(&round);
        assert!(!plain.is_completing());
        let plain_text = String::from_utf8(plain.canonical_bytes()).unwrap();
        assert!(!plain_text.contains("completes_run"), "{plain_text}");
        round.completes_run = true;
        let marked = ReportClaims::of(&round);
        assert!(marked.is_completing());
        let text = String::from_utf8(marked.canonical_bytes()).unwrap();
        assert!(
            text.starts_with(r#"{"completes_run":true,"evidence":["#),
            "{text}"
        );
        let back: ReportClaims = serde_json::from_str(&plain_text).unwrap();
        assert!(!back.completes_run);
        assert!(ReportClaims::of(&sample_report()).is_completing(), "final");
    }

    /// `mechanical_only` (a sibling's checks-only audit) is signed, absent when false, and such
    /// a report completes nothing, whatever else it says.
    #[test]
    fn a_checks_only_report_is_signed_as_such_and_never_completes() {
        let plain =
            String::from_utf8(ReportClaims::of(&sample_report()).canonical_bytes()).unwrap();
        assert!(!plain.contains("mechanical_only"), "{plain}");
        for purpose in [AuditPurpose::Final, AuditPurpose::Round] {
            let mut report = sample_report();
            report.purpose = purpose;
            report.completes_run = true;
            report.mechanical_only = true;
            let claims = ReportClaims::of(&report);
            assert!(!claims.is_completing(), "{purpose:?}");
            let text = String::from_utf8(claims.canonical_bytes()).unwrap();
            assert!(text.contains(r#""key_id":"#), "{text}");
            assert!(
                text.contains(r#","mechanical_only":true,"purpose":"#),
                "sorted between key_id and purpose: {text}"
            );
        }
    }

    /// The bytes read back as the same claims, and fields outside the claims change nothing.
    #[test]
    fn claims_read_back_and_ignore_unsigned_fields() {
        let claims = ReportClaims::of(&sample_report());
        let bytes = claims.canonical_bytes();
        let back: ReportClaims = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(back, claims);
        let mut other = sample_report();
        other.gaps.push("more".into());
        other.duration_ms = 1;
        other.worker = "audit-2".into();
        other.signature = "ff".into();
        assert_eq!(ReportClaims::of(&other).canonical_bytes(), bytes);
        let mut changed = sample_report();
        changed.evidence[0].output_excerpt.push('!');
        assert_ne!(ReportClaims::of(&changed).canonical_bytes(), bytes);
    }
}
