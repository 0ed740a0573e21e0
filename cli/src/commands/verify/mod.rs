//! `loopgate verify RUN [--key FILE]... [--json] [--export FILE]` and
//! `loopgate verify --offline FILE --snapshot DIR [--key FILE]...`: prove that a run completed.
//! The certificate (`GET /v1/runs/{id}/certificate`, or an exported one) is checked in
//! `checks.rs`; every blob of the final snapshot is re-hashed: downloaded through
//! `loopgate checkout`'s verified fetch, or read from a checked-out tree (`tree.rs`).
//!
//! The trust root is the set of auditor public keys the signature is checked against, and
//! only keys the user holds count (`trust.rs`: `--key FILE`, `LOOPGATE_TRUSTED_KEYS`, the
//! trust store). Without one, verification fails with "no trusted key": the key list a
//! certificate carries is written by whoever made it, so a forgery signed with any key and
//! listing that key would otherwise pass. The signature is still checked against that list,
//! so the answer also names what else is wrong.

mod checks;
mod tree;
mod trust;

use std::collections::BTreeMap;
use std::path::Path;

use futures::StreamExt;
use loopgate_api::Certificate;
use loopgate_protocol::report::signing::{AuditorPublicKey, TrustedKeys};
use loopgate_protocol::snapshot::{sha256_hex, ManifestEntry};
use serde::Serialize;
use serde_json::Value;

pub use checks::{check_certificate, CertificateFindings, CriterionCheck, Problem};
pub use tree::check_tree;
pub use trust::{TrustRoot, TRUSTED_KEYS_ENV};

use crate::api_client::{ApiClient, ApiError};
use crate::cli_args::VerifyArgs;
use crate::commands::checkout::{fetch_content, CheckoutError};
use crate::errors::CliError;
use crate::exit_status::ExitStatus;
use crate::output;

/// Blobs downloaded at once.
const PARALLEL_DOWNLOADS: usize = 8;

/// The user's keys and where they came from (`None`: the user gave none).
pub type UserKeys = Option<(TrustedKeys, TrustRoot)>;

/// The outcome, as `--json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    pub verified: bool,
    pub run_id: String,
    pub snapshot: String,
    pub spec_hash: String,
    /// The trusted key that signed the final report.
    pub signed_by: Option<String>,
    /// The signed report's purpose (`final`, or `round` for a round audit signed as completing
    /// the run): what the completion is derived from.
    pub completed_by: &'static str,
    pub trust_root: TrustRoot,
    /// Files of the final snapshot re-hashed.
    pub files: usize,
    pub criteria: Vec<CriterionCheck>,
    pub problems: Vec<Problem>,
    /// sha256 of the signed report claims' canonical bytes (what the signature covers): the
    /// digest `loopgate apply` writes in its `Loopgate-Certificate:` trailer.
    pub certificate_digest: String,
}

/// The certificate digest: sha256 of the canonical bytes of its signed report claims.
pub fn certificate_digest(cert: &Certificate) -> String {
    sha256_hex(&cert.report.canonical_bytes())
}

/// An online check of a run (`verify RUN`, `apply RUN`).
pub enum Online {
    /// The run has no certificate because it did not complete.
    NotCompleted(Problem),
    /// The certificate checked, and the final snapshot's blobs by sha256 (those that hash to
    /// their digest).
    Checked {
        verification: Verification,
        certificate: Box<Certificate>,
        blobs: BTreeMap<String, Vec<u8>>,
    },
}

/// The user's trusted keys (`--key FILE`, `LOOPGATE_TRUSTED_KEYS`, the trust store).
pub fn trusted_keys(files: &[std::path::PathBuf]) -> Result<UserKeys, CliError> {
    let env = |key: &str| std::env::var(key).ok();
    trust::user_keys(files, &env)
}

/// Everything `loopgate verify RUN` checks: the server's certificate against `user`'s keys
/// and every blob of the final snapshot re-hashed.
pub async fn check_online(
    client: &ApiClient,
    run: &str,
    user: UserKeys,
    export_to: Option<&Path>,
) -> Result<Online, CliError> {
    let value = match client.run_certificate(run).await {
        Ok(value) => value,
        Err(ApiError::Server { code, message, .. }) if code == "not_completed" => {
            return Ok(Online::NotCompleted(Problem::new("not_completed", message)));
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(path) = export_to {
        export(path, &value)?;
    }
    let cert: Certificate = serde_json::from_value(value).map_err(|e| ApiError::BadResponse {
        what: "GET /v1/runs/{id}/certificate".into(),
        detail: format!("not a loopgate certificate: {e}"),
    })?;
    let mut verification = verify_certificate(&cert, user, TrustRoot::Server);
    let mut blobs = BTreeMap::new();
    if !verification.problems.iter().any(|p| p.check == "manifest") {
        let (problems, fetched) = rehash_blobs(client, &cert.manifest.entries).await?;
        add_problems(&mut verification, problems);
        blobs = fetched;
    }
    Ok(Online::Checked {
        verification,
        certificate: Box::new(cert),
        blobs,
    })
}

pub async fn verify(client: &ApiClient, args: &VerifyArgs) -> Result<ExitStatus, CliError> {
    let user = trusted_keys(&args.key)?;
    let verification = match (&args.offline, &args.run) {
        (Some(file), _) => {
            let dir = args.snapshot.as_deref().ok_or_else(|| {
                CliError::Usage("--offline FILE needs --snapshot DIR (the checked-out tree)".into())
            })?;
            verify_offline(file, dir, user)?
        }
        (None, Some(run)) => match verify_online(client, run, user, args).await? {
            Some(v) => v,
            None => return Ok(ExitStatus::NotVerified),
        },
        (None, None) => {
            return Err(CliError::Usage(
                "give a RUN, or --offline FILE --snapshot DIR".into(),
            ))
        }
    };
    report(&verification, args.json)?;
    Ok(if verification.verified {
        ExitStatus::Ok
    } else {
        ExitStatus::NotVerified
    })
}

/// The keys a certificate lists; a listed id that is not its key's is a problem.
fn listed_keys(cert: &Certificate, problems: &mut Vec<Problem>) -> TrustedKeys {
    let mut keys = Vec::new();
    for listed in &cert.trusted_keys {
        match AuditorPublicKey::parse(&listed.public_key) {
            Ok(key) if key.key_id() == listed.key_id => keys.push(key),
            Ok(key) => problems.push(Problem::new(
                "trusted_keys",
                format!("key {} is listed with id {}", key.key_id(), listed.key_id),
            )),
            Err(e) => problems.push(Problem::new("trusted_keys", e.to_string())),
        }
    }
    TrustedKeys::new(keys)
}

/// The certificate's checks against the user's keys; without any, against the certificate's
/// own list (`unpinned`), which can show inconsistencies but never verifies.
fn verify_certificate(cert: &Certificate, user: UserKeys, unpinned: TrustRoot) -> Verification {
    let mut problems = Vec::new();
    let (trusted, trust_root) = match user {
        Some((keys, root)) => (keys, root),
        None => {
            problems.push(Problem::new("no_trusted_key", trust::NO_TRUSTED_KEY));
            (listed_keys(cert, &mut problems), unpinned)
        }
    };
    let CertificateFindings {
        problems: found,
        criteria,
        signed_by,
    } = check_certificate(cert, &trusted);
    problems.extend(found);
    Verification {
        verified: problems.is_empty() && trust_root.is_trusted(),
        run_id: cert.run_id.clone(),
        snapshot: cert.snapshot.clone(),
        spec_hash: cert.contract.spec_hash.clone(),
        signed_by,
        completed_by: cert.report.purpose.as_str(),
        trust_root,
        files: cert.manifest.entries.len(),
        criteria,
        problems,
        certificate_digest: certificate_digest(cert),
    }
}

fn add_problems(v: &mut Verification, more: Vec<Problem>) {
    v.problems.extend(more);
    v.verified = v.problems.is_empty() && v.trust_root.is_trusted();
}

fn verify_offline(file: &Path, dir: &Path, user: UserKeys) -> Result<Verification, CliError> {
    let text = std::fs::read_to_string(file).map_err(|source| CliError::ReadInput {
        path: file.to_path_buf(),
        source,
    })?;
    let cert: Certificate = serde_json::from_str(&text).map_err(|e| CliError::InvalidFile {
        path: file.to_path_buf(),
        problem: format!("not a loopgate certificate: {e}"),
    })?;
    let mut verification = verify_certificate(&cert, user, TrustRoot::Certificate);
    let tree = check_tree(&cert.manifest, dir).map_err(|source| CliError::ReadInput {
        path: dir.to_path_buf(),
        source,
    })?;
    add_problems(&mut verification, tree);
    Ok(verification)
}

/// `None`: the run has no certificate because it did not complete (already reported).
async fn verify_online(
    client: &ApiClient,
    run: &str,
    user: UserKeys,
    args: &VerifyArgs,
) -> Result<Option<Verification>, CliError> {
    match check_online(client, run, user, args.export.as_deref()).await? {
        Online::NotCompleted(problem) => {
            not_completed(run, problem, args.json)?;
            Ok(None)
        }
        Online::Checked { verification, .. } => Ok(Some(verification)),
    }
}

fn export(path: &Path, value: &Value) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    std::fs::write(path, format!("{text}\n")).map_err(|source| CliError::WriteOutput {
        path: path.to_path_buf(),
        source,
    })
}

/// Download every distinct blob through checkout's verified fetch; a blob that does not hash
/// to its digest is a problem, an unreachable server an error. The intact blobs come back by
/// sha256.
async fn rehash_blobs(
    client: &ApiClient,
    entries: &[ManifestEntry],
) -> Result<(Vec<Problem>, BTreeMap<String, Vec<u8>>), CliError> {
    let mut by_digest: BTreeMap<&str, &ManifestEntry> = BTreeMap::new();
    for entry in entries {
        by_digest.entry(entry.sha256.as_str()).or_insert(entry);
    }
    let mut downloads = futures::stream::iter(
        by_digest
            .into_values()
            .map(|entry| async move { (entry, fetch_content(client, entry).await) }),
    )
    .buffer_unordered(PARALLEL_DOWNLOADS);
    let mut problems = Vec::new();
    let mut blobs = BTreeMap::new();
    while let Some((entry, result)) = downloads.next().await {
        match result {
            Ok(bytes) => {
                blobs.insert(entry.sha256.clone(), bytes);
            }
            Err(CliError::Checkout(CheckoutError::BlobMismatch {
                path,
                expected,
                actual,
                ..
            })) => problems.push(Problem::new(
                "blob",
                format!(
                    "'{path}' hashes to {actual}, the certified snapshot has {expected}: tampered"
                ),
            )),
            // The server refused to serve it: it no longer hashes to its name there, or it is
            // gone. Either way the certified snapshot cannot be produced.
            Err(CliError::Checkout(CheckoutError::Blob {
                path,
                source: ApiError::Server { code, message, .. },
            })) if code == "integrity" || code == "not_found" => problems.push(Problem::new(
                "blob",
                format!("'{path}' cannot be fetched intact ({code}): {message}"),
            )),
            Err(e) => return Err(e),
        }
    }
    Ok((problems, blobs))
}

pub fn not_completed(run: &str, problem: Problem, json: bool) -> Result<(), CliError> {
    if json {
        let v = serde_json::json!({
            "verified": false, "run_id": run, "problems": [problem],
        });
        return output::line(v);
    }
    output::block(&[
        format!("NOT verified: run {run}"),
        format!("  {}: {}", problem.check, problem.detail),
    ])
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

pub fn report(v: &Verification, json: bool) -> Result<(), CliError> {
    if json {
        return output::line(serde_json::to_string(v).unwrap_or_default());
    }
    if !v.verified {
        let mut lines = vec![format!("NOT verified: run {}", v.run_id)];
        lines.extend(
            v.problems
                .iter()
                .map(|p| format!("  {}: {}", p.check, p.detail)),
        );
        lines.push(format!("  trust root: {}", v.trust_root.describe()));
        return output::block(&lines);
    }
    output::block(&[
        format!(
            "verified: run {} completed on snapshot {} under contract {} (signed {} audit)",
            v.run_id,
            short(&v.snapshot),
            short(&v.spec_hash),
            v.completed_by
        ),
        format!(
            "  {} file(s) re-hashed; {}/{} required criteria pass on that snapshot",
            v.files,
            v.criteria.iter().filter(|c| c.passed).count(),
            v.criteria.len()
        ),
        format!(
            "  signed by auditor key {} (trust root: {})",
            v.signed_by.as_deref().unwrap_or("?"),
            v.trust_root.describe()
        ),
        format!("  certificate digest {}", v.certificate_digest),
    ])
}
