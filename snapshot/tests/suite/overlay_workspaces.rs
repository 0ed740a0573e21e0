//! Overlay workspaces: an episode's workspace mounted over a sealed tree of the cache, frozen
//! from its upper layer alone. Each test says SKIP where this process may not mount overlays
//! (only a root worker mounts them; elsewhere workers copy, as before).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use anyhow::Result;
use loopgate_snapshot::{overlay, FreezeRules, SnapshotError, WorkspaceCache};

use crate::{bounded, nats_and_store, write};

fn overlays_here(work: &Path) -> bool {
    match overlay::probe(work) {
        Ok(()) => true,
        Err(why) => {
            assert!(
                !rustix::process::geteuid().is_root(),
                "a root process could not mount an overlay: {why}"
            );
            #[allow(clippy::print_stderr)]
            {
                eprintln!("SKIP overlay workspaces: {why}");
            }
            false
        }
    }
}

fn base_tree(root: &Path) {
    write(root, "README.md", b"# hello\n", 0o644);
    write(root, "src/lib.rs", b"pub fn f() {}\n", 0o644);
    write(root, "src/deep/nested/data.bin", &[0u8, 1, 2, 255], 0o644);
    write(root, "scripts/run.sh", b"#!/bin/sh\necho hi\n", 0o755);
    write(root, "old/a.txt", b"a", 0o644);
    write(root, "old/b/c.txt", b"c", 0o644);
    write(root, "was-file", b"f", 0o644);
    write(root, "was-dir/x", b"x", 0o644);
    write(root, "moved/m.txt", b"m", 0o644);
    write(root, "plain.txt", b"plain", 0o644);
    // Enough untouched files that a changed tree is still the closest start for the next.
    for i in 0..40 {
        write(
            root,
            &format!("many/f{i}.txt"),
            format!("{i}").as_bytes(),
            0o644,
        );
    }
}

fn sh(dir: &Path, script: &str) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every kind of change an agent makes, through the merged tree: the freeze from the upper
/// layer is the snapshot a full walk of the merged tree gives, and the lower is untouched.
#[tokio::test]
async fn a_freeze_of_the_upper_layer_is_the_full_walks_snapshot() -> Result<()> {
    bounded(async {
        let work = tempfile::tempdir()?;
        if !overlays_here(work.path()) {
            return Ok(());
        }
        let (_server, _bus, store) = nats_and_store().await?;
        let src = tempfile::tempdir()?;
        base_tree(src.path());
        let rules = FreezeRules::default();
        let base = store.freeze(src.path(), &rules).await?.id;
        let cache = WorkspaceCache::open(&work.path().join("cache"), 1 << 24)?;
        let merged = work.path().join("ep");
        fs::create_dir(&merged)?;
        let (ws, report) = store
            .materialize_overlay(&base, &merged, &work.path().join("layers"), &cache, None)
            .await?;
        assert!(!report.reused_tree);
        sh(
            &merged,
            "echo changed >> README.md && echo new > src/new.rs && rm plain.txt \
             && rm -r old && rm was-file && mkdir was-file && echo in > was-file/in \
             && rm -r was-dir && echo now-a-file > was-dir && chmod +x src/lib.rs \
             && mv moved renamed && mkdir -p target/debug && echo junk > target/debug/o \
             && ln -s src/new.rs link.rs && ln scripts/run.sh hard.sh \
             && mkdir -p fresh/deeper && echo d > fresh/deeper/d.txt && rm src/deep/nested/data.bin",
        );
        let frozen = store.freeze_overlay(&ws, &rules, &cache).await?;
        let full = store.freeze(&merged, &rules).await?;
        assert_eq!(frozen.manifest, full.manifest);
        assert_eq!(frozen.id, full.id);
        // Only what the upper layer holds is read: the 10 files changed, added, moved (a
        // renamed lower directory is copied up) or linked (a hard link copies its target up).
        assert_eq!(frozen.files_hashed, 10);
        assert_eq!(store.freeze(ws.lower(), &rules).await?.id, base, "lower changed");
        ws.close().await?;
        assert!(!work.path().join("layers").exists());
        assert_eq!(fs::read_dir(&merged)?.count(), 0, "unmounted");

        // The next episode starts from the candidate: the base's sealed tree, brought to it.
        let (next, report) = store
            .materialize_overlay(&frozen.id, &merged, &work.path().join("layers"), &cache, None)
            .await?;
        assert!(report.reused_tree && report.files_rehashed == 0, "{report:?}");
        assert_eq!(store.freeze(&merged, &rules).await?.id, frozen.id);
        // An unchanged workspace freezes to its base without hashing anything.
        let same = store.freeze_overlay(&next, &rules, &cache).await?;
        assert_eq!((same.id.as_str(), same.files_hashed), (frozen.id.as_str(), 0));
        next.close().await?;
        Ok(())
    })
    .await
}

/// Two overlays on one base share its lower tree; each sees only its own changes.
#[tokio::test]
async fn overlays_on_one_base_share_the_lower_and_not_their_changes() -> Result<()> {
    bounded(async {
        let work = tempfile::tempdir()?;
        if !overlays_here(work.path()) {
            return Ok(());
        }
        let (_server, _bus, store) = nats_and_store().await?;
        let src = tempfile::tempdir()?;
        base_tree(src.path());
        let rules = FreezeRules::default();
        let base = store.freeze(src.path(), &rules).await?.id;
        let cache = WorkspaceCache::open(&work.path().join("cache"), 1 << 24)?;
        let (one, two) = (work.path().join("one"), work.path().join("two"));
        fs::create_dir(&one)?;
        fs::create_dir(&two)?;
        let (a, _) = store
            .materialize_overlay(&base, &one, &work.path().join("l1"), &cache, None)
            .await?;
        let (b, shared) = store
            .materialize_overlay(&base, &two, &work.path().join("l2"), &cache, None)
            .await?;
        assert!(shared.reused_tree && shared.files_written == 0);
        assert_eq!(a.lower(), b.lower());
        fs::write(one.join("README.md"), b"one")?;
        assert_eq!(fs::read(two.join("README.md"))?, b"# hello\n");
        let frozen_b = store.freeze_overlay(&b, &rules, &cache).await?;
        assert_eq!(frozen_b.id, base);
        assert_ne!(store.freeze_overlay(&a, &rules, &cache).await?.id, base);
        drop(a);
        b.close().await?;
        assert_eq!(fs::read_dir(&one)?.count(), 0, "dropping unmounts");
        Ok(())
    })
    .await
}

/// What a freeze refuses in a walk it refuses in the upper layer: a fifo, a symlink out.
#[tokio::test]
async fn the_upper_layer_is_held_to_the_walks_refusals() -> Result<()> {
    bounded(async {
        let work = tempfile::tempdir()?;
        if !overlays_here(work.path()) {
            return Ok(());
        }
        let (_server, _bus, store) = nats_and_store().await?;
        let src = tempfile::tempdir()?;
        base_tree(src.path());
        let rules = FreezeRules::default();
        let base = store.freeze(src.path(), &rules).await?.id;
        let cache = WorkspaceCache::open(&work.path().join("cache"), 1 << 24)?;
        for (i, script) in ["mkfifo pipe", "ln -s /etc/passwd out"].iter().enumerate() {
            let merged = work.path().join(format!("ep{i}"));
            fs::create_dir(&merged)?;
            let (ws, _) = store
                .materialize_overlay(
                    &base,
                    &merged,
                    &work.path().join(format!("l{i}")),
                    &cache,
                    None,
                )
                .await?;
            sh(&merged, script);
            let upper_err = store.freeze_overlay(&ws, &rules, &cache).await.unwrap_err();
            let walk_err = store.freeze(&merged, &rules).await.unwrap_err();
            assert_eq!(upper_err.to_string(), walk_err.to_string(), "{script}");
            ws.close().await?;
        }
        // The size cap counts the lower files the change keeps, as a walk counts them.
        let tight = FreezeRules {
            max_total_bytes: store.freeze(src.path(), &rules).await?.bytes_total,
            ..FreezeRules::default()
        };
        let merged = work.path().join("ep-cap");
        fs::create_dir(&merged)?;
        let (ws, _) = store
            .materialize_overlay(&base, &merged, &work.path().join("l-cap"), &cache, None)
            .await?;
        sh(&merged, "echo more >> README.md");
        let upper_err = store.freeze_overlay(&ws, &tight, &cache).await.unwrap_err();
        assert!(
            matches!(upper_err, SnapshotError::TotalTooLarge { .. }),
            "{upper_err}"
        );
        let walk_err = store.freeze(&merged, &tight).await.unwrap_err();
        assert_eq!(upper_err.to_string(), walk_err.to_string());
        ws.close().await?;
        let _ = fs::set_permissions(work.path(), fs::Permissions::from_mode(0o755));
        Ok(())
    })
    .await
}

/// A worker killed mid-episode leaves its overlay mounted; the next start detaches it (and
/// only the overlays over its own cache).
#[tokio::test]
async fn overlays_a_killed_worker_left_are_detached_at_the_next_start() -> Result<()> {
    bounded(async {
        let work = tempfile::tempdir()?;
        if !overlays_here(work.path()) {
            return Ok(());
        }
        let (_server, _bus, store) = nats_and_store().await?;
        let src = tempfile::tempdir()?;
        base_tree(src.path());
        let base = store.freeze(src.path(), &FreezeRules::default()).await?.id;
        let work_dir = work.path().canonicalize()?;
        let cache = WorkspaceCache::open(&work_dir.join("cache"), 1 << 24)?;
        let merged = work_dir.join("ep");
        fs::create_dir(&merged)?;
        let (ws, _) = store
            .materialize_overlay(&base, &merged, &work_dir.join("layers"), &cache, None)
            .await?;
        // Killed: nothing unmounts it.
        std::mem::forget(ws);
        assert!(merged.join("README.md").exists());
        assert_eq!(
            overlay::unmount_stale(&work_dir, &work_dir.join("other-cache")),
            0
        );
        assert_eq!(
            overlay::unmount_stale(&work_dir, &work_dir.join("cache")),
            1
        );
        assert_eq!(fs::read_dir(&merged)?.count(), 0);
        Ok(())
    })
    .await
}
