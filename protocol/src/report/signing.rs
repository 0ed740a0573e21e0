//! Signed audit reports: each auditor pool holds an Ed25519 key and signs the canonical claims
//! of every report ([`crate::report::claims`]); managers and `loopgate verify` hold the trusted
//! public keys and refuse anything else. NATS permissions are the first fence (only auditors
//! may publish on `result.audit.*`); the signature is the second, and it survives a leaked
//! executor credential or a message that reaches the stream some other way.
//!
//! Text formats (key files, config values, `--key FILE`): a signing key is its 32-byte Ed25519
//! seed as 64 hex digits; a public key is its 32 bytes as 64 hex digits. A key's id is the
//! first 16 hex digits of the sha256 of the public key bytes. Signatures are 128 hex digits,
//! verified strictly (RFC 8032 with the malleability and weak-key checks of
//! `ed25519_dalek::VerifyingKey::verify_strict`).

use ed25519_dalek::{Signature, Signer, VerifyingKey};
use sha2::{Digest, Sha256};

use crate::report::claims::{ReportClaims, REPORT_CLAIMS_FORMAT};
use crate::wire::AuditReport;

/// Hex digits of a key id.
const KEY_ID_HEX: usize = 16;

/// A key that could not be read (a configuration error: never retryable).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("an Ed25519 {what} must be 64 hex digits (32 bytes), got {got} characters")]
    WrongLength { what: &'static str, got: usize },
    #[error("an Ed25519 {what} must be hex digits only")]
    NotHex { what: &'static str },
    #[error("{key} is not a usable Ed25519 public key (not a curve point, or of small order)")]
    Unusable { key: String },
    #[error("no public key in the list (one per line or comma-separated; `#` starts a comment)")]
    Empty,
}

/// Why a report's signature was not accepted. `reason()` is the stable name (log field and
/// metric attribute).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the report is not signed, and this manager requires signed reports")]
    Unsigned,
    #[error(
        "the report is signed with key {key_id}, which is not among the trusted keys ({trusted})"
    )]
    UnknownKey { key_id: String, trusted: String },
    #[error("the signature is malformed: {detail}")]
    Malformed { detail: String },
    #[error("the signature does not verify under key {key_id}: the signed claims were altered or signed by another key")]
    BadSignature { key_id: String },
    #[error("the claims are in format {format:?}; this build verifies {REPORT_CLAIMS_FORMAT}")]
    UnsupportedFormat { format: String },
}

impl SignatureError {
    /// Never: a signature that does not verify never will.
    pub fn is_retryable(&self) -> bool {
        false
    }

    /// `unsigned`, `unknown_key`, `malformed_signature`, `bad_signature`, `unsupported_format`.
    pub fn reason(&self) -> &'static str {
        match self {
            SignatureError::Unsigned => "unsigned",
            SignatureError::UnknownKey { .. } => "unknown_key",
            SignatureError::Malformed { .. } => "malformed_signature",
            SignatureError::BadSignature { .. } => "bad_signature",
            SignatureError::UnsupportedFormat { .. } => "unsupported_format",
        }
    }
}

fn decode_32(text: &str, what: &'static str) -> Result<[u8; 32], KeyError> {
    let text = text.trim();
    if text.len() != 64 {
        return Err(KeyError::WrongLength {
            what,
            got: text.chars().count(),
        });
    }
    let mut out = [0u8; 32];
    hex::decode_to_slice(text, &mut out).map_err(|_| KeyError::NotHex { what })?;
    Ok(out)
}

/// The id of a public key: the first 16 hex digits of sha256 of its 32 bytes.
pub fn key_id(public_key: &[u8; 32]) -> String {
    let digest = hex::encode(Sha256::digest(public_key));
    digest[..KEY_ID_HEX].to_string()
}

/// A trusted auditor public key and its id.
#[derive(Clone, PartialEq, Eq)]
pub struct AuditorPublicKey {
    key: VerifyingKey,
    id: String,
}

impl std::fmt::Debug for AuditorPublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AuditorPublicKey({} {})", self.id, self.to_hex())
    }
}

impl std::fmt::Display for AuditorPublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl AuditorPublicKey {
    /// 64 hex digits; refused when the bytes are no curve point or a weak (small-order) key.
    pub fn parse(text: &str) -> Result<AuditorPublicKey, KeyError> {
        let bytes = decode_32(text, "public key")?;
        let unusable = || KeyError::Unusable {
            key: text.trim().to_string(),
        };
        let key = VerifyingKey::from_bytes(&bytes).map_err(|_| unusable())?;
        if key.is_weak() {
            return Err(unusable());
        }
        Ok(AuditorPublicKey {
            id: key_id(&bytes),
            key,
        })
    }

    pub fn key_id(&self) -> &str {
        &self.id
    }

    pub fn to_hex(&self) -> String {
        hex::encode(self.key.as_bytes())
    }

    fn verify(&self, claims: &ReportClaims, signature: &Signature) -> Result<(), SignatureError> {
        self.key
            .verify_strict(&claims.canonical_bytes(), signature)
            .map_err(|_| SignatureError::BadSignature {
                key_id: self.id.clone(),
            })
    }
}

/// An auditor pool's signing key. `Debug` shows only its id; the key zeroizes on drop.
pub struct ReportSigningKey {
    key: ed25519_dalek::SigningKey,
    public: AuditorPublicKey,
}

impl std::fmt::Debug for ReportSigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReportSigningKey({} <secret>)", self.public.id)
    }
}

impl ReportSigningKey {
    /// The key with this 32-byte seed (generate the seed from a CSPRNG, e.g. /dev/urandom).
    pub fn from_seed(seed: &[u8; 32]) -> ReportSigningKey {
        let key = ed25519_dalek::SigningKey::from_bytes(seed);
        let verifying = key.verifying_key();
        let public = AuditorPublicKey {
            id: key_id(verifying.as_bytes()),
            key: verifying,
        };
        ReportSigningKey { key, public }
    }

    /// 64 hex digits (surrounding whitespace, e.g. a file's newline, is ignored).
    pub fn parse(text: &str) -> Result<ReportSigningKey, KeyError> {
        let mut seed = decode_32(text, "signing key")?;
        let key = Self::from_seed(&seed);
        seed.fill(0);
        Ok(key)
    }

    /// The seed as 64 hex digits: the key file's content. Secret.
    pub fn to_secret_hex(&self) -> String {
        hex::encode(self.key.to_bytes())
    }

    pub fn public_key(&self) -> &AuditorPublicKey {
        &self.public
    }

    pub fn key_id(&self) -> &str {
        &self.public.id
    }

    /// Sign `report` in place: its `key_id` becomes this key's and `signature` the Ed25519
    /// signature of its canonical claims.
    pub fn sign(&self, report: &mut AuditReport) {
        report.key_id = self.public.id.clone();
        report.signature = self.sign_claims(&ReportClaims::of(report));
    }

    /// The signature (128 hex digits) of `claims`' canonical bytes, as they are: the caller
    /// names this key in `claims.key_id`.
    pub fn sign_claims(&self, claims: &ReportClaims) -> String {
        hex::encode(self.key.sign(&claims.canonical_bytes()).to_bytes())
    }
}

/// The public keys a verifier trusts. Empty: nothing is verified (reports are accepted
/// unauthenticated, as before signing existed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedKeys {
    keys: Vec<AuditorPublicKey>,
}

impl TrustedKeys {
    /// The keys, each once (by id).
    pub fn new(keys: impl IntoIterator<Item = AuditorPublicKey>) -> TrustedKeys {
        let mut out: Vec<AuditorPublicKey> = Vec::new();
        for key in keys {
            if !out.iter().any(|k| k.id == key.id) {
                out.push(key);
            }
        }
        TrustedKeys { keys: out }
    }

    /// Public keys in text: one per line or comma-separated, blank lines and `#` comments
    /// ignored. At least one key.
    pub fn parse_list(text: &str) -> Result<TrustedKeys, KeyError> {
        let mut keys = Vec::new();
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("");
            for item in line
                .split([',', ' ', '\t'])
                .filter(|i| !i.trim().is_empty())
            {
                keys.push(AuditorPublicKey::parse(item)?);
            }
        }
        if keys.is_empty() {
            return Err(KeyError::Empty);
        }
        Ok(TrustedKeys::new(keys))
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn keys(&self) -> &[AuditorPublicKey] {
        &self.keys
    }

    /// The ids, comma-separated (for messages).
    pub fn ids(&self) -> String {
        let ids: Vec<&str> = self.keys.iter().map(|k| k.id.as_str()).collect();
        ids.join(", ")
    }

    pub fn get(&self, key_id: &str) -> Option<&AuditorPublicKey> {
        self.keys.iter().find(|k| k.id == key_id)
    }

    /// The trusted key that signed `claims` with `signature_hex`, or why none did.
    pub fn verify_claims(
        &self,
        claims: &ReportClaims,
        signature_hex: &str,
    ) -> Result<&AuditorPublicKey, SignatureError> {
        if signature_hex.is_empty() && claims.key_id.is_empty() {
            return Err(SignatureError::Unsigned);
        }
        if claims.format != REPORT_CLAIMS_FORMAT {
            return Err(SignatureError::UnsupportedFormat {
                format: claims.format.clone(),
            });
        }
        let key = self
            .get(&claims.key_id)
            .ok_or_else(|| SignatureError::UnknownKey {
                key_id: claims.key_id.clone(),
                trusted: if self.keys.is_empty() {
                    "none".to_string()
                } else {
                    self.ids()
                },
            })?;
        let mut bytes = [0u8; 64];
        hex::decode_to_slice(signature_hex.trim(), &mut bytes).map_err(|e| {
            SignatureError::Malformed {
                detail: format!("expected 128 hex digits ({e})"),
            }
        })?;
        key.verify(claims, &Signature::from_bytes(&bytes))?;
        Ok(key)
    }

    /// The trusted key that signed `report`, or why none did.
    pub fn verify_report(&self, report: &AuditReport) -> Result<&AuditorPublicKey, SignatureError> {
        self.verify_claims(&ReportClaims::of(report), &report.signature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::claims::tests::sample_report;

    const SEED: [u8; 32] = [7u8; 32];

    /// Fixed seed, fixed report: the key id, public key and signature never change (Ed25519
    /// signatures are deterministic; the values were computed independently, with Python's
    /// `cryptography` over the same canonical bytes). A change here breaks every certificate.
    #[test]
    fn signature_vector() {
        let key = ReportSigningKey::from_seed(&SEED);
        assert_eq!(
            key.to_secret_hex(),
            "0707070707070707070707070707070707070707070707070707070707070707"
        );
        assert_eq!(key.public_key().to_hex(), PUBLIC_HEX);
        assert_eq!(key.key_id(), KEY_ID);
        let mut report = sample_report();
        key.sign(&mut report);
        assert_eq!(report.key_id, KEY_ID);
        assert_eq!(report.signature, SIGNATURE_HEX);
    }

    const PUBLIC_HEX: &str = "ea4a6c63e29c520abef5507b132ec5f9954776aebebe7b92421eea691446d22c";
    const KEY_ID: &str = "fe812c12f3ab4ce6";
    /// Computed independently (Python `cryptography`/OpenSSL over the same canonical bytes).
    const SIGNATURE_HEX: &str = "c1a139214d24f35403a54428e59a6cf10fd47c9203d7924af587c2fa07b22119e3aaa61b8b8a359127cfdac29836c6de0c2962e32cd4cbef6153f9e6dabb5c0c";

    #[test]
    fn signature_round_trip_and_refusals() {
        let key = ReportSigningKey::from_seed(&SEED);
        let other = ReportSigningKey::from_seed(&[9u8; 32]);
        let trusted = TrustedKeys::new([key.public_key().clone()]);
        let mut report = sample_report();
        report.key_id.clear();
        assert_eq!(
            trusted.verify_report(&report).map_err(|e| e.reason()),
            Err("unsigned")
        );
        key.sign(&mut report);
        assert_eq!(
            trusted.verify_report(&report).unwrap().key_id(),
            key.key_id()
        );

        // Anything the claims cover, changed after signing.
        let tamperings: Vec<fn(&mut AuditReport)> = vec![
            |r| r.run_id.push('x'),
            |r| r.generation += 1,
            |r| r.round += 1,
            |r| r.purpose = crate::wire::AuditPurpose::Round,
            |r| r.snapshot = "d".repeat(64),
            |r| r.spec_hash = "e".repeat(64),
            |r| r.verdicts.integrity = crate::verdict::Integrity::Suspect,
            |r| r.evidence[0].verdict = crate::verdict::CheckVerdict::Fail,
            |r| r.evidence[0].log_digest = None,
            |r| r.evidence.clear(),
        ];
        for (i, tamper) in tamperings.iter().enumerate() {
            let mut bad = report.clone();
            tamper(&mut bad);
            assert_eq!(
                trusted.verify_report(&bad).map_err(|e| e.reason()),
                Err("bad_signature"),
                "tampering #{i}"
            );
        }
        // Outside the claims: still valid.
        let mut annotated = report.clone();
        annotated.gaps.push("x".into());
        assert!(trusted.verify_report(&annotated).is_ok());

        // Signed by a key nobody trusts, or claiming a trusted key id it does not hold.
        let mut foreign = sample_report();
        other.sign(&mut foreign);
        assert_eq!(
            trusted.verify_report(&foreign).map_err(|e| e.reason()),
            Err("unknown_key")
        );
        foreign.key_id = key.key_id().to_string();
        assert_eq!(
            trusted.verify_report(&foreign).map_err(|e| e.reason()),
            Err("bad_signature")
        );
        let mut garbled = report.clone();
        garbled.signature = "zz".into();
        assert_eq!(
            trusted.verify_report(&garbled).map_err(|e| e.reason()),
            Err("malformed_signature")
        );
        assert_eq!(
            TrustedKeys::default()
                .verify_report(&report)
                .map_err(|e| e.reason()),
            Err("unknown_key")
        );
        let mut claims = ReportClaims::of(&report);
        claims.format = "loopgate.audit_report.v2".into();
        assert_eq!(
            trusted
                .verify_claims(&claims, &report.signature)
                .map_err(|e| e.reason()),
            Err("unsupported_format")
        );
    }

    #[test]
    fn key_texts_parse_or_say_why_not() {
        let key = ReportSigningKey::parse(&format!("{}\n", "07".repeat(32))).unwrap();
        assert_eq!(key.key_id(), KEY_ID);
        assert!(!format!("{key:?}").contains("0707"));
        let public = AuditorPublicKey::parse(&format!("  {PUBLIC_HEX}\n")).unwrap();
        assert_eq!(&public, key.public_key());
        let cases: Vec<(String, fn(&KeyError) -> bool)> = vec![
            ("abc".into(), |e| {
                matches!(e, KeyError::WrongLength { got: 3, .. })
            }),
            ("zz".repeat(32), |e| matches!(e, KeyError::NotHex { .. })),
            // The identity point: small order.
            (format!("01{}", "00".repeat(31)), |e| {
                matches!(e, KeyError::Unusable { .. })
            }),
        ];
        for (text, check) in cases {
            let err = AuditorPublicKey::parse(&text).unwrap_err();
            assert!(check(&err), "{text}: {err}");
        }
        let list = TrustedKeys::parse_list(&format!(
            "# the pool's keys\n{PUBLIC_HEX}\n\n{},{PUBLIC_HEX} # again\n",
            ReportSigningKey::from_seed(&[9u8; 32]).public_key()
        ))
        .unwrap();
        assert_eq!(list.keys().len(), 2);
        assert!(list.get(KEY_ID).is_some());
        assert_eq!(TrustedKeys::parse_list("# nothing\n"), Err(KeyError::Empty));
        assert!(TrustedKeys::parse_list("nope").is_err());
    }
}
