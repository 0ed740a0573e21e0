//! Snapshot store: freeze, materialize, integrity, refusals.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use anyhow::Result;
use loopgate_protocol::snapshot::{sha256_hex, Manifest, SnapshotPathError};
use loopgate_protocol::subjects::SNAPSHOT_BUCKET;
use loopgate_snapshot::{
    blob_object_name, FreezeRules, Refusal, SnapshotError, BLOB_REFRESH_AFTER,
};
use loopgate_test_support::date_back;

use crate::{bounded, mode_of, nats_and_store, sample_workspace, write};

#[tokio::test]
async fn freeze_then_materialize_round_trips_bytes_and_modes() -> Result<()> {
    bounded(async {
        let (_server, _bus, store) = nats_and_store().await?;
        let ws = sample_workspace();
        let outcome = store.freeze(ws.path(), &FreezeRules::default()).await?;
        let paths: Vec<&str> = outcome
            .manifest
            .entries
            .iter()
            .map(|e| e.path.as_str())
            .collect();
        assert_eq!(
            paths,
            vec![
                "README.md",
                "dup_a.txt",
                "dup_b.txt",
                "lib_link.rs",
                "scripts/run.sh",
                "src/deep/nested/data.bin",
                "src/lib.rs"
            ]
        );
        assert_eq!(outcome.files, 7);
        assert_eq!(outcome.id, outcome.manifest.id());
        // dup_a/dup_b and lib_link/src/lib.rs share blobs.
        assert_eq!(outcome.blobs_uploaded, 5);
        assert_eq!(outcome.bytes_total, outcome.manifest.total_bytes());

        let out = tempfile::tempdir()?;
        let manifest = store.materialize(&outcome.id, out.path()).await?;
        assert_eq!(manifest, *outcome.manifest);
        for entry in &manifest.entries {
            let original = fs::read(ws.path().join(&entry.path))?;
            let copy = fs::read(out.path().join(&entry.path))?;
            assert_eq!(original, copy, "{}", entry.path);
            assert_eq!(
                mode_of(&out.path().join(&entry.path)),
                entry.mode,
                "{}",
                entry.path
            );
        }
        assert_eq!(mode_of(&out.path().join("scripts/run.sh")), 0o755);
        assert_eq!(mode_of(&out.path().join("src/deep/nested/data.bin")), 0o644);
        assert!(!out.path().join(".git").exists());
        assert!(!out.path().join("lib_link.rs").is_symlink());

        // Freezing the same tree again uploads nothing and yields the same id.
        let again = store.freeze(ws.path(), &FreezeRules::default()).await?;
        assert_eq!(again.id, outcome.id);
        assert_eq!((again.blobs_uploaded, again.bytes_uploaded), (0, 0));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn refreeze_after_one_change_uploads_one_blob() -> Result<()> {
    bounded(async {
        let (_server, _bus, store) = nats_and_store().await?;
        let ws = sample_workspace();
        let first = store.freeze(ws.path(), &FreezeRules::default()).await?;
        write(
            ws.path(),
            "src/lib.rs",
            b"pub fn f() { changed() }\n",
            0o644,
        );
        fs::remove_file(ws.path().join("lib_link.rs"))?; // else the link would change too
        let second = store.freeze(ws.path(), &FreezeRules::default()).await?;
        assert_ne!(first.id, second.id);
        assert_eq!(second.blobs_uploaded, 1);
        assert_eq!(
            second.bytes_uploaded,
            b"pub fn f() { changed() }\n".len() as u64
        );

        // A mode-only change uploads no blob but is a different snapshot.
        fs::set_permissions(
            ws.path().join("README.md"),
            fs::Permissions::from_mode(0o755),
        )?;
        let third = store.freeze(ws.path(), &FreezeRules::default()).await?;
        assert_ne!(third.id, second.id);
        assert_eq!(third.blobs_uploaded, 0);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn corrupted_or_missing_blob_is_an_integrity_violation() -> Result<()> {
    bounded(async {
        let (_server, bus, store) = nats_and_store().await?;
        let ws = tempfile::tempdir()?;
        write(ws.path(), "a.txt", b"original content", 0o644);
        write(ws.path(), "b.txt", b"other file", 0o644);
        let outcome = store.freeze(ws.path(), &FreezeRules::default()).await?;
        let sha = sha256_hex(b"original content");

        let bucket = bus.jetstream().get_object_store(SNAPSHOT_BUCKET).await?;
        let mut tampered: &[u8] = b"tampered content";
        bucket
            .put(format!("blob/{sha}").as_str(), &mut tampered)
            .await?;

        let out = tempfile::tempdir()?;
        let err = store
            .materialize(&outcome.id, out.path())
            .await
            .unwrap_err();
        assert!(
            matches!(&err, SnapshotError::Integrity { path, .. } if path == "a.txt"),
            "{err:?}"
        );
        assert!(matches!(
            store.blob(&sha).await,
            Err(SnapshotError::Integrity { .. })
        ));
        // Nothing half-written is left under the final name.
        assert!(!out.path().join("a.txt").exists());

        bucket.delete(format!("blob/{sha}").as_str()).await?;
        let out = tempfile::tempdir()?;
        let err = store
            .materialize(&outcome.id, out.path())
            .await
            .unwrap_err();
        assert!(
            matches!(&err, SnapshotError::Integrity { path, .. } if path == "a.txt"),
            "{err:?}"
        );
        assert!(!store.has_blob(&sha).await?);

        // A tampered manifest is caught by its id.
        let mut bogus: &[u8] = br#"{"v":1,"entries":[]}"#;
        bucket
            .put(format!("manifest/{}", outcome.id).as_str(), &mut bogus)
            .await?;
        let err = store.manifest(&outcome.id).await.unwrap_err();
        assert!(matches!(err, SnapshotError::Integrity { .. }), "{err:?}");

        let unknown = "0".repeat(64);
        let err = store.materialize(&unknown, out.path()).await.unwrap_err();
        assert!(
            matches!(err, SnapshotError::ManifestNotFound { .. }),
            "{err:?}"
        );
        let err = store.manifest("../etc").await.unwrap_err();
        assert!(matches!(err, SnapshotError::InvalidDigest(_)), "{err:?}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn freeze_refuses_escaping_symlinks_and_bad_paths() -> Result<()> {
    bounded(async {
        let (_server, _bus, store) = nats_and_store().await?;
        let outside = tempfile::tempdir()?;
        write(outside.path(), "secret.txt", b"secret", 0o644);
        let ws = tempfile::tempdir()?;
        write(ws.path(), "ok.txt", b"fine", 0o644);
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), ws.path().join("escape"))?;
        let err = store.freeze(ws.path(), &FreezeRules::default()).await.unwrap_err();
        assert!(
            matches!(&err, SnapshotError::Refused { path, reason: Refusal::SymlinkOutside { .. } } if path == "escape"),
            "{err:?}"
        );
        assert!(err.to_string().contains("escape"));

        fs::remove_file(ws.path().join("escape"))?;
        std::os::unix::fs::symlink("../../../../etc/passwd", ws.path().join("sneaky"))?;
        let err = store.freeze(ws.path(), &FreezeRules::default()).await.unwrap_err();
        assert!(
            matches!(&err, SnapshotError::Refused { path, .. } if path == "sneaky"),
            "{err:?}"
        );

        let cases: Vec<(&str, SnapshotPathError)> = vec![
            ("../x", SnapshotPathError::ParentComponent("../x".into())),
            ("a/../../x", SnapshotPathError::ParentComponent("a/../../x".into())),
            ("/etc/passwd", SnapshotPathError::Absolute("/etc/passwd".into())),
            ("a//b", SnapshotPathError::NotNormalized("a//b".into())),
        ];
        for (path, expected) in cases {
            let err = store
                .freeze_files(vec![(path.to_string(), 0o644, b"x".to_vec())])
                .await
                .unwrap_err();
            assert!(
                matches!(&err, SnapshotError::Refused { path: p, reason: Refusal::InvalidPath(e) } if p == path && *e == expected),
                "{path}: {err:?}"
            );
        }
        let dup = vec![("a".to_string(), 0o644, b"1".to_vec()), ("a".to_string(), 0o644, b"2".to_vec())];
        assert!(matches!(
            store.freeze_files(dup).await,
            Err(SnapshotError::Refused { reason: Refusal::InvalidPath(SnapshotPathError::Duplicate(_)), .. })
        ));
        // `a` as a file and as a directory: refused before any upload, naming both.
        let both = vec![("a".to_string(), 0o644, b"1".to_vec()), ("a/b".to_string(), 0o644, b"2".to_vec())];
        let err = store.freeze_files(both).await.unwrap_err();
        assert!(
            matches!(&err, SnapshotError::Refused { path, reason: Refusal::InvalidPath(SnapshotPathError::FileAndDirectory { file, .. }) } if path == "a/b" && file == "a"),
            "{err:?}"
        );
        assert!(!err.is_retryable());
        Ok(())
    })
    .await
}

#[tokio::test]
async fn in_memory_freeze_matches_directory_freeze() -> Result<()> {
    bounded(async {
        let (_server, _bus, store) = nats_and_store().await?;
        let ws = tempfile::tempdir()?;
        write(ws.path(), "main.py", b"print(1)\n", 0o644);
        write(ws.path(), "bin/tool", b"#!/bin/sh\n", 0o750);
        let from_dir = store.freeze(ws.path(), &FreezeRules::default()).await?;
        let from_memory = store
            .freeze_files(vec![
                ("main.py".into(), 0o600, b"print(1)\n".to_vec()),
                ("bin/tool".into(), 0o700, b"#!/bin/sh\n".to_vec()),
            ])
            .await?;
        assert_eq!(from_dir.id, from_memory.id);
        assert_eq!(from_memory.blobs_uploaded, 0);

        let empty = store.freeze_empty().await?;
        assert_eq!(empty.id, Manifest::empty().id());
        let out = tempfile::tempdir()?;
        assert_eq!(
            store.materialize(&empty.id, out.path()).await?,
            Manifest::empty()
        );

        let sha = store.put_bytes(b"a log line\n").await?;
        assert_eq!(sha, sha256_hex(b"a log line\n"));
        assert!(store.has_blob(&sha).await?);
        assert_eq!(store.get_bytes(&sha).await?, b"a log line\n");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn materialize_refuses_to_write_through_symlinks() -> Result<()> {
    bounded(async {
        let (_server, _bus, store) = nats_and_store().await?;
        let outcome = store
            .freeze_files(vec![("dir/file.txt".into(), 0o644, b"payload".to_vec())])
            .await?;
        let victim = tempfile::tempdir()?;
        let dest = tempfile::tempdir()?;
        std::os::unix::fs::symlink(victim.path(), dest.path().join("dir"))?;
        let err = store
            .materialize(&outcome.id, dest.path())
            .await
            .unwrap_err();
        assert!(
            matches!(err, SnapshotError::UnsafeDestination { .. }),
            "{err:?}"
        );
        assert!(fs::read_dir(victim.path())?.next().is_none());
        Ok(())
    })
    .await
}

/// A freeze that reuses a blob stored longer ago than `BLOB_REFRESH_AFTER` writes its metadata
/// again, dated now, so a snapshot GC running beside the freeze keeps it; it uploads no bytes.
#[tokio::test]
async fn a_freeze_reusing_an_old_blob_makes_it_young_again() -> Result<()> {
    bounded(async {
        let (_server, bus, store) = nats_and_store().await?;
        let ws = sample_workspace();
        let first = store.freeze(ws.path(), &FreezeRules::default()).await?;
        let readme = first
            .manifest
            .entries
            .iter()
            .find(|e| e.path == "README.md")
            .map(|e| blob_object_name(&e.sha256))
            .ok_or_else(|| anyhow::anyhow!("README.md in the manifest"))?;
        let two_days = std::time::Duration::from_secs(48 * 3600);
        assert!(two_days > BLOB_REFRESH_AFTER);
        date_back(bus.jetstream(), SNAPSHOT_BUCKET, &readme, two_days).await?;
        let bucket = bus.jetstream().get_object_store(SNAPSHOT_BUCKET).await?;
        let modified = |info: async_nats::jetstream::object_store::ObjectInfo| {
            info.modified
                .ok_or_else(|| anyhow::anyhow!("no time on {}", info.name))
        };
        let dated = modified(bucket.info(&readme).await?)?;

        let again = store.freeze(ws.path(), &FreezeRules::default()).await?;
        assert_eq!(again.id, first.id);
        assert_eq!((again.blobs_uploaded, again.bytes_uploaded), (0, 0));
        let now = modified(bucket.info(&readme).await?)?;
        assert!(
            now - dated > time::Duration::hours(47),
            "the reused blob is still dated {dated} (now {now})"
        );
        assert_eq!(
            store.blob(&readme["blob/".len()..]).await?,
            fs::read(ws.path().join("README.md"))?
        );
        Ok(())
    })
    .await
}
