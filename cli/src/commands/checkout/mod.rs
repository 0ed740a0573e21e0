//! `loopgate checkout RUN DIR [--round N | --snapshot ID]`: downloads a snapshot's manifest and
//! blobs, checks the manifest against the snapshot id and every blob against its sha256, and
//! writes the files with their modes into an empty (or new) directory. Without `--round` or
//! `--snapshot` it takes the run's current snapshot; `--round N` takes round N's candidate.
//! The round look-up and verified downloads here are shared with `loopgate diff`.

mod error;

pub use error::CheckoutError;
use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use futures::StreamExt;
use loopgate_protocol::snapshot::{is_sha256_hex, sha256_hex, Manifest, ManifestEntry};
use serde_json::Value;

use loopgate_api::{RoundList, RoundView};

use crate::api_client::ApiClient;
use crate::cli_args::CheckoutArgs;
use crate::errors::CliError;
use crate::output;

/// Blobs downloaded at once.
const PARALLEL_DOWNLOADS: usize = 8;

pub fn parse_rounds(value: Value) -> Result<Vec<RoundView>, CheckoutError> {
    serde_json::from_value::<RoundList>(value)
        .map(|list| list.rounds)
        .map_err(|e| CheckoutError::BadRounds(e.to_string()))
}

/// Round `wanted`, or the latest round with a candidate. `need_candidate`: round `wanted`
/// must have one.
pub fn pick_round<'a>(
    run: &str,
    rounds: &'a [RoundView],
    wanted: Option<u32>,
    need_candidate: bool,
) -> Result<&'a RoundView, CheckoutError> {
    let picked =
        match wanted {
            Some(round) => rounds.iter().find(|r| r.round == round).ok_or_else(|| {
                CheckoutError::NoSuchRound {
                    run: run.to_string(),
                    round,
                    count: rounds.len(),
                }
            })?,
            None => rounds
                .iter()
                .filter(|r| r.candidate.is_some())
                .max_by_key(|r| r.round)
                .ok_or_else(|| CheckoutError::NoRounds(run.to_string()))?,
        };
    if need_candidate && picked.candidate.is_none() {
        return Err(CheckoutError::NoCandidate {
            run: run.to_string(),
            round: picked.round,
        });
    }
    Ok(picked)
}

pub async fn run_rounds(client: &ApiClient, run: &str) -> Result<Vec<RoundView>, CliError> {
    Ok(parse_rounds(client.run_rounds(run).await?)?)
}

/// A manifest from the server, refused unless it is the one `snapshot` names.
pub async fn fetch_manifest(client: &ApiClient, snapshot: &str) -> Result<Manifest, CliError> {
    if !is_sha256_hex(snapshot) {
        return Err(CheckoutError::BadSnapshotId(snapshot.to_string()).into());
    }
    let manifest = client.snapshot_manifest(snapshot).await?;
    verify_manifest(snapshot, &manifest)?;
    Ok(manifest)
}

/// An entry's content from the server, refused unless it hashes to the entry's sha256.
pub async fn fetch_content(client: &ApiClient, entry: &ManifestEntry) -> Result<Vec<u8>, CliError> {
    let bytes = client
        .blob(&entry.sha256)
        .await
        .map_err(|source| CheckoutError::Blob {
            path: entry.path.clone(),
            source,
        })?;
    verify_blob(entry, &bytes, Path::new("."))?;
    Ok(bytes.to_vec())
}

pub async fn checkout(client: &ApiClient, args: &CheckoutArgs) -> Result<(), CliError> {
    ensure_empty_or_missing(&args.dir)?;
    let snapshot = match (&args.snapshot, args.round) {
        (Some(id), _) => id.trim().to_string(),
        (None, Some(round)) => {
            let rounds = run_rounds(client, &args.run).await?;
            let picked = pick_round(&args.run, &rounds, Some(round), true)?;
            picked.candidate.clone().unwrap_or_default()
        }
        (None, None) => current_snapshot(client, &args.run).await?,
    };
    let manifest = fetch_manifest(client, &snapshot).await?;
    fs::create_dir_all(&args.dir).map_err(|source| CheckoutError::Write {
        path: ".".into(),
        dir: args.dir.clone(),
        source,
    })?;
    let dir = fs::canonicalize(&args.dir).unwrap_or_else(|_| args.dir.clone());
    write_files(client, &manifest, &dir).await?;
    output::line(dir.display())?;
    Ok(())
}

fn ensure_empty_or_missing(dir: &Path) -> Result<(), CheckoutError> {
    match fs::symlink_metadata(dir) {
        Err(_) => Ok(()),
        Ok(meta) if !meta.is_dir() => Err(CheckoutError::NotADirectory(dir.to_path_buf())),
        Ok(_) => {
            let mut entries = fs::read_dir(dir).map_err(|source| CheckoutError::Write {
                path: ".".into(),
                dir: dir.to_path_buf(),
                source,
            })?;
            if entries.next().is_some() {
                Err(CheckoutError::DirNotEmpty(dir.to_path_buf()))
            } else {
                Ok(())
            }
        }
    }
}

async fn current_snapshot(client: &ApiClient, run: &str) -> Result<String, CliError> {
    let view = client.get_run(run).await?;
    view.get("snapshot")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .ok_or_else(|| CheckoutError::NoSnapshot(run.to_string()).into())
}

/// Paths, digests and order must be valid, and the manifest must be the one the id names.
pub fn verify_manifest(snapshot: &str, manifest: &Manifest) -> Result<(), CheckoutError> {
    manifest
        .validate()
        .map_err(|e| CheckoutError::InvalidManifest {
            snapshot: snapshot.to_string(),
            problem: e.to_string(),
        })?;
    let actual = manifest.id();
    if actual != snapshot {
        return Err(CheckoutError::ManifestMismatch {
            snapshot: snapshot.to_string(),
            actual,
        });
    }
    Ok(())
}

/// Downloads each distinct blob once, verifies it, and writes every entry that has it.
async fn write_files(
    client: &ApiClient,
    manifest: &Manifest,
    dir: &Path,
) -> Result<(), CheckoutError> {
    let mut by_digest: BTreeMap<&str, Vec<&ManifestEntry>> = BTreeMap::new();
    for entry in &manifest.entries {
        by_digest
            .entry(entry.sha256.as_str())
            .or_default()
            .push(entry);
    }
    let mut downloads =
        futures::stream::iter(by_digest.into_iter().map(|(sha, entries)| async move {
            let result = client.blob(sha).await;
            (entries, result)
        }))
        .buffer_unordered(PARALLEL_DOWNLOADS);
    while let Some((entries, result)) = downloads.next().await {
        let Some(first) = entries.first() else {
            continue;
        };
        let bytes = result.map_err(|source| CheckoutError::Blob {
            path: first.path.clone(),
            source,
        })?;
        verify_blob(first, &bytes, dir)?;
        for entry in entries {
            write_entry(dir, entry, &bytes)?;
        }
    }
    Ok(())
}

pub fn verify_blob(entry: &ManifestEntry, bytes: &[u8], dir: &Path) -> Result<(), CheckoutError> {
    let actual = sha256_hex(bytes);
    if actual != entry.sha256 || bytes.len() as u64 != entry.size {
        return Err(CheckoutError::BlobMismatch {
            path: entry.path.clone(),
            expected: entry.sha256.clone(),
            actual,
            dir: dir.to_path_buf(),
        });
    }
    Ok(())
}

/// Writes one file (never over an existing one) and sets its mode.
fn write_entry(dir: &Path, entry: &ManifestEntry, bytes: &[u8]) -> Result<(), CheckoutError> {
    let fail = |source| CheckoutError::Write {
        path: entry.path.clone(),
        dir: dir.to_path_buf(),
        source,
    };
    let target = dir.join(&entry.path);
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent).map_err(fail)?;
    }
    let mode = entry.mode & 0o777;
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&target)
        .map_err(fail)?;
    file.write_all(bytes).map_err(fail)?;
    file.sync_all().map_err(fail)?;
    // The umask may have cleared bits `mode` asked for.
    fs::set_permissions(&target, fs::Permissions::from_mode(mode)).map_err(fail)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn entry(path: &str, content: &[u8]) -> ManifestEntry {
        ManifestEntry {
            path: path.into(),
            mode: 0o644,
            size: content.len() as u64,
            sha256: sha256_hex(content),
        }
    }

    #[test]
    fn manifests_must_match_their_id_and_be_valid() {
        let manifest = Manifest::new(vec![entry("a.txt", b"a")]).unwrap();
        let id = manifest.id();
        assert!(verify_manifest(&id, &manifest).is_ok());
        let other = Manifest::new(vec![entry("a.txt", b"b")]).unwrap();
        assert!(matches!(
            verify_manifest(&id, &other),
            Err(CheckoutError::ManifestMismatch { .. })
        ));
        let escaping = Manifest {
            v: 1,
            entries: vec![entry("../evil", b"x")],
        };
        assert!(matches!(
            verify_manifest(&escaping.id(), &escaping),
            Err(CheckoutError::InvalidManifest { .. })
        ));
    }

    #[test]
    fn rounds_parse_and_pick() {
        let value = serde_json::json!({"rounds": [
            {"round": 1, "base_snapshot": "b1", "candidate": "c1", "verdicts": null, "gate_passed": false},
            {"round": 2, "base_snapshot": "c1", "candidate": null, "verdicts": null, "gate_passed": null},
            {"round": 3, "base_snapshot": "c1", "candidate": "c3"},
            {"round": 4, "base_snapshot": "c3"}
        ]});
        let rounds = parse_rounds(value).unwrap();
        assert_eq!(rounds.len(), 4);
        assert_eq!(pick_round("r", &rounds, None, true).unwrap().round, 3);
        assert_eq!(
            pick_round("r", &rounds, Some(1), true)
                .unwrap()
                .candidate
                .as_deref(),
            Some("c1")
        );
        assert!(matches!(
            pick_round("r", &rounds, Some(2), true),
            Err(CheckoutError::NoCandidate { round: 2, .. })
        ));
        assert_eq!(
            pick_round("r", &rounds, Some(2), false)
                .unwrap()
                .base_snapshot,
            "c1"
        );
        assert!(matches!(
            pick_round("r", &rounds, Some(9), false),
            Err(CheckoutError::NoSuchRound {
                round: 9,
                count: 4,
                ..
            })
        ));
        assert!(matches!(
            pick_round("r", &[], None, true),
            Err(CheckoutError::NoRounds(_))
        ));
        assert!(matches!(
            parse_rounds(serde_json::json!({"rounds": [{"round": "x"}]})),
            Err(CheckoutError::BadRounds(_))
        ));
    }

    #[test]
    fn blobs_are_rehashed() {
        let e = entry("a.txt", b"hello");
        let dir = Path::new("/tmp/x");
        assert!(verify_blob(&e, b"hello", dir).is_ok());
        assert!(matches!(
            verify_blob(&e, b"hellO", dir),
            Err(CheckoutError::BlobMismatch { ref path, .. }) if path == "a.txt"
        ));
    }

    #[test]
    fn target_dir_must_be_empty_or_missing() {
        let root = tempfile::tempdir().unwrap();
        assert!(ensure_empty_or_missing(&root.path().join("new")).is_ok());
        assert!(ensure_empty_or_missing(root.path()).is_ok());
        fs::write(root.path().join("f"), "x").unwrap();
        assert!(matches!(
            ensure_empty_or_missing(root.path()),
            Err(CheckoutError::DirNotEmpty(_))
        ));
        assert!(matches!(
            ensure_empty_or_missing(&root.path().join("f")),
            Err(CheckoutError::NotADirectory(_))
        ));
    }

    #[test]
    fn entries_are_written_with_modes_and_never_overwrite() {
        let root = tempfile::tempdir().unwrap();
        let mut exe = entry("bin/run.sh", b"#!/bin/sh\n");
        exe.mode = 0o755;
        write_entry(root.path(), &exe, b"#!/bin/sh\n").unwrap();
        let meta = fs::metadata(root.path().join("bin/run.sh")).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o755);
        assert!(matches!(
            write_entry(root.path(), &exe, b"#!/bin/sh\n"),
            Err(CheckoutError::Write { ref path, .. }) if path == "bin/run.sh"
        ));
    }
}
