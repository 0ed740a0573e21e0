//! Content-addressed snapshots on a JetStream object store bucket (`lg-snapshots`): blobs as
//! `blob/<sha256>`, manifests as `manifest/<snapshot id>`.
//!
//! Objects are read with JetStream *direct gets* (`$JS.API.DIRECT.GET.OBJ_<bucket>`), one
//! chunk per request, never through a consumer: a reader needs no right to create consumers,
//! so read-only credentials stay read-only (see deploy/nats/). Every read is verified against
//! the sha256 it is named by. Object metadata (its recorded size and chunk count) is written
//! by whoever wrote the object, executors included, so it never sizes an allocation: a whole
//! object is read into memory only when its recorded size is within a cap the reader chose,
//! and the buffer grows with the bytes that actually arrive. Freezing lives in `upload.rs`,
//! manifests (and the `[snapshot]` caps on them) in `manifests.rs`, materializing in
//! `materialize.rs`, garbage collection in `gc.rs`.

use std::time::Duration;

use async_nats::jetstream::{self, object_store};
use loopgate_common::config::SnapshotLimits;
use loopgate_protocol::snapshot::{sha256_hex, SnapshotId};
use loopgate_protocol::subjects::SNAPSHOT_BUCKET;

use crate::chunks::ChunkReader;
use crate::error::{bounded, check_digest, over_limit, store_error, SnapshotError};
use crate::object_write::ObjectWrite;

/// A freeze that reuses a stored blob older than this writes it again, so it is young (and
/// kept) while the freeze's manifest is not written yet. With the stat cache's `PRESENT_TTL`
/// on top, a reused blob is at most 13 h old: a grace of at least
/// `gc::MIN_SAFE_GC_GRACE` means no collection can sweep a blob a freeze in progress relies on
/// (the sweep also re-reads each object's age right before deleting it).
pub const BLOB_REFRESH_AFTER: std::time::Duration = std::time::Duration::from_secs(12 * 3600);

/// The most a blob read whole into memory ([`SnapshotStore::blob`]) may be recorded as: four
/// times the largest file a freeze stores (`DEFAULT_MAX_FILE_BYTES`, 64 MiB), above every
/// transcript and check output. Larger blobs are only streamed to disk (materialize).
pub const MAX_BLOB_READ_BYTES: u64 = 256 * 1024 * 1024;

/// Transfer time allowance on top of the per-request timeout: one second per this many bytes.
const BYTES_PER_SECOND_ALLOWANCE: u64 = 8 * 1024 * 1024;

/// How long an object look-up or upload keeps retrying a failure that may pass (no responders,
/// "no stream found", a timeout): a JetStream cluster that lost a node takes seconds to elect
/// the bucket's new leader, and an executor that has finished its episode should freeze it
/// then rather than hand the whole step back to run again.
const TRANSIENT_PATIENCE: Duration = Duration::from_secs(20);
const FIRST_RETRY: Duration = Duration::from_millis(250);
const MAX_RETRY: Duration = Duration::from_secs(2);

/// Runs `attempt` until it succeeds, fails with an error that is not a store outage, or
/// [`TRANSIENT_PATIENCE`] is spent (the last error is returned).
async fn retry_transient<T, F, Fut>(op: &'static str, mut attempt: F) -> Result<T, SnapshotError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, SnapshotError>>,
{
    let started = tokio::time::Instant::now();
    let mut backoff = FIRST_RETRY;
    loop {
        match attempt().await {
            Err(err)
                if is_store_outage(&err) && started.elapsed() + backoff < TRANSIENT_PATIENCE =>
            {
                tracing::warn!(op, error = %err, ?backoff, "object store unavailable; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_RETRY);
            }
            other => return other,
        }
    }
}

/// The retryable errors that come from the store (not from the local file system).
fn is_store_outage(err: &SnapshotError) -> bool {
    err.is_retryable() && !matches!(err, SnapshotError::Io { .. })
}

/// What a freeze produced and what it cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreezeOutcome {
    pub id: SnapshotId,
    /// Shared with the cache that may keep it (read-only).
    pub manifest: std::sync::Arc<loopgate_protocol::snapshot::Manifest>,
    /// Number of files in the snapshot.
    pub files: usize,
    /// Sum of file sizes in the snapshot.
    pub bytes_total: u64,
    /// File blobs this freeze had to upload (the store lacked them).
    pub blobs_uploaded: usize,
    /// Bytes of those file blobs.
    pub bytes_uploaded: u64,
    /// Bytes of manifest objects (index and pages) this freeze had to upload.
    pub manifest_bytes_uploaded: u64,
    /// Files whose content was hashed (the rest came from a stat cache).
    pub files_hashed: usize,
    /// Digests of the manifest's pages, in order (empty for a flat manifest).
    pub pages: Vec<String>,
    /// How the manifest was stored, for a cache to hold.
    pub(crate) written: ManifestWrite,
}

/// What writing a manifest cost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManifestWrite {
    pub id: SnapshotId,
    /// Bytes of the head (or flat manifest), groups and pages that had to be uploaded.
    pub bytes_uploaded: u64,
    /// The page blobs the manifest refers to, in order (present in the store afterwards).
    pub pages: Vec<String>,
    /// The group blobs its head refers to (present in the store afterwards).
    pub groups: Vec<String>,
    /// sha256 of the head's bytes as written.
    pub head_sha256: String,
    /// The entries each page holds (indexes into the sorted entries), in order.
    pub page_ranges: Vec<std::ops::Range<usize>>,
}

/// Handle on one content-addressed bucket. Cheap to clone.
#[derive(Clone)]
pub struct SnapshotStore {
    js: jetstream::Context,
    store: object_store::ObjectStore,
    stream: jetstream::stream::Stream,
    bucket: String,
    timeout: Duration,
    /// `[snapshot]`: the largest manifest and tree this reader accepts.
    limits: SnapshotLimits,
}

impl std::fmt::Debug for SnapshotStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotStore")
            .field("bucket", &self.bucket)
            .field("timeout", &self.timeout)
            .field("limits", &self.limits)
            .finish()
    }
}

pub fn blob_object_name(sha256: &str) -> String {
    format!("blob/{sha256}")
}

pub fn manifest_object_name(id: &str) -> String {
    format!("manifest/{id}")
}

impl SnapshotStore {
    /// Open the snapshot bucket (created by the manager's topology) on a JetStream context,
    /// every request bounded by `timeout` (a bus's `jetstream()` and `request_timeout()`).
    pub async fn from_jetstream(
        js: &jetstream::Context,
        timeout: Duration,
    ) -> Result<SnapshotStore, SnapshotError> {
        Self::open_bucket(js, SNAPSHOT_BUCKET, timeout).await
    }

    /// Open an existing content-addressed bucket by name (needs only `STREAM.INFO` on it).
    pub async fn open_bucket(
        js: &jetstream::Context,
        bucket: &str,
        timeout: Duration,
    ) -> Result<SnapshotStore, SnapshotError> {
        let store = bounded("open bucket", timeout, js.get_object_store(bucket)).await?;
        let stream = bounded(
            "open bucket stream",
            timeout,
            js.get_stream(format!("OBJ_{bucket}")),
        )
        .await?;
        Ok(SnapshotStore {
            js: js.clone(),
            store,
            stream,
            bucket: bucket.to_string(),
            timeout,
            limits: SnapshotLimits::default(),
        })
    }

    /// This handle with the `[snapshot]` caps `limits` (the defaults until set).
    pub fn with_limits(mut self, limits: SnapshotLimits) -> SnapshotStore {
        self.limits = limits;
        self
    }

    /// The `[snapshot]` caps manifests read or written through this handle are held to.
    pub fn limits(&self) -> SnapshotLimits {
        self.limits
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    pub(crate) fn request_timeout(&self) -> Duration {
        self.timeout
    }

    pub(crate) fn transfer_timeout(&self, bytes: u64) -> Duration {
        self.timeout + Duration::from_secs(bytes / BYTES_PER_SECOND_ALLOWANCE)
    }

    pub(crate) fn object_store(&self) -> &object_store::ObjectStore {
        &self.store
    }

    pub(crate) fn stream(&self) -> &jetstream::stream::Stream {
        &self.stream
    }

    /// Latest metadata of object `name`, or None when absent or deleted.
    pub(crate) async fn object_info(
        &self,
        name: &str,
    ) -> Result<Option<object_store::ObjectInfo>, SnapshotError> {
        retry_transient("info", || self.object_info_once(name)).await
    }

    async fn object_info_once(
        &self,
        name: &str,
    ) -> Result<Option<object_store::ObjectInfo>, SnapshotError> {
        match tokio::time::timeout(self.timeout, self.store.info(name)).await {
            Ok(Ok(info)) if !info.deleted => Ok(Some(info)),
            Ok(Ok(_)) => Ok(None),
            Ok(Err(err)) if err.kind() == object_store::InfoErrorKind::NotFound => Ok(None),
            Ok(Err(err)) => Err(store_error("info", err)),
            Err(_) => Err(SnapshotError::Timeout {
                op: "info",
                after: self.timeout,
            }),
        }
    }

    /// Stored size of object `name`, or None when absent or deleted.
    pub(crate) async fn object_size(&self, name: &str) -> Result<Option<u64>, SnapshotError> {
        Ok(self.object_info(name).await?.map(|info| info.size as u64))
    }

    /// Store `bytes` as object `name`, the bucket holding `held` under that name now (what the
    /// caller's [`SnapshotStore::object_info`] found): see `object_write` for how.
    pub(crate) async fn put_object(
        &self,
        name: &str,
        bytes: &[u8],
        held: Option<&object_store::ObjectInfo>,
    ) -> Result<(), SnapshotError> {
        let write = ObjectWrite {
            js: &self.js,
            bucket: &self.bucket,
            after: self.transfer_timeout(bytes.len() as u64),
        };
        // A write of the same name and bytes again is harmless: objects are content-addressed.
        retry_transient("put", || write.put(name, bytes, held)).await
    }

    /// Write object `held`'s metadata again, dated now (its chunks stay): an old object a
    /// freeze reuses is young again, so the snapshot GC keeps it (see [`BLOB_REFRESH_AFTER`]).
    pub(crate) async fn date_again(
        &self,
        held: &object_store::ObjectInfo,
    ) -> Result<(), SnapshotError> {
        let write = ObjectWrite {
            js: &self.js,
            bucket: &self.bucket,
            after: self.timeout,
        };
        retry_transient("put", || write.date_again(held)).await
    }

    /// Whole object, or None when absent; `ObjectTooLarge` (nothing read) when it is recorded
    /// as more than `limit` bytes. The buffer grows with the chunks that arrive, never to the
    /// recorded size, and the chunk reader refuses bytes beyond that size: at most `limit`
    /// bytes are held. Bytes are NOT verified here; callers check them against the digest the
    /// object is named by.
    pub(crate) async fn get_object(
        &self,
        name: &str,
        limit: u64,
    ) -> Result<Option<Vec<u8>>, SnapshotError> {
        let Some(info) = self.object_info(name).await? else {
            return Ok(None);
        };
        let size = info.size as u64;
        if size > limit {
            return Err(over_limit(SnapshotError::ObjectTooLarge {
                object: name.to_string(),
                size,
                limit,
            }));
        }
        let after = self.transfer_timeout(size);
        let read = async {
            let mut reader = ChunkReader::new(&self.stream, &self.bucket, self.timeout, &info);
            let mut bytes = Vec::new();
            while let Some(chunk) = reader.next_chunk().await? {
                bytes.extend_from_slice(&chunk);
            }
            Ok(Some(bytes))
        };
        match tokio::time::timeout(after, read).await {
            Ok(result) => result,
            Err(_) => Err(SnapshotError::Timeout { op: "get", after }),
        }
    }

    pub async fn has_blob(&self, sha256: &str) -> Result<bool, SnapshotError> {
        check_digest(sha256)?;
        Ok(self.object_size(&blob_object_name(sha256)).await?.is_some())
    }

    /// Store `bytes` as a blob (if the store lacks it) and return its sha256.
    pub async fn put_bytes(&self, bytes: &[u8]) -> Result<String, SnapshotError> {
        let sha256 = sha256_hex(bytes);
        self.upload_if_missing(&sha256, bytes).await?;
        Ok(sha256)
    }

    /// Upload unless present with the right size; returns whether it uploaded.
    pub(crate) async fn upload_if_missing(
        &self,
        sha256: &str,
        bytes: &[u8],
    ) -> Result<bool, SnapshotError> {
        let name = blob_object_name(sha256);
        let held = self.object_info(&name).await?;
        if held.as_ref().and_then(reusable_size) == Some(bytes.len() as u64) {
            return Ok(false);
        }
        self.put_object(&name, bytes, held.as_ref()).await?;
        Ok(true)
    }

    /// Fetch a blob and verify it hashes to `sha256`; `ObjectTooLarge` when it is recorded as
    /// more than [`MAX_BLOB_READ_BYTES`].
    pub async fn blob(&self, sha256: &str) -> Result<Vec<u8>, SnapshotError> {
        self.blob_within(sha256, MAX_BLOB_READ_BYTES).await
    }

    /// [`SnapshotStore::blob`] of a blob recorded as at most `limit` bytes.
    pub(crate) async fn blob_within(
        &self,
        sha256: &str,
        limit: u64,
    ) -> Result<Vec<u8>, SnapshotError> {
        self.verified_blob(sha256, limit, |_, stored| Ok(stored))
            .await
    }

    /// The object of blob `sha256`, fetched within `limit` stored bytes, turned into its
    /// content by `decode` (given the object's name), and verified to hash to `sha256`
    /// (`Integrity` otherwise).
    pub(crate) async fn verified_blob(
        &self,
        sha256: &str,
        limit: u64,
        decode: impl FnOnce(&str, Vec<u8>) -> Result<Vec<u8>, SnapshotError>,
    ) -> Result<Vec<u8>, SnapshotError> {
        check_digest(sha256)?;
        let name = blob_object_name(sha256);
        let stored =
            self.get_object(&name, limit)
                .await?
                .ok_or_else(|| SnapshotError::BlobNotFound {
                    sha256: sha256.to_string(),
                })?;
        let bytes = decode(&name, stored)?;
        let actual = sha256_hex(&bytes);
        if actual != sha256 {
            return Err(SnapshotError::Integrity {
                path: name,
                reason: format!("content hashes to {actual}"),
            });
        }
        Ok(bytes)
    }

    /// Same as `blob`: logs and outputs stored with `put_bytes`.
    pub async fn get_bytes(&self, sha256: &str) -> Result<Vec<u8>, SnapshotError> {
        self.blob(sha256).await
    }
}

/// The stored size of object `info` when a writer may reuse it as it is: not old enough that
/// the snapshot GC could sweep it before this freeze's manifest lands (such an object is
/// written again, which makes it young). None otherwise.
pub(crate) fn reusable_size(info: &object_store::ObjectInfo) -> Option<u64> {
    let age = info
        .modified
        .and_then(|at| std::time::Duration::try_from(time::OffsetDateTime::now_utc() - at).ok());
    age.is_none_or(|age| age < BLOB_REFRESH_AFTER)
        .then_some(info.size as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_store_outages_are_retried() {
        let io = || SnapshotError::Io {
            path: "x".into(),
            source: std::io::Error::other("disk"),
        };
        let cases = [
            (
                SnapshotError::Store {
                    op: "put",
                    reason: "no responders".into(),
                },
                true,
            ),
            (
                SnapshotError::Timeout {
                    op: "put",
                    after: Duration::from_secs(1),
                },
                true,
            ),
            (io(), false),
            (
                SnapshotError::BlobNotFound {
                    sha256: "a".repeat(64),
                },
                false,
            ),
            (SnapshotError::TotalTooLarge { limit: 1 }, false),
        ];
        for (err, retried) in cases {
            assert_eq!(is_store_outage(&err), retried, "{err}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_store_outage_is_retried_until_it_passes_or_patience_is_spent() {
        for (failures, succeeds) in [(0, true), (3, true), (1000, false)] {
            let calls = std::sync::atomic::AtomicU32::new(0);
            let result = retry_transient("put", || {
                let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                async move {
                    if n < failures {
                        Err(SnapshotError::Store {
                            op: "put",
                            reason: "no responders".into(),
                        })
                    } else {
                        Ok(n)
                    }
                }
            })
            .await;
            assert_eq!(result.is_ok(), succeeds, "{failures}");
        }
        let calls = std::sync::atomic::AtomicU32::new(0);
        let refused: Result<(), _> = retry_transient("get", || {
            calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async {
                Err(SnapshotError::BlobNotFound {
                    sha256: "a".repeat(64),
                })
            }
        })
        .await;
        assert!(matches!(refused, Err(SnapshotError::BlobNotFound { .. })));
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn the_store_moves_into_tasks() {
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<SnapshotStore>();
    }

    #[test]
    fn object_names() {
        let sha = "a".repeat(64);
        assert_eq!(blob_object_name(&sha), format!("blob/{sha}"));
        assert_eq!(manifest_object_name(&sha), format!("manifest/{sha}"));
        assert!(check_digest(&sha).is_ok());
        for bad in ["", "../x", &"A".repeat(64), &"a".repeat(63)] {
            assert!(
                matches!(check_digest(bad), Err(SnapshotError::InvalidDigest(_))),
                "{bad}"
            );
        }
    }
}
