//! Manifests a worker verified or wrote are known by their head: a later read of the same head
//! is put together from held pages without checking the whole again; a head changed in the
//! store under the same id is read and checked in full, and a forged one refused.

use anyhow::Result;
use loopgate_protocol::subjects::SNAPSHOT_BUCKET;
use loopgate_snapshot::{manifest_object_name, FreezeRules, SnapshotError, WorkspaceCache};
use loopgate_test_support::put_object;

use crate::{bounded, nats_and_store, write};

/// A paged tree of `n` files; `variant` changes one of them.
fn tree(n: usize, variant: u8) -> Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    for i in 0..n {
        let body = if i == 7 && variant == 1 {
            "fn changed() {}\n".to_string()
        } else {
            format!("fn f{i}() {{}}\n")
        };
        write(
            dir.path(),
            &format!("src/m{}/f{i}.rs", i % 40),
            body.as_bytes(),
            0o644,
        );
    }
    Ok(dir)
}

#[tokio::test]
async fn a_known_head_is_read_from_held_pages_and_a_changed_one_checked_again() -> Result<()> {
    bounded(async {
        let (_server, bus, store) = nats_and_store().await?;
        let rules = FreezeRules::default();
        let a = store.freeze(tree(1500, 0)?.path(), &rules).await?;
        let b = store.freeze(tree(1500, 1)?.path(), &rules).await?;
        assert!(a.pages.len() > 4, "paged: {} pages", a.pages.len());
        let work = tempfile::tempdir()?;
        let cache = WorkspaceCache::open(&work.path().join("cache"), 1 << 30)?;

        // First read: fetched and checked in full, then known.
        let (first, _) = store
            .materialize_warm(&a.id, &work.path().join("1"), &cache)
            .await?;
        assert_eq!(cache.stats().manifests_known, 0);
        assert_eq!(first, *a.manifest);
        let (again, _) = store
            .materialize_warm(&a.id, &work.path().join("2"), &cache)
            .await?;
        assert_eq!(cache.stats().manifests_known, 1, "the same head, known");
        assert_eq!(again, *a.manifest);

        // What this process froze is known from the write.
        let dir = work.path().join("2");
        write(&dir, "src/m1/new.rs", b"fn new() {}\n", 0o644);
        let frozen = store.freeze_warm(&dir, &rules, &cache).await?;
        assert!(cache.check_in(&dir).await?);
        let (read, _) = store
            .materialize_warm(&frozen.id, &work.path().join("3"), &cache)
            .await?;
        assert_eq!(cache.stats().manifests_known, 2, "written here, known");
        assert_eq!(read, *frozen.manifest);

        // A head changed under a known id (here: b's head stored as a's) is checked in full and
        // refused; the pages a's known head stands for are not taken instead.
        let js = bus.jetstream();
        let mut b_head = Vec::new();
        let mut object = js
            .get_object_store(SNAPSHOT_BUCKET)
            .await?
            .get(manifest_object_name(&b.id))
            .await?;
        tokio::io::AsyncReadExt::read_to_end(&mut object, &mut b_head).await?;
        put_object(js, SNAPSHOT_BUCKET, &manifest_object_name(&a.id), &b_head).await?;
        let err = store
            .materialize_warm(&a.id, &work.path().join("4"), &cache)
            .await
            .unwrap_err();
        assert!(matches!(err, SnapshotError::Integrity { .. }), "{err}");
        assert_eq!(cache.stats().manifests_known, 2);
        Ok(())
    })
    .await
}
