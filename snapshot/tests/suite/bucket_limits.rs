//! Bucket metadata is never trusted for memory or disk: an executor can write the snapshot
//! bucket, so a size of 10^12 recorded in an object's metadata, a paged manifest of 10^7
//! entries and a manifest whose files add up past `max_tree_bytes` each get a clear error,
//! never an allocation sized by the metadata, a full reassembly or a write.

use anyhow::Result;
use loopgate_protocol::snapshot::{sha256_hex, Manifest, ManifestEntry};
use loopgate_protocol::subjects::SNAPSHOT_BUCKET;
use loopgate_snapshot::{
    blob_object_name, manifest_object_name, FreezeRules, SnapshotError, SnapshotLimits,
};
use loopgate_test_support::{plant_paged_manifest, put_object, record_size, PAGE_ENTRIES};

use crate::{bounded, nats_and_store, sample_workspace};

const TERA: usize = 1_000_000_000_000;
/// 10^7 entries of 1024-entry pages.
const TEN_MILLION_PAGES: usize = 10_000_000 / PAGE_ENTRIES + 1;

#[tokio::test]
async fn a_size_of_10e12_in_object_metadata_is_refused_unread() -> Result<()> {
    bounded(async {
        let (_server, bus, store) = nats_and_store().await?;
        let ws = sample_workspace();
        let outcome = store.freeze(ws.path(), &FreezeRules::default()).await?;
        let js = bus.jetstream();

        // The manifest head: what `GET /v1/snapshots/{id}`, a diff, a certificate and every
        // materialize read first.
        let head = manifest_object_name(&outcome.id);
        record_size(js, SNAPSHOT_BUCKET, &head, TERA).await?;
        match store.manifest(&outcome.id).await {
            Err(SnapshotError::ObjectTooLarge {
                object,
                size,
                limit,
            }) => {
                assert_eq!(object, head);
                assert_eq!(size, TERA as u64);
                assert!(limit < TERA as u64);
            }
            other => panic!("expected ObjectTooLarge, got {other:?}"),
        }
        let dest = tempfile::tempdir()?;
        let err = store
            .materialize(&outcome.id, &dest.path().join("ws"))
            .await
            .unwrap_err();
        assert!(
            matches!(err, SnapshotError::ObjectTooLarge { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("1000000000000 bytes"), "{err}");
        assert!(!dest.path().join("ws").exists(), "nothing written");

        // A blob read whole (`GET /v1/blobs/{sha256}`, the diff's file texts).
        let sha = outcome.manifest.entries[0].sha256.clone();
        record_size(js, SNAPSHOT_BUCKET, &blob_object_name(&sha), TERA).await?;
        let err = store.blob(&sha).await.unwrap_err();
        assert!(
            matches!(err, SnapshotError::ObjectTooLarge { size, .. } if size == TERA as u64),
            "{err:?}"
        );
        assert!(!err.is_retryable());
        assert_eq!(err.over_limit_reason(), Some("snapshot_object_too_large"));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_size_recorded_under_the_cap_but_over_the_bytes_is_integrity() -> Result<()> {
    bounded(async {
        let (_server, bus, store) = nats_and_store().await?;
        let sha = store.put_bytes(b"twelve bytes").await?;
        // 200 MiB recorded, 12 bytes stored: read as it arrives, found short.
        record_size(
            bus.jetstream(),
            SNAPSHOT_BUCKET,
            &blob_object_name(&sha),
            200 << 20,
        )
        .await?;
        let err = store.blob(&sha).await.unwrap_err();
        match err {
            SnapshotError::Integrity { reason, .. } => {
                assert!(reason.contains("shorter than recorded"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_manifest_of_ten_million_entries_is_refused_before_it_is_read() -> Result<()> {
    bounded(async {
        let (_server, bus, store) = nats_and_store().await?;
        // 9766 pages listed (10^7 entries), only the first ten stored.
        let id = plant_paged_manifest(bus.jetstream(), SNAPSHOT_BUCKET, TEN_MILLION_PAGES, 10, 1)
            .await?;

        // A cap under the page count: refused on the index alone, no page fetched.
        let tight = store.clone().with_limits(SnapshotLimits {
            max_manifest_entries: 5_000,
            ..SnapshotLimits::default()
        });
        match tight.manifest(&id).await {
            Err(SnapshotError::TooManyEntries { limit, detail, .. }) => {
                assert_eq!(limit, 5_000);
                assert_eq!(
                    detail,
                    "its index lists 9766 pages of at least one entry each"
                );
            }
            other => panic!("{other:?}"),
        }

        // A cap over the page count: entries are counted as pages arrive, and the read stops
        // at the page that passes the cap; the 9756 absent pages are never asked for.
        let counted = store.clone().with_limits(SnapshotLimits {
            max_manifest_entries: 10_000,
            ..SnapshotLimits::default()
        });
        let err = counted.manifest(&id).await.unwrap_err();
        match &err {
            SnapshotError::TooManyEntries { limit, detail, .. } => {
                assert_eq!(*limit, 10_000);
                assert_eq!(detail, "10240 entries after 10 of its 9766 pages");
            }
            other => panic!("{other:?}"),
        }
        assert!(
            err.to_string().contains("max_manifest_entries"),
            "the error names the key: {err}"
        );
        let dest = tempfile::tempdir()?;
        let err = counted
            .materialize(&id, &dest.path().join("ws"))
            .await
            .unwrap_err();
        assert!(
            matches!(err, SnapshotError::TooManyEntries { .. }),
            "{err:?}"
        );
        assert!(!dest.path().join("ws").exists(), "nothing written");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_tree_over_max_tree_bytes_is_refused_before_any_write() -> Result<()> {
    bounded(async {
        let (_server, bus, store) = nats_and_store().await?;
        // Two pages, each entry recorded as 8 MiB: 16 GiB in all, over the 8 GiB default. A
        // true manifest (it reassembles to its id): only the cap refuses it.
        let id = plant_paged_manifest(bus.jetstream(), SNAPSHOT_BUCKET, 2, 2, 8 << 20).await?;
        let roomy = store.clone().with_limits(SnapshotLimits {
            max_tree_bytes: 32 << 30,
            ..SnapshotLimits::default()
        });
        assert_eq!(roomy.manifest(&id).await?.entries.len(), 2 * PAGE_ENTRIES);
        let dest = tempfile::tempdir()?;
        let err = store
            .materialize(&id, &dest.path().join("ws"))
            .await
            .unwrap_err();
        assert!(
            matches!(err, SnapshotError::TreeTooLarge { limit, .. } if limit == 8 << 30),
            "{err:?}"
        );
        assert!(!dest.path().join("ws").exists(), "nothing written");

        // A flat manifest (its id is its hash) declaring one 9 GiB file.
        let manifest = Manifest::new(vec![ManifestEntry {
            path: "huge.bin".into(),
            mode: 0o644,
            size: 9 << 30,
            sha256: sha256_hex(b"never stored"),
        }])?;
        let bytes = manifest.canonical_bytes();
        let flat = sha256_hex(&bytes);
        put_object(
            bus.jetstream(),
            SNAPSHOT_BUCKET,
            &manifest_object_name(&flat),
            &bytes,
        )
        .await?;
        let err = store
            .materialize(&flat, &dest.path().join("flat"))
            .await
            .unwrap_err();
        assert!(matches!(err, SnapshotError::TreeTooLarge { .. }), "{err:?}");
        assert!(!dest.path().join("flat").exists(), "nothing written");

        // Writers are held to the same caps: no freeze stores what readers refuse.
        let err = store.put_manifest(&manifest).await.unwrap_err();
        assert!(matches!(err, SnapshotError::TreeTooLarge { .. }), "{err:?}");
        let small = store.clone().with_limits(SnapshotLimits {
            max_manifest_entries: 3,
            ..SnapshotLimits::default()
        });
        let err = small
            .freeze(sample_workspace().path(), &FreezeRules::default())
            .await
            .unwrap_err();
        assert!(
            matches!(err, SnapshotError::TooManyEntries { limit: 3, .. }),
            "{err:?}"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn pages_out_of_order_are_integrity_as_they_arrive() -> Result<()> {
    bounded(async {
        let (_server, bus, store) = nats_and_store().await?;
        let js = bus.jetstream();
        let id = plant_paged_manifest(js, SNAPSHOT_BUCKET, 2, 2, 1).await?;
        let mut head = js
            .get_object_store(SNAPSHOT_BUCKET)
            .await?
            .get(manifest_object_name(&id).as_str())
            .await?;
        let mut bytes = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut head, &mut bytes).await?;
        let index: loopgate_snapshot::manifests::PagedIndex = serde_json::from_slice(&bytes)?;
        let swapped = loopgate_snapshot::manifests::PagedIndex {
            pages: vec![index.pages[1].clone(), index.pages[0].clone()],
            ..index
        };
        let other = sha256_hex(b"swapped index");
        put_object(
            js,
            SNAPSHOT_BUCKET,
            &manifest_object_name(&other),
            &serde_json::to_vec(&swapped)?,
        )
        .await?;
        match store.manifest(&other).await {
            Err(SnapshotError::Integrity { reason, .. }) => {
                assert!(reason.contains("out of order"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        Ok(())
    })
    .await
}
