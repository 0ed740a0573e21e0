//! Manifest objects stored zstd-compressed: what a freeze writes, the uncompressed forms earlier
//! writers left still read, and hostile compressed objects (a zip bomb, garbage) refused with
//! their kind.

use anyhow::Result;
use async_nats::jetstream;
use loopgate_protocol::subjects::SNAPSHOT_BUCKET;
use loopgate_snapshot::manifests::PAGED_MIN_ENTRIES;
use loopgate_snapshot::{blob_object_name, manifest_object_name, FreezeRules, SnapshotError};
use loopgate_test_support::put_object;

use crate::{bounded, nats_and_store, write};

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

fn workspace(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..n {
        let rel = format!("crate{}/src/module{}/file{i:05}.rs", i % 5, i % 11);
        write(dir.path(), &rel, format!("// file {i}\n").as_bytes(), 0o644);
    }
    dir
}

async fn get(js: &jetstream::Context, name: &str) -> Result<Vec<u8>> {
    let mut object = js
        .get_object_store(SNAPSHOT_BUCKET)
        .await?
        .get(name)
        .await?;
    let mut bytes = Vec::new();
    tokio::io::AsyncReadExt::read_to_end(&mut object, &mut bytes).await?;
    Ok(bytes)
}

/// Store object `name` again as the uncompressed JSON an earlier writer stored.
async fn store_uncompressed(js: &jetstream::Context, name: &str) -> Result<()> {
    let stored = get(js, name).await?;
    assert!(
        stored.starts_with(&ZSTD_MAGIC),
        "{name} is stored compressed"
    );
    let raw = zstd::decode_all(stored.as_slice())?;
    put_object(js, SNAPSHOT_BUCKET, name, &raw).await?;
    Ok(())
}

#[tokio::test]
async fn manifests_are_stored_compressed_and_uncompressed_ones_still_read() -> Result<()> {
    bounded(async {
        let (_server, bus, store) = nats_and_store().await?;
        let js = bus.jetstream();
        for n in [10, PAGED_MIN_ENTRIES * 8] {
            let ws = workspace(n);
            let outcome = store.freeze(ws.path(), &FreezeRules::default()).await?;
            let (_, objects) = store.manifest_with_objects(&outcome.id).await?;
            assert_eq!(objects.is_empty(), n <= PAGED_MIN_ENTRIES, "n={n}");
            // Every object as an earlier writer stored it: uncompressed, same names.
            let head = manifest_object_name(&outcome.id);
            store_uncompressed(js, &head).await?;
            for sha in &objects {
                store_uncompressed(js, &blob_object_name(sha)).await?;
            }
            assert_eq!(
                store.manifest(&outcome.id).await?,
                *outcome.manifest,
                "n={n}"
            );
            // A writer reuses them as they are: nothing uploaded again.
            let again = store.freeze(ws.path(), &FreezeRules::default()).await?;
            assert_eq!(again.id, outcome.id);
            assert_eq!(again.manifest_bytes_uploaded, 0, "n={n}");
            assert!(!get(js, &head).await?.starts_with(&ZSTD_MAGIC), "n={n}");
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_compressed_bomb_or_garbage_is_refused_with_its_kind() -> Result<()> {
    bounded(async {
        let (_server, bus, store) = nats_and_store().await?;
        let js = bus.jetstream();
        let ws = workspace(PAGED_MIN_ENTRIES * 40);
        let outcome = store.freeze(ws.path(), &FreezeRules::default()).await?;
        let (_, pages) = store.manifest_with_pages(&outcome.id).await?;
        let (_, objects) = store.manifest_with_objects(&outcome.id).await?;
        let group = objects
            .iter()
            .find(|o| !pages.contains(o))
            .expect("a group")
            .clone();

        // A group (at most some 68 KiB of digests) that inflates to 4 MiB: a few hundred bytes
        // stored.
        let bomb = zstd::bulk::compress(&vec![b' '; 4 << 20], 3)?;
        assert!(bomb.len() < 4096, "{}", bomb.len());
        put_object(js, SNAPSHOT_BUCKET, &blob_object_name(&group), &bomb).await?;
        match store.manifest(&outcome.id).await {
            Err(SnapshotError::ObjectTooLarge { object, limit, .. }) => {
                assert_eq!(object, format!("blob/{group} (decompressed)"));
                assert!(limit < 4 << 20, "{limit}");
            }
            other => panic!("expected ObjectTooLarge, got {other:?}"),
        }

        // A page that is the zstd magic and then garbage.
        let mut garbage = ZSTD_MAGIC.to_vec();
        garbage.extend_from_slice(&[0xff; 64]);
        let ws = workspace(PAGED_MIN_ENTRIES * 2);
        let small = store.freeze(ws.path(), &FreezeRules::default()).await?;
        let (_, pages) = store.manifest_with_pages(&small.id).await?;
        put_object(js, SNAPSHOT_BUCKET, &blob_object_name(&pages[0]), &garbage).await?;
        match store.manifest(&small.id).await {
            Err(SnapshotError::Integrity { path, reason }) => {
                assert_eq!(path, format!("blob/{}", pages[0]));
                assert!(reason.contains("does not decode"), "{reason}");
            }
            other => panic!("expected Integrity, got {other:?}"),
        }

        // A well-formed compressed page of other entries under that page's name.
        let other = zstd::bulk::compress(b"[]", 3)?;
        put_object(js, SNAPSHOT_BUCKET, &blob_object_name(&pages[0]), &other).await?;
        match store.manifest(&small.id).await {
            Err(SnapshotError::Integrity { reason, .. }) => {
                assert!(reason.contains("hashes to"), "{reason}")
            }
            other => panic!("expected Integrity, got {other:?}"),
        }
        Ok(())
    })
    .await
}
