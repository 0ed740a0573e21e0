//! A completed run's certificate (`GET /v1/runs/{id}/certificate`), also the file format of
//! `loopgate verify --offline FILE`: everything needed to check, without the server, that the
//! run's final snapshot passed its frozen contract, as signed by an auditor pool.
//!
//! Unlike the other response types it is read strictly (every field present and well typed,
//! unknown fields ignored): a verifier must never fill a gap in a certificate with a default.

use loopgate_common::state::RunState;
use loopgate_protocol::contract::Contract;
use loopgate_protocol::report::claims::ReportClaims;
use loopgate_protocol::snapshot::Manifest;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The version of the certificate format.
pub const CERTIFICATE_FORMAT: &str = "loopgate.certificate.v1";

/// What a completed run proves, and what proves it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Certificate {
    /// Always `loopgate.certificate.v1` for this version.
    pub format: String,
    pub run_id: String,
    /// The run's state when the certificate was issued (`completed`), as the manager says:
    /// not signed (managers hold no key). A verifier derives completion from the signed report
    /// alone (`report.purpose` is `final`, or `report.completes_run` is true, and it passes).
    pub state: RunState,
    /// The run's final snapshot: the one the signed report is bound to.
    pub snapshot: String,
    /// The frozen contract; its `spec_hash` is the sha256 of its canonical form, so a verifier
    /// recomputes it, and the signed report must name the same hash.
    pub contract: Contract,
    /// The claims of the signed report of the audit that completed the run (a final audit, or
    /// a round audit the auditor signed with `completes_run`), in the canonical form the
    /// signature covers (`loopgate.audit_report.v1`, RFC 8785 JSON).
    pub report: ReportClaims,
    /// Ed25519 signature of `report`'s canonical bytes, 128 hex digits; empty when the
    /// auditor did not sign (no key configured), which no verifier accepts.
    pub signature: String,
    /// The final snapshot's manifest: its sha256 is `snapshot`; every file is listed with its
    /// sha256, size and mode.
    pub manifest: Manifest,
    /// The auditor public keys this manager trusts. Whoever wrote the certificate wrote this
    /// list, so it proves nothing: `loopgate verify` refuses without a key from the user
    /// (`--key FILE`, `LOOPGATE_TRUSTED_KEYS`, the trust store) and uses the list only to
    /// name inconsistencies.
    pub trusted_keys: Vec<TrustedKey>,
}

/// One trusted auditor public key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TrustedKey {
    /// The first 16 hex digits of the sha256 of the key bytes.
    pub key_id: String,
    /// The Ed25519 public key, 64 hex digits.
    pub public_key: String,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn certificates_are_read_strictly() {
        // A field missing is an error, not a default.
        let err = serde_json::from_value::<Certificate>(serde_json::json!({
            "format": CERTIFICATE_FORMAT, "run_id": "r", "state": "completed"
        }))
        .unwrap_err();
        assert!(err.to_string().contains("missing field"), "{err}");
    }
}
