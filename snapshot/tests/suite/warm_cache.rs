//! Warm workspaces: materialize from a kept tree plus the manifest difference, cache hits
//! verified, eviction, checked-out trees never shared, and freeze by stat cache.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use loopgate_snapshot::stat_cache::{wall_clock_ns, RACY_WINDOW};
use loopgate_snapshot::{FreezeRules, SnapshotError, SnapshotStore, WorkspaceCache};

use crate::{bounded, nats_and_store, write};

/// Ten files; `variant` changes `src/f3.rs`, adds one file and removes another.
fn tree(root: &Path, variant: u8) {
    for i in 0..10 {
        if variant == 1 && i == 9 {
            continue;
        }
        write(
            root,
            &format!("src/f{i}.rs"),
            format!("fn f{i}() {{}}\n").as_bytes(),
            0o644,
        );
    }
    if variant == 1 {
        write(root, "src/f3.rs", b"fn f3() { changed() }\n", 0o644);
        write(root, "docs/new.md", b"# new\n", 0o644);
    }
}

async fn freeze_variant(store: &SnapshotStore, variant: u8) -> Result<String> {
    let dir = tempfile::tempdir()?;
    tree(dir.path(), variant);
    Ok(store.freeze(dir.path(), &FreezeRules::default()).await?.id)
}

/// The snapshot `dir` holds, frozen without any cache.
async fn holds(store: &SnapshotStore, dir: &Path) -> Result<String> {
    Ok(store.freeze(dir, &FreezeRules::default()).await?.id)
}

#[tokio::test]
async fn warm_materialize_writes_only_the_difference() -> Result<()> {
    bounded(async {
        let (_server, _bus, store) = nats_and_store().await?;
        let (a, b) = (
            freeze_variant(&store, 0).await?,
            freeze_variant(&store, 1).await?,
        );
        let work = tempfile::tempdir()?;
        let cache = WorkspaceCache::open(&work.path().join("cache"), 1 << 20)?;

        let first = work.path().join("one");
        let (_, cold) = store.materialize_warm(&a, &first, &cache).await?;
        assert!(!cold.reused_tree);
        assert_eq!((cold.files_written, cold.blobs_downloaded), (10, 10));
        // Leftovers an agent might leave: an ignored build dir, a symlink out, a stray file.
        write(&first, "target/debug/junk", b"junk", 0o644);
        write(&first, "stray.txt", b"stray", 0o644);
        std::os::unix::fs::symlink("/etc", first.join("escape")).unwrap();
        assert!(cache.check_in(&first).await?);
        assert!(!first.exists());

        let second = work.path().join("two");
        let (manifest, warm) = store.materialize_warm(&b, &second, &cache).await?;
        assert!(warm.reused_tree);
        assert_eq!(warm.files_written, 2, "{warm:?}");
        assert_eq!(warm.files_kept, 8, "{warm:?}");
        assert_eq!(manifest.id(), b);
        assert!(!second.join("target").exists());
        assert!(!second.join("stray.txt").exists());
        assert!(second.join("escape").symlink_metadata().is_err());
        assert_eq!(holds(&store, &second).await?, b);
        assert_eq!(cache.stats().trees_reused, 1);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_corrupted_cached_blob_is_caught() -> Result<()> {
    bounded(async {
        let (_server, _bus, store) = nats_and_store().await?;
        let (a, b) = (
            freeze_variant(&store, 0).await?,
            freeze_variant(&store, 1).await?,
        );
        let work = tempfile::tempdir()?;
        let cache = WorkspaceCache::open(&work.path().join("cache"), 1 << 20)?;
        let dir = work.path().join("ws");
        // a (cold) -> b (caches b's new blobs) -> a -> b again: b's blobs come from the cache.
        for id in [&a, &b, &a] {
            store.materialize_warm(id, &dir, &cache).await?;
            assert!(cache.check_in(&dir).await?);
        }
        let changed = loopgate_protocol::snapshot::sha256_hex(b"fn f3() { changed() }\n");
        let cached = cache.root().join("blobs").join(&changed);
        assert!(cached.is_file(), "b's blob is cached");
        assert_eq!(
            cached.metadata()?.permissions().mode() & 0o222,
            0,
            "read only"
        );
        fs::set_permissions(&cached, fs::Permissions::from_mode(0o644))?;
        fs::write(&cached, b"fn f3() { evil() }\n")?;

        let err = store.materialize_warm(&b, &dir, &cache).await.unwrap_err();
        assert!(
            matches!(err, SnapshotError::Integrity { ref path, .. } if path == "src/f3.rs"),
            "{err:?}"
        );
        assert!(!err.is_retryable());
        assert_eq!(cache.stats().blobs_corrupt, 1);
        assert!(!cached.exists(), "the corrupt blob is dropped");

        // The next try downloads it again.
        let fresh = work.path().join("fresh");
        store.materialize_warm(&b, &fresh, &cache).await?;
        assert_eq!(holds(&store, &fresh).await?, b);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_evicted_tree_is_rebuilt() -> Result<()> {
    bounded(async {
        let (_server, _bus, store) = nats_and_store().await?;
        let a = freeze_variant(&store, 0).await?;
        let big_dir = tempfile::tempdir()?;
        write(big_dir.path(), "big.bin", &vec![7u8; 4096], 0o644);
        let big = store
            .freeze(big_dir.path(), &FreezeRules::default())
            .await?
            .id;
        let work = tempfile::tempdir()?;
        // Room for one small tree or the big one, not both.
        let cache = WorkspaceCache::open(&work.path().join("cache"), 100_000)?;

        // Two trees at once: `a`'s is checked in first, so it is the one evicted.
        let (dir, other) = (work.path().join("a"), work.path().join("big"));
        store.materialize_warm(&a, &dir, &cache).await?;
        store.materialize_warm(&big, &other, &cache).await?;
        assert!(cache.check_in(&dir).await?);
        assert!(cache.check_in(&other).await?);
        let stats = cache.stats();
        assert_eq!((stats.trees_kept, stats.trees_evicted), (1, 1), "{stats:?}");
        assert!(stats.bytes_held <= 100_000, "{stats:?}");
        let trees = fs::read_dir(cache.root().join("trees"))?.count();
        assert_eq!(trees, 1, "the evicted tree is deleted");

        let rebuilt = work.path().join("rebuilt");
        store.materialize_warm(&a, &rebuilt, &cache).await?;
        assert_eq!(holds(&store, &rebuilt).await?, a);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn concurrent_materializes_never_share_a_tree() -> Result<()> {
    bounded(async {
        let (_server, _bus, store) = nats_and_store().await?;
        let a = freeze_variant(&store, 0).await?;
        let work = tempfile::tempdir()?;
        let cache = WorkspaceCache::open(&work.path().join("cache"), 1 << 20)?;
        let seed = work.path().join("seed");
        store.materialize_warm(&a, &seed, &cache).await?;
        assert!(cache.check_in(&seed).await?);

        let (one, two) = (work.path().join("one"), work.path().join("two"));
        let (r1, r2) = tokio::join!(
            store.materialize_warm(&a, &one, &cache),
            store.materialize_warm(&a, &two, &cache)
        );
        let (r1, r2) = (r1?.1, r2?.1);
        assert_eq!(
            u8::from(r1.reused_tree) + u8::from(r2.reused_tree),
            1,
            "one kept tree, one taker"
        );
        fs::write(one.join("src/f0.rs"), b"written in one")?;
        assert_eq!(fs::read(two.join("src/f0.rs"))?, b"fn f0() {}\n");
        let ino = |p: &Path| std::os::unix::fs::MetadataExt::ino(&fs::metadata(p).unwrap());
        assert_ne!(ino(&one.join("src/f1.rs")), ino(&two.join("src/f1.rs")));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn freeze_warm_reads_only_what_changed() -> Result<()> {
    bounded(async {
        let (_server, _bus, store) = nats_and_store().await?;
        let a = freeze_variant(&store, 0).await?;
        let b = freeze_variant(&store, 1).await?;
        let work = tempfile::tempdir()?;
        let cache = WorkspaceCache::open(&work.path().join("cache"), 1 << 20)?;
        let dir = work.path().join("ws");
        store.materialize_warm(&a, &dir, &cache).await?;
        // Files written just before their hash was recorded are racy (git's racy clean): the
        // first freeze re-hashes them, once the clock is past the window (a condition on the
        // clock, not a guess), and records them settled.
        let settled = wall_clock_ns() + 2 * RACY_WINDOW.as_nanos() as i128;
        while wall_clock_ns() < settled {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let first = store
            .freeze_warm(&dir, &FreezeRules::default(), &cache)
            .await?;
        assert_eq!(first.id, a);
        fs::remove_file(dir.join("src/f9.rs"))?;
        write(&dir, "src/f3.rs", b"fn f3() { changed() }\n", 0o644);
        write(&dir, "docs/new.md", b"# new\n", 0o644);
        let frozen = store
            .freeze_warm(&dir, &FreezeRules::default(), &cache)
            .await?;
        assert_eq!(frozen.id, b);
        assert_eq!(
            frozen.files_hashed, 2,
            "only the two written files are read"
        );
        assert_eq!(frozen.blobs_uploaded, 0, "the store has them all");
        // Frozen, the directory holds b: checked in, it serves b with nothing to write.
        assert!(cache.check_in(&dir).await?);
        let again = work.path().join("again");
        let (_, report) = store.materialize_warm(&b, &again, &cache).await?;
        assert!(report.reused_tree);
        assert_eq!(report.files_written, 0, "{report:?}");
        Ok(())
    })
    .await
}

/// What the agent sandbox does before each command as a root worker (`AgentSandbox::grant`):
/// give every entry of the workspace it does not own yet to `owner`.
fn grant(dir: &Path, owner: (u32, u32)) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    for entry in walkdir::WalkDir::new(dir) {
        let entry = entry?;
        let meta = entry.path().symlink_metadata()?;
        if (meta.uid(), meta.gid()) != owner {
            std::os::unix::fs::chown(entry.path(), Some(owner.0), Some(owner.1))?;
        }
    }
    Ok(())
}

/// A tree materialized for the agent's user (`materialize_warm_as`) is its already: the
/// sandbox's chown before a command changes no ctime, and the freeze after a command re-hashes
/// only the file the command changed. As root, the same tree materialized for the worker
/// shows what that saves: the chown changes every file's ctime and the freeze re-reads all.
#[tokio::test]
async fn a_freeze_after_a_sandboxed_command_rehashes_only_what_it_changed() -> Result<()> {
    bounded(async {
        let (_server, _bus, store) = nats_and_store().await?;
        let a = freeze_variant(&store, 0).await?;
        let work = tempfile::tempdir()?;
        let me = {
            use std::os::unix::fs::MetadataExt;
            let meta = fs::metadata(work.path())?;
            (meta.uid(), meta.gid())
        };
        let agent = if me.0 == 0 { (65534, 65534) } else { me };
        // (materialized for the agent, files re-hashed by the freeze after the command)
        let mut cases = vec![(true, 1)];
        if me.0 == 0 {
            cases.push((false, 10));
        }
        for (index, (for_agent, want_hashed)) in cases.into_iter().enumerate() {
            let dir = work.path().join(format!("ws-{index}"));
            // A cache of its own: both trees are materialized cold.
            let cache = WorkspaceCache::open(&work.path().join(format!("cache-{index}")), 1 << 20)?;
            let owner = for_agent.then_some(agent);
            store.materialize_warm_as(&a, &dir, &cache, owner).await?;
            // Past the racy window (see `freeze_warm_reads_only_what_changed`), then a first
            // freeze records every file settled.
            let settled = wall_clock_ns() + 2 * RACY_WINDOW.as_nanos() as i128;
            while wall_clock_ns() < settled {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let rules = FreezeRules::default();
            assert_eq!(store.freeze_warm(&dir, &rules, &cache).await?.id, a);
            // The command: the sandbox gives the workspace to the agent, which changes a file.
            grant(&dir, agent)?;
            write(&dir, "src/f3.rs", b"fn f3() { changed() }\n", 0o644);
            let frozen = store.freeze_warm(&dir, &rules, &cache).await?;
            assert_ne!(frozen.id, a);
            assert_eq!(
                frozen.files_hashed, want_hashed,
                "materialized for the agent: {for_agent}"
            );
            assert!(cache.check_in(&dir).await?);
        }
        Ok(())
    })
    .await
}

/// A paged manifest (1,500 files): a warm materialize of a one-file change takes every page it
/// already holds from the cache and fetches only the changed ones, and the result is still
/// exactly the snapshot (checked against its id).
#[tokio::test]
async fn a_warm_materialize_fetches_only_the_manifest_pages_it_lacks() -> Result<()> {
    bounded(async {
        let (_server, _bus, store) = nats_and_store().await?;
        let source = tempfile::tempdir()?;
        for i in 0..1500 {
            write(
                source.path(),
                &format!("src/m{}/f{i}.rs", i % 40),
                format!("fn f{i}() {{}}\n").as_bytes(),
                0o644,
            );
        }
        let a = store.freeze(source.path(), &FreezeRules::default()).await?;
        assert!(a.pages.len() > 4, "paged: {} pages", a.pages.len());
        write(
            source.path(),
            "src/m7/f7.rs",
            b"fn f7() { changed() }\n",
            0o644,
        );
        let b = store.freeze(source.path(), &FreezeRules::default()).await?;
        let new_pages = b.pages.iter().filter(|p| !a.pages.contains(p)).count();
        assert_eq!(new_pages, 1, "one change, one page");

        let work = tempfile::tempdir()?;
        let cache = WorkspaceCache::open(&work.path().join("cache"), 1 << 30)?;
        let first = work.path().join("one");
        store.materialize_warm(&a.id, &first, &cache).await?;
        assert_eq!(cache.stats().page_hits, 0, "a cold cache holds no pages");
        assert!(cache.check_in(&first).await?);
        let second = work.path().join("two");
        let (manifest, report) = store.materialize_warm(&b.id, &second, &cache).await?;
        assert_eq!(
            cache.stats().page_hits,
            (b.pages.len() - new_pages) as u64,
            "every unchanged page from the cache"
        );
        assert_eq!(manifest.id(), b.id);
        assert_eq!(report.files_written, 1, "{report:?}");
        assert_eq!(holds(&store, &second).await?, b.id);
        // What a freeze wrote is held too: materializing it again fetches no page.
        let hits = cache.stats().page_hits;
        let frozen = store
            .freeze_warm(&second, &FreezeRules::default(), &cache)
            .await?;
        assert!(cache.check_in(&second).await?);
        store
            .materialize_warm(&frozen.id, &work.path().join("three"), &cache)
            .await?;
        assert_eq!(cache.stats().page_hits, hits + frozen.pages.len() as u64);
        Ok(())
    })
    .await
}
