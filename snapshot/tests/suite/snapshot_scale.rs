//! Snapshots at scale and over time: paged manifests, the stat cache, garbage collection,
//! the evidence bucket, binding an existing consumer.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Result;
use loopgate_protocol::snapshot::sha256_hex;
use loopgate_protocol::subjects::SNAPSHOT_BUCKET;
use loopgate_snapshot::manifests::PAGED_MIN_ENTRIES;
use loopgate_snapshot::{FreezeRules, GcRefusal, GcRoots, SnapshotError, SnapshotStore, StatCache};
use loopgate_transport::{BusError, Work};

use crate::{bounded, nats_and_store, write};

/// A tree of `n` small files in nested directories.
fn big_workspace(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..n {
        let rel = format!("pkg{}/mod{}/file{i:05}.txt", i % 7, i % 13);
        write(dir.path(), &rel, format!("content {i}\n").as_bytes(), 0o644);
    }
    dir
}

#[tokio::test]
async fn large_manifests_are_paged_and_a_one_file_change_stays_small() -> Result<()> {
    bounded(async {
        let (_server, _bus, store) = nats_and_store().await?;
        let n = PAGED_MIN_ENTRIES * 12;
        let ws = big_workspace(n);
        let mut cache = StatCache::new();
        let first = store
            .freeze_cached(ws.path(), &FreezeRules::default(), &mut cache)
            .await?;
        assert_eq!(first.files, n);
        assert_eq!(first.files_hashed, n);
        assert!(first.manifest_bytes_uploaded > 0);
        let (manifest, pages) = store.manifest_with_pages(&first.id).await?;
        assert_eq!(manifest, *first.manifest);
        assert!(pages.len() > 4, "{} pages", pages.len());

        // Let the files settle past the stat cache's racy window, then change one.
        tokio::time::sleep(Duration::from_millis(250)).await;
        let freeze_again = store
            .freeze_cached(ws.path(), &FreezeRules::default(), &mut cache)
            .await?;
        assert_eq!(freeze_again.id, first.id);
        write(ws.path(), "pkg3/mod5/file00031.txt", b"changed\n", 0o644);
        let second = store
            .freeze_cached(ws.path(), &FreezeRules::default(), &mut cache)
            .await?;
        assert_ne!(second.id, first.id);
        assert_eq!(second.files_hashed, 1);
        assert_eq!((second.blobs_uploaded, second.bytes_uploaded), (1, 8));
        assert!(
            second.manifest_bytes_uploaded < first.manifest_bytes_uploaded / 3,
            "{} vs {}",
            second.manifest_bytes_uploaded,
            first.manifest_bytes_uploaded
        );

        // A fresh materialize + cached freeze of the copy re-hashes nothing it wrote long ago.
        let out = tempfile::tempdir()?;
        let mut copy_cache = StatCache::new();
        let materialized = store
            .materialize_cached(&second.id, out.path(), &mut copy_cache)
            .await?;
        assert_eq!(materialized, *second.manifest);
        tokio::time::sleep(Duration::from_millis(250)).await;
        let refrozen = store
            .freeze_cached(out.path(), &FreezeRules::default(), &mut copy_cache)
            .await?;
        assert_eq!(refrozen.id, second.id);
        assert_eq!(
            refrozen.blobs_uploaded + refrozen.manifest_bytes_uploaded as usize,
            0
        );
        assert!(refrozen.files_hashed < n / 10, "{}", refrozen.files_hashed);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_forged_or_missing_group_is_an_integrity_violation_and_the_earlier_form_still_reads(
) -> Result<()> {
    bounded(async {
        let (_server, bus, store) = nats_and_store().await?;
        let ws = big_workspace(PAGED_MIN_ENTRIES * 40);
        let outcome = store.freeze(ws.path(), &FreezeRules::default()).await?;
        let (_, objects) = store.manifest_with_objects(&outcome.id).await?;
        let (_, pages) = store.manifest_with_pages(&outcome.id).await?;
        let groups: Vec<&String> = objects.iter().filter(|o| !pages.contains(o)).collect();
        assert!(groups.len() >= 2, "{} groups", groups.len());
        let bucket = bus.jetstream().get_object_store(SNAPSHOT_BUCKET).await?;
        // A missing group, then a well-formed group listing other pages under the first
        // group's name.
        bucket
            .delete(format!("blob/{}", groups[1]).as_str())
            .await?;
        match store.manifest(&outcome.id).await {
            Err(SnapshotError::Integrity { path, reason }) => {
                assert!(path.contains("manifest group"), "{path}");
                assert!(reason.contains("missing"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        let other = serde_json::to_vec(&pages[..2])?;
        bucket
            .put(
                format!("blob/{}", groups[0]).as_str(),
                &mut other.as_slice(),
            )
            .await?;
        match store.manifest(&outcome.id).await {
            Err(SnapshotError::Integrity { path, .. }) => {
                assert!(path.contains(groups[0].as_str()), "{path}")
            }
            other => panic!("{other:?}"),
        }

        // A head of the earlier form (every page digest in the head) still reads.
        let js = bus.jetstream();
        let planted =
            loopgate_test_support::plant_paged_manifest(js, SNAPSHOT_BUCKET, 2, 2, 1).await?;
        let manifest = store.manifest(&planted).await?;
        assert_eq!(
            manifest.entries.len(),
            2 * loopgate_test_support::PAGE_ENTRIES
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn tampered_manifest_page_is_an_integrity_violation() -> Result<()> {
    bounded(async {
        let (_server, bus, store) = nats_and_store().await?;
        let ws = big_workspace(PAGED_MIN_ENTRIES + 500);
        let outcome = store.freeze(ws.path(), &FreezeRules::default()).await?;
        let (_, pages) = store.manifest_with_pages(&outcome.id).await?;
        let bucket = bus.jetstream().get_object_store(SNAPSHOT_BUCKET).await?;
        // A valid page of other entries under the first page's name.
        let mut forged: &[u8] = b"[]";
        bucket
            .put(format!("blob/{}", pages[0]).as_str(), &mut forged)
            .await?;
        let err = store.manifest(&outcome.id).await.unwrap_err();
        assert!(matches!(err, SnapshotError::Integrity { .. }), "{err:?}");
        bucket.delete(format!("blob/{}", pages[1]).as_str()).await?;
        let out = tempfile::tempdir()?;
        let err = store
            .materialize(&outcome.id, out.path())
            .await
            .unwrap_err();
        assert!(matches!(err, SnapshotError::Integrity { .. }), "{err:?}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn garbage_collection_keeps_what_live_runs_reference() -> Result<()> {
    bounded(async {
        let (_server, _bus, store) = nats_and_store().await?;
        let ws = tempfile::tempdir()?;
        write(ws.path(), "shared.txt", b"shared by both", 0o644);
        write(ws.path(), "only_a.txt", b"only in a", 0o644);
        let live = store.freeze(ws.path(), &FreezeRules::default()).await?;
        std::fs::remove_file(ws.path().join("only_a.txt"))?;
        write(ws.path(), "only_b.txt", b"only in b", 0o644);
        let dead = store.freeze(ws.path(), &FreezeRules::default()).await?;
        let log = store.put_bytes(b"a check's output").await?;
        let stray = store.put_bytes(b"nobody's").await?;

        // Young objects survive whatever the roots say.
        let roots = GcRoots {
            snapshots: BTreeSet::from([live.id.clone()]),
            blobs: BTreeSet::from([log.clone()]),
            runs: 1,
        };
        let report = store
            .collect_garbage(&roots, Duration::from_secs(3600))
            .await?;
        assert_eq!((report.manifests_deleted, report.blobs_deleted), (0, 0));

        // A run store with no run (a wiped Redis) sweeps nothing, however old the objects.
        let wiped = GcRoots::default();
        let report = store.collect_garbage(&wiped, Duration::ZERO).await?;
        assert_eq!(report.refused, Some(GcRefusal::NoRunsButOldSnapshots));
        assert_eq!((report.manifests_deleted, report.blobs_deleted), (0, 0));
        assert!(store.has_blob(&stray).await?);

        let report = store.collect_garbage(&roots, Duration::ZERO).await?;
        assert_eq!(report.refused, None);
        assert_eq!(report.manifests_deleted, 1);
        assert_eq!(report.blobs_deleted, 2, "{report:?}");
        assert_eq!(
            report.bytes_freed,
            (b"only in b".len() + b"nobody's".len()) as u64
        );
        assert!(matches!(
            store.manifest(&dead.id).await,
            Err(SnapshotError::ManifestNotFound { .. })
        ));
        assert!(!store.has_blob(&stray).await?);
        assert!(store.has_blob(&log).await?);
        let out = tempfile::tempdir()?;
        store.materialize(&live.id, out.path()).await?;
        assert_eq!(
            std::fs::read(out.path().join("shared.txt"))?,
            b"shared by both"
        );

        // A root that no longer exists is counted, not fatal.
        let gone = GcRoots {
            snapshots: BTreeSet::from([dead.id.clone(), live.id.clone()]),
            blobs: BTreeSet::new(),
            runs: 2,
        };
        let report = store.collect_garbage(&gone, Duration::ZERO).await?;
        assert_eq!(report.roots_missing, 1);
        assert!(store.has_blob(&sha256_hex(b"only in a")).await?);

        // A paged manifest keeps its pages and its groups.
        let big = big_workspace(PAGED_MIN_ENTRIES * 40);
        let paged = store.freeze(big.path(), &FreezeRules::default()).await?;
        let roots = GcRoots {
            snapshots: BTreeSet::from([paged.id.clone()]),
            blobs: BTreeSet::new(),
            runs: 1,
        };
        store.collect_garbage(&roots, Duration::ZERO).await?;
        assert_eq!(store.manifest(&paged.id).await?, *paged.manifest);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn evidence_bucket_is_separate_and_consumers_can_be_bound_without_creating() -> Result<()> {
    bounded(async {
        let (_server, bus, snapshots) = nats_and_store().await?;
        let evidence =
            SnapshotStore::evidence_from_jetstream(bus.jetstream(), bus.request_timeout()).await?;
        let digest = evidence.put_bytes(b"check output").await?;
        assert_eq!(evidence.get_bytes(&digest).await?, b"check output");
        assert!(!snapshots.has_blob(&digest).await?);

        // ensure_topology created the `audit` durable; binding fails once it is gone and
        // works again after the topology is ensured.
        bus.bind_work_consumer(Work::Audit).await?;
        bus.jetstream()
            .delete_consumer_from_stream(Work::Audit.durable_name(), Work::Audit.stream_name())
            .await?;
        let err = bus.bind_work_consumer(Work::Audit).await.unwrap_err();
        assert!(matches!(err, BusError::Consumer(_)), "{err:?}");
        bus.ensure_topology().await?;
        let mut bound = bus.bind_work_consumer(Work::Audit).await?;
        assert!(bound.next(Duration::from_millis(200)).await?.is_none());
        Ok(())
    })
    .await
}
