//! The snapshot bucket under the project's per-role NATS users (deploy/nats/loopgate-users.conf):
//! an executor may write objects (`$O.lg-snapshots.C.>`, `.M.>`) but neither purge nor delete.
//! A freeze that reuses content the bucket holds in an object older than `BLOB_REFRESH_AFTER`
//! writes it again so the snapshot GC keeps it; with those rights the write must still succeed
//! (the object store client's own `put` purges the old object's chunks, which an executor may
//! not do), and the object reads back and is young again.

use std::time::Duration;

use anyhow::Context;
use async_nats::jetstream::object_store::ObjectInfo;
use loopgate_protocol::snapshot::sha256_hex;
use loopgate_protocol::subjects::SNAPSHOT_BUCKET;
use loopgate_snapshot::{blob_object_name, SnapshotStore, BLOB_REFRESH_AFTER};
use loopgate_test_support::{date_back, put_object, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions};
use loopgate_transport::Bus;

/// Store `bytes` as blob `blob/<sha256>` (as the manager, which may write anything) dated
/// `age` back, as an object an earlier freeze wrote that long ago.
async fn store_old_blob(manager: &Bus, bytes: &[u8], age: Duration) -> anyhow::Result<ObjectInfo> {
    let js = manager.jetstream();
    let name = blob_object_name(&sha256_hex(bytes));
    put_object(js, SNAPSHOT_BUCKET, &name, bytes).await?;
    date_back(js, SNAPSHOT_BUCKET, &name, age).await?;
    Ok(js
        .get_object_store(SNAPSHOT_BUCKET)
        .await?
        .info(&name)
        .await?)
}

#[tokio::test]
async fn an_executor_writes_an_old_blob_again_without_purge_rights() -> anyhow::Result<()> {
    let model = StandInModel::start(Script::new()).await?;
    let profiles = vec![Profile::new("exec", &model.base_url(), "standin-executor")];
    let stack = Stack::start(StackOptions::new(profiles, 1).hardened()).await?;
    let manager = stack.connect_as("manager").await?;
    let bytes = b"a file an earlier freeze stored two days ago\n";
    let two_days = Duration::from_secs(48 * 3600);
    assert!(two_days > BLOB_REFRESH_AFTER);
    let old = store_old_blob(&manager, bytes, two_days).await?;
    let old_at = old.modified.context("an old object's time")?;

    let executor = stack.connect_as("executor").await?;
    let store = SnapshotStore::from_jetstream(executor.jetstream(), Duration::from_secs(5)).await?;
    let sha256 = tokio::time::timeout(Duration::from_secs(60), store.put_bytes(bytes))
        .await
        .context("the write did not end in 60 s")?
        .context("an executor could not write an old blob again")?;
    assert_eq!(sha256, sha256_hex(bytes));
    assert_eq!(store.blob(&sha256).await?, bytes);

    let bucket = manager
        .jetstream()
        .get_object_store(SNAPSHOT_BUCKET)
        .await?;
    let now = bucket.info(&blob_object_name(&sha256)).await?;
    let written_at = now.modified.context("the object's time")?;
    assert!(
        written_at - old_at > time::Duration::hours(47),
        "the object was not made young again: {old_at} then {written_at}"
    );
    Ok(())
}
