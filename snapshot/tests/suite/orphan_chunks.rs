//! The collection purges chunks no object names (a writer cut off between its chunks and its
//! metadata), once older than the grace, and leaves every object's own chunks alone.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Result;
use futures::TryStreamExt;
use loopgate_snapshot::{FreezeRules, GcRoots, SnapshotStore};

use crate::{bounded, nats_and_store, write};

/// The chunk subjects the bucket's stream holds messages on.
async fn chunk_subjects(
    js: &async_nats::jetstream::Context,
    store: &SnapshotStore,
) -> Result<Vec<String>> {
    let stream = js.get_stream(format!("OBJ_{}", store.bucket())).await?;
    let subjects = stream
        .info_with_subjects(format!("$O.{}.C.>", store.bucket()))
        .await?
        .map_ok(|(subject, _)| subject)
        .try_collect()
        .await?;
    Ok(subjects)
}

#[tokio::test]
async fn the_collection_purges_chunks_no_object_names_once_old() -> Result<()> {
    bounded(async {
        let (_server, bus, store) = nats_and_store().await?;
        let js = bus.jetstream().clone();
        let ws = tempfile::tempdir()?;
        write(ws.path(), "kept.txt", b"kept by a live run", 0o644);
        let live = store.freeze(ws.path(), &FreezeRules::default()).await?;
        let held = chunk_subjects(&js, &store).await?;
        assert!(!held.is_empty());

        // A writer that published two chunks and died before its metadata.
        let orphan = format!("$O.{}.C.crashedwriter0000000000", store.bucket());
        for chunk in [&b"first half"[..], b"second half"] {
            js.publish(orphan.clone(), chunk.to_vec().into())
                .await?
                .await?;
        }
        let roots = GcRoots {
            snapshots: BTreeSet::from([live.id.clone()]),
            blobs: BTreeSet::new(),
            runs: 1,
        };

        // Younger than the grace: it may be a write still finishing.
        let report = store
            .collect_garbage(&roots, Duration::from_secs(3600))
            .await?;
        assert_eq!(report.chunks.orphan_sets_purged, 0, "{report:?}");
        assert_eq!(report.chunks.young_orphans_kept, 1, "{report:?}");
        assert!(chunk_subjects(&js, &store).await?.contains(&orphan));

        let report = store.collect_garbage(&roots, Duration::ZERO).await?;
        assert_eq!(
            (
                report.chunks.orphan_sets_purged,
                report.chunks.chunks_purged
            ),
            (1, 2),
            "{report:?}"
        );
        let mut after = chunk_subjects(&js, &store).await?;
        after.sort();
        let mut want = held.clone();
        want.sort();
        assert_eq!(after, want, "only the orphan's chunks went");

        // The live snapshot still reads whole.
        let out = tempfile::tempdir()?;
        store.materialize(&live.id, out.path()).await?;
        assert_eq!(
            std::fs::read(out.path().join("kept.txt"))?,
            b"kept by a live run"
        );

        // Nothing left to purge.
        let report = store.collect_garbage(&roots, Duration::ZERO).await?;
        assert_eq!(report.chunks.orphan_sets_purged, 0, "{report:?}");
        Ok(())
    })
    .await
}
