//! Audit verdicts and evidence records.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AuditStatus {
    Complete,
    Incomplete,
    Blocked,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Integrity {
    Clean,
    Suspect,
    Violation,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ContractVerdict {
    Aligned,
    Unknown,
    NeedsRevision,
    Invalid,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CheckVerdict {
    Pass,
    Fail,
    Inconclusive,
}

/// Evidence: one check's verdict bound to the exact artifact version it ran on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// The snapshot id the check ran on.
    pub artifact_version: String,
    pub check_id: String,
    pub verdict: CheckVerdict,
    pub produced_at: i64,
    /// sha256 of the full check output, stored as a blob in the object store.
    pub log_digest: Option<String>,
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    /// The tail of the output, capped, for prompts and people.
    pub output_excerpt: String,
    /// Whether the check ran isolated: `Some(true)` under the auditor's bubblewrap sandbox (no
    /// network, private namespaces, read-only host); `Some(false)` without it (the report's
    /// gaps say why; with `sandbox = "required"` such a check is not run and is
    /// inconclusive); `None` when no check ran for it (a rubric score, a candidate that failed
    /// verification) or an older auditor wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolated: Option<bool>,
    /// The screenshots the check itself took (`loopgate browse --screenshot`), each a blob in
    /// the evidence bucket: what a person sees of a browser check. Never the executor's: only
    /// files `loopgate browse` wrote during this check are collected. Empty for other checks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub screenshots: Vec<EvidenceScreenshot>,
}

/// One screenshot of a check, by digest. Fields in lexicographic order: it is signed as is
/// (see `report_claims`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EvidenceScreenshot {
    /// sha256 of the PNG, a blob in the evidence bucket (`GET /v1/blobs/<digest>`).
    pub digest: String,
    /// `image/png`.
    pub media_type: String,
    /// Where the check wrote it, relative to the check's copy of the workspace.
    pub path: String,
    pub size_bytes: u64,
}

/// The three verdicts of an audit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Verdicts {
    pub status: AuditStatus,
    pub integrity: Integrity,
    pub contract: ContractVerdict,
}
