//! `loopgate verify --offline` as a forger meets it: the built binary, a certificate file and a
//! checked-out tree, no server. A certificate signed by any key that lists that key is refused
//! without a key from the user ("no trusted key", exit 6), and an honestly signed round report
//! of a run that did not complete on it (a `complete_on_gate = false` task, later cancelled)
//! is refused even with the pool's key, whatever the certificate's unsigned `state` says. The
//! controls: the same certificates pass with the key from `--key`, `LOOPGATE_TRUSTED_KEYS` or
//! the trust store when they are the run's completing report.

use std::path::{Path, PathBuf};
use std::process::Output;

use loopgate_api::{Certificate, TrustedKey, CERTIFICATE_FORMAT};
use loopgate_common::state::RunState;
use loopgate_protocol::contract::{Contract, Criterion};
use loopgate_protocol::report::claims::ReportClaims;
use loopgate_protocol::report::signing::ReportSigningKey;
use loopgate_protocol::snapshot::{sha256_hex, Manifest, ManifestEntry};
use loopgate_protocol::usage::Usage;
use loopgate_protocol::verdict::{
    AuditStatus, CheckVerdict, ContractVerdict, Evidence, Integrity, Verdicts,
};
use loopgate_protocol::wire::{AuditPurpose, AuditReport};
use serde_json::Value;

const FILE: &[u8] = b"print('hello, loopgate')\n";
const NOT_VERIFIED: i32 = 6;

fn pool_key() -> ReportSigningKey {
    ReportSigningKey::from_seed(&[0x21; 32])
}

fn forger_key() -> ReportSigningKey {
    ReportSigningKey::from_seed(&[0x66; 32])
}

/// A certificate of run `r1` for one file `hello.py` and one blocking criterion, its report
/// of `purpose` (marked `completes_run` as the manager would for that task) signed by `key`,
/// which the certificate also lists. `state` is the unsigned field a forger writes.
fn certificate(key: &ReportSigningKey, purpose: AuditPurpose, completes_run: bool) -> Certificate {
    let manifest = Manifest::new(vec![ManifestEntry {
        path: "hello.py".into(),
        mode: 0o644,
        size: FILE.len() as u64,
        sha256: sha256_hex(FILE),
    }])
    .unwrap();
    let snapshot = manifest.id();
    let mut contract = Contract {
        goal: "print the greeting".into(),
        criteria: vec![Criterion {
            id: "prints".into(),
            description: String::new(),
            check: Some("python3 hello.py".into()),
            blocking: true,
            timeout_secs: 5,
            source: Default::default(),
            clause: None,
        }],
        protected_paths: Vec::new(),
        writable_paths: Vec::new(),
        rubric: None,
        spec_hash: String::new(),
    };
    contract.spec_hash = contract.compute_hash();
    let mut report = AuditReport {
        mechanical_only: false,
        run_id: "r1".into(),
        generation: 1,
        round: 1,
        purpose,
        delivery_attempt: 1,
        worker: "audit-1".into(),
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
        completes_run,
        key_id: String::new(),
        signature: String::new(),
    };
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

/// A scratch directory with the checked-out tree, key files and an empty config home.
struct Scene {
    dir: tempfile::TempDir,
}

impl Scene {
    fn new() -> Scene {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("tree")).unwrap();
        std::fs::write(dir.path().join("tree/hello.py"), FILE).unwrap();
        std::fs::create_dir_all(dir.path().join("home/.config")).unwrap();
        for (name, key) in [("pool.pub", pool_key()), ("forger.pub", forger_key())] {
            std::fs::write(dir.path().join(name), format!("{}\n", key.public_key())).unwrap();
        }
        Scene { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn write_cert(&self, name: &str, cert: &Certificate) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, serde_json::to_string_pretty(cert).unwrap()).unwrap();
        path
    }

    /// `loopgate verify --offline CERT --snapshot tree --json ARGS`, no server, with the
    /// user's environment replaced: no LOOPGATE_TRUSTED_KEYS unless `env` sets it, HOME and
    /// XDG_CONFIG_HOME in the scene (an empty trust store unless a test writes one).
    async fn verify(&self, cert: &Path, args: &[&str], env: &[(&str, &Path)]) -> Output {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_loopgate"));
        command
            .args(["--server", "http://127.0.0.1:9", "verify", "--offline"])
            .arg(cert)
            .arg("--snapshot")
            .arg(self.path("tree"))
            .arg("--json")
            .args(args)
            .env_remove("LOOPGATE_TRUSTED_KEYS")
            .env_remove("LOOPGATE_TOKEN")
            .env("HOME", self.path("home"))
            .env("XDG_CONFIG_HOME", self.path("home/.config"))
            .kill_on_drop(true);
        for (key, value) in env {
            command.env(key, value);
        }
        command.output().await.unwrap()
    }
}

fn doc(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)))
}

fn checks(v: &Value) -> Vec<String> {
    v["problems"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["check"].as_str().map(String::from))
        .collect()
}

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

#[tokio::test]
async fn a_self_signed_certificate_is_refused_without_a_trusted_key() {
    let scene = Scene::new();
    // Signed by the forger's key, listing that key: consistent with itself in every way.
    let forged = scene.write_cert(
        "forged.json",
        &certificate(&forger_key(), AuditPurpose::Final, true),
    );
    let out = scene.verify(&forged, &[], &[]).await;
    let v = doc(&out);
    assert_eq!(code(&out), Some(NOT_VERIFIED), "{v}");
    assert_eq!(v["verified"], false, "{v}");
    assert_eq!(checks(&v), ["no_trusted_key"], "{v}");
    let detail = v["problems"][0]["detail"].as_str().unwrap_or_default();
    assert!(detail.starts_with("no trusted key"), "{detail}");
    assert_eq!(v["trust_root"], "certificate", "{v}");
    // The human form says it too.
    let out = {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_loopgate"));
        command
            .args(["verify", "--offline"])
            .arg(&forged)
            .arg("--snapshot")
            .arg(scene.path("tree"))
            .env_remove("LOOPGATE_TRUSTED_KEYS")
            .env("HOME", scene.path("home"))
            .env("XDG_CONFIG_HOME", scene.path("home/.config"));
        command.output().await.unwrap()
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(code(&out), Some(NOT_VERIFIED), "{text}");
    assert!(text.contains("no trusted key"), "{text}");

    // With the pool's key pinned, the forgery's signature is by a stranger.
    let out = scene
        .verify(
            &forged,
            &["--key", scene.path("pool.pub").to_str().unwrap()],
            &[],
        )
        .await;
    let v = doc(&out);
    assert_eq!(code(&out), Some(NOT_VERIFIED), "{v}");
    assert_eq!(checks(&v), ["signature"], "{v}");
}

#[tokio::test]
async fn the_pools_key_from_flag_env_or_trust_store_verifies_an_honest_certificate() {
    let scene = Scene::new();
    let honest = scene.write_cert(
        "honest.json",
        &certificate(&pool_key(), AuditPurpose::Final, true),
    );
    let pool = scene.path("pool.pub");
    let out = scene
        .verify(&honest, &["--key-file", pool.to_str().unwrap()], &[])
        .await;
    let v = doc(&out);
    assert_eq!(code(&out), Some(0), "{v}");
    assert_eq!(
        (v["verified"].clone(), v["trust_root"].clone()),
        (true.into(), "pinned".into())
    );
    let out = scene
        .verify(&honest, &[], &[("LOOPGATE_TRUSTED_KEYS", &pool)])
        .await;
    let v = doc(&out);
    assert_eq!(code(&out), Some(0), "{v}");
    assert_eq!(v["trust_root"], "environment", "{v}");
    let store = scene.path("home/.config/loopgate");
    std::fs::create_dir_all(&store).unwrap();
    std::fs::copy(&pool, store.join("trusted-keys")).unwrap();
    let out = scene.verify(&honest, &[], &[]).await;
    let v = doc(&out);
    assert_eq!(code(&out), Some(0), "{v}");
    assert_eq!(v["trust_root"], "trust_store", "{v}");
}

#[tokio::test]
async fn a_round_report_of_a_run_that_did_not_complete_on_it_proves_nothing() {
    let scene = Scene::new();
    let pool = scene.path("pool.pub");
    let pool = pool.to_str().unwrap();
    // The honest, passing, signed round report of a `complete_on_gate = false` task (the run
    // went on and was cancelled), put in a certificate that says "completed".
    let round = scene.write_cert(
        "round.json",
        &certificate(&pool_key(), AuditPurpose::Round, false),
    );
    let out = scene.verify(&round, &["--key", pool], &[]).await;
    let v = doc(&out);
    assert_eq!(code(&out), Some(NOT_VERIFIED), "{v}");
    assert_eq!(checks(&v), ["purpose"], "{v}");
    // Marking it completing after the fact breaks the signature.
    let mut text: Value = serde_json::from_str(&std::fs::read_to_string(&round).unwrap()).unwrap();
    text["report"]["completes_run"] = true.into();
    let marked = scene.path("marked.json");
    std::fs::write(&marked, text.to_string()).unwrap();
    let out = scene.verify(&marked, &["--key", pool], &[]).await;
    let v = doc(&out);
    assert_eq!(code(&out), Some(NOT_VERIFIED), "{v}");
    assert_eq!(checks(&v), ["signature"], "{v}");
    // The control: the round report of a `complete_on_gate` task, signed as completing.
    let completing = scene.write_cert(
        "completing.json",
        &certificate(&pool_key(), AuditPurpose::Round, true),
    );
    let out = scene.verify(&completing, &["--key", pool], &[]).await;
    let v = doc(&out);
    assert_eq!(code(&out), Some(0), "{v}");
    assert_eq!(v["completed_by"], "round", "{v}");
}
