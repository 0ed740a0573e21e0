//! Content-addressed snapshots on the JetStream object store bucket `lg-snapshots`:
//! blobs as `blob/<sha256>`, manifests as `manifest/<snapshot id>` (canonical manifest JSON).
//! Materializing lives in `snapshot_materialize.rs`, the filesystem walk in `snapshot_freeze.rs`.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use async_nats::jetstream::{self, object_store};
use futures::{StreamExt, TryStreamExt};
use loopgate_common::snapshot::{
    is_sha256_hex, sha256_hex, validate_relative_path, Manifest, ManifestEntry, SnapshotId,
    SnapshotPathError,
};
use loopgate_common::subjects::SNAPSHOT_BUCKET;
use tokio::io::AsyncReadExt;

use crate::bus::Bus;
use crate::snapshot_freeze::{normalize_mode, walk_workspace, FreezeRules, Refusal};

/// Concurrent blob uploads during one freeze.
const UPLOAD_CONCURRENCY: usize = 4;
/// Transfer time allowance on top of the per-request timeout: one second per this many bytes.
const BYTES_PER_SECOND_ALLOWANCE: u64 = 8 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Stored content does not match its digest, or a blob the manifest names is missing.
    /// The auditor reports this as an integrity violation.
    #[error("integrity violation at '{path}': {reason}")]
    Integrity { path: String, reason: String },
    #[error("snapshot '{id}' not found")]
    ManifestNotFound { id: String },
    #[error("blob '{sha256}' not found")]
    BlobNotFound { sha256: String },
    #[error("'{0}' is not a sha256 hex digest")]
    InvalidDigest(String),
    #[error("refusing to snapshot '{path}': {reason}")]
    Refused { path: String, reason: Refusal },
    #[error("workspace is over the {limit} byte snapshot limit")]
    TotalTooLarge { limit: u64 },
    #[error("invalid manifest: {0}")]
    InvalidManifest(SnapshotPathError),
    #[error("'{path}' changed while it was being frozen")]
    ChangedDuringFreeze { path: String },
    #[error("refusing to write '{path}': {reason}")]
    UnsafeDestination { path: String, reason: String },
    #[error("i/o on '{path}': {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("object store {op} failed: {reason}")]
    Store { op: &'static str, reason: String },
    #[error("object store {op} timed out after {after:?}")]
    Timeout { op: &'static str, after: Duration },
}

/// What a freeze produced and what it cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreezeOutcome {
    pub id: SnapshotId,
    pub manifest: Manifest,
    /// Number of files in the snapshot.
    pub files: usize,
    /// Sum of file sizes in the snapshot.
    pub bytes_total: u64,
    /// Blobs this freeze had to upload (the store lacked them).
    pub blobs_uploaded: usize,
    pub bytes_uploaded: u64,
}

/// Handle on the snapshot bucket. Cheap to clone.
#[derive(Clone)]
pub struct SnapshotStore {
    store: object_store::ObjectStore,
    timeout: Duration,
}

impl std::fmt::Debug for SnapshotStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotStore")
            .field("bucket", &SNAPSHOT_BUCKET)
            .field("timeout", &self.timeout)
            .finish()
    }
}

pub fn blob_object_name(sha256: &str) -> String {
    format!("blob/{sha256}")
}

pub fn manifest_object_name(id: &str) -> String {
    format!("manifest/{id}")
}

pub(crate) fn check_digest(digest: &str) -> Result<(), SnapshotError> {
    if is_sha256_hex(digest) {
        Ok(())
    } else {
        Err(SnapshotError::InvalidDigest(digest.to_string()))
    }
}

impl SnapshotStore {
    /// Open the bucket (created by `Bus::ensure_topology`).
    pub async fn new(bus: &Bus) -> Result<SnapshotStore, SnapshotError> {
        Self::from_jetstream(bus.jetstream(), bus.request_timeout()).await
    }

    pub async fn from_jetstream(
        js: &jetstream::Context,
        timeout: Duration,
    ) -> Result<SnapshotStore, SnapshotError> {
        let store = bounded("open bucket", timeout, js.get_object_store(SNAPSHOT_BUCKET)).await?;
        Ok(SnapshotStore { store, timeout })
    }

    pub(crate) fn transfer_timeout(&self, bytes: u64) -> Duration {
        self.timeout + Duration::from_secs(bytes / BYTES_PER_SECOND_ALLOWANCE)
    }

    pub(crate) fn object_store(&self) -> &object_store::ObjectStore {
        &self.store
    }

    /// Stored size of object `name`, or None when absent or deleted.
    async fn object_size(&self, name: &str) -> Result<Option<u64>, SnapshotError> {
        match tokio::time::timeout(self.timeout, self.store.info(name)).await {
            Ok(Ok(info)) if !info.deleted => Ok(Some(info.size as u64)),
            Ok(Ok(_)) => Ok(None),
            Ok(Err(err)) if err.kind() == object_store::InfoErrorKind::NotFound => Ok(None),
            Ok(Err(err)) => Err(store_error("info", err)),
            Err(_) => Err(SnapshotError::Timeout {
                op: "info",
                after: self.timeout,
            }),
        }
    }

    async fn put_object(&self, name: &str, bytes: &[u8]) -> Result<(), SnapshotError> {
        let mut reader = bytes;
        let after = self.transfer_timeout(bytes.len() as u64);
        bounded("put", after, self.store.put(name, &mut reader)).await?;
        Ok(())
    }

    /// Whole object, or None when absent. Object store digest mismatches surface as Integrity.
    async fn get_object(&self, name: &str) -> Result<Option<Vec<u8>>, SnapshotError> {
        let Some(size) = self.object_size(name).await? else {
            return Ok(None);
        };
        let after = self.transfer_timeout(size);
        let read = async {
            let mut object = match self.store.get(name).await {
                Ok(object) => object,
                Err(err) if err.kind() == object_store::GetErrorKind::NotFound => return Ok(None),
                Err(err) => return Err(store_error("get", err)),
            };
            let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
            object
                .read_to_end(&mut bytes)
                .await
                .map_err(|err| read_error(name, err))?;
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
    async fn upload_if_missing(&self, sha256: &str, bytes: &[u8]) -> Result<bool, SnapshotError> {
        let name = blob_object_name(sha256);
        if self.object_size(&name).await? == Some(bytes.len() as u64) {
            return Ok(false);
        }
        self.put_object(&name, bytes).await?;
        Ok(true)
    }

    /// Fetch a blob and verify it hashes to `sha256`.
    pub async fn blob(&self, sha256: &str) -> Result<Vec<u8>, SnapshotError> {
        check_digest(sha256)?;
        let name = blob_object_name(sha256);
        let bytes = self
            .get_object(&name)
            .await?
            .ok_or_else(|| SnapshotError::BlobNotFound {
                sha256: sha256.to_string(),
            })?;
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

    /// Fetch, hash-check and validate a manifest.
    pub async fn manifest(&self, id: &str) -> Result<Manifest, SnapshotError> {
        check_digest(id)?;
        let name = manifest_object_name(id);
        let bytes = self
            .get_object(&name)
            .await?
            .ok_or_else(|| SnapshotError::ManifestNotFound { id: id.to_string() })?;
        let integrity = |reason: String| SnapshotError::Integrity {
            path: name.clone(),
            reason,
        };
        let actual = sha256_hex(&bytes);
        if actual != id {
            return Err(integrity(format!("manifest hashes to {actual}")));
        }
        let manifest: Manifest = serde_json::from_slice(&bytes)
            .map_err(|err| integrity(format!("manifest is not valid JSON: {err}")))?;
        manifest
            .validate()
            .map_err(|err| integrity(format!("manifest is invalid: {err}")))?;
        Ok(manifest)
    }

    /// Store the manifest (blobs must already be there) and return its id.
    pub async fn put_manifest(&self, manifest: &Manifest) -> Result<SnapshotId, SnapshotError> {
        manifest
            .validate()
            .map_err(SnapshotError::InvalidManifest)?;
        let bytes = manifest.canonical_bytes();
        let id = sha256_hex(&bytes);
        let name = manifest_object_name(&id);
        if self.object_size(&name).await? != Some(bytes.len() as u64) {
            self.put_object(&name, &bytes).await?;
        }
        Ok(id)
    }

    /// Freeze a workspace directory: hash every file, upload the blobs the store lacks, then
    /// write the manifest.
    pub async fn freeze(
        &self,
        dir: &Path,
        rules: &FreezeRules,
    ) -> Result<FreezeOutcome, SnapshotError> {
        let root = dir.to_path_buf();
        let walk_rules = rules.clone();
        let files = tokio::task::spawn_blocking(move || walk_workspace(&root, &walk_rules))
            .await
            .map_err(|err| SnapshotError::Store {
                op: "walk",
                reason: err.to_string(),
            })??;
        let mut seen = HashSet::new();
        let uploads: Vec<_> = files
            .iter()
            .filter(|file| seen.insert(file.entry.sha256.clone()))
            .map(|file| async move {
                let name = blob_object_name(&file.entry.sha256);
                if self.object_size(&name).await? == Some(file.entry.size) {
                    return Ok::<_, SnapshotError>(None);
                }
                let bytes =
                    tokio::fs::read(&file.source)
                        .await
                        .map_err(|source| SnapshotError::Io {
                            path: file.source.display().to_string(),
                            source,
                        })?;
                if sha256_hex(&bytes) != file.entry.sha256 {
                    return Err(SnapshotError::ChangedDuringFreeze {
                        path: file.entry.path.clone(),
                    });
                }
                self.put_object(&name, &bytes).await?;
                Ok(Some(bytes.len() as u64))
            })
            .collect();
        let uploaded: Vec<Option<u64>> = futures::stream::iter(uploads)
            .buffer_unordered(UPLOAD_CONCURRENCY)
            .try_collect()
            .await?;
        let manifest = Manifest::new(files.into_iter().map(|f| f.entry).collect())
            .map_err(SnapshotError::InvalidManifest)?;
        self.finish_freeze(manifest, &uploaded).await
    }

    /// Freeze in-memory files `(path, mode, content)`, e.g. a workspace uploaded over HTTP.
    /// Paths must be valid relative paths, unique; modes are normalized to 0o644/0o755; the
    /// default `FreezeRules` size limits apply.
    pub async fn freeze_files(
        &self,
        files: Vec<(String, u32, Vec<u8>)>,
    ) -> Result<FreezeOutcome, SnapshotError> {
        let limits = FreezeRules::default();
        let mut entries = Vec::with_capacity(files.len());
        let mut paths = HashSet::new();
        let mut total: u64 = 0;
        for (path, mode, content) in &files {
            validate_relative_path(path).map_err(|e| SnapshotError::Refused {
                path: path.clone(),
                reason: Refusal::InvalidPath(e),
            })?;
            if !paths.insert(path.as_str()) {
                return Err(SnapshotError::Refused {
                    path: path.clone(),
                    reason: Refusal::InvalidPath(SnapshotPathError::Duplicate(path.clone())),
                });
            }
            let size = content.len() as u64;
            if size > limits.max_file_bytes {
                return Err(SnapshotError::Refused {
                    path: path.clone(),
                    reason: Refusal::FileTooLarge {
                        size,
                        limit: limits.max_file_bytes,
                    },
                });
            }
            total += size;
            if total > limits.max_total_bytes {
                return Err(SnapshotError::TotalTooLarge {
                    limit: limits.max_total_bytes,
                });
            }
            entries.push(ManifestEntry {
                path: path.clone(),
                mode: normalize_mode(*mode),
                size,
                sha256: sha256_hex(content),
            });
        }
        let mut seen = HashSet::new();
        let uploads: Vec<_> = entries
            .iter()
            .zip(&files)
            .filter(|(entry, _)| seen.insert(entry.sha256.clone()))
            .map(|(entry, (_, _, content))| async move {
                let uploaded = self.upload_if_missing(&entry.sha256, content).await?;
                Ok::<_, SnapshotError>(uploaded.then_some(content.len() as u64))
            })
            .collect();
        let uploaded: Vec<Option<u64>> = futures::stream::iter(uploads)
            .buffer_unordered(UPLOAD_CONCURRENCY)
            .try_collect()
            .await?;
        let manifest = Manifest::new(entries).map_err(SnapshotError::InvalidManifest)?;
        self.finish_freeze(manifest, &uploaded).await
    }

    /// The empty snapshot, for runs without a starting workspace.
    pub async fn freeze_empty(&self) -> Result<FreezeOutcome, SnapshotError> {
        self.finish_freeze(Manifest::empty(), &[]).await
    }

    async fn finish_freeze(
        &self,
        manifest: Manifest,
        uploaded: &[Option<u64>],
    ) -> Result<FreezeOutcome, SnapshotError> {
        let id = self.put_manifest(&manifest).await?;
        Ok(FreezeOutcome {
            id,
            files: manifest.entries.len(),
            bytes_total: manifest.total_bytes(),
            blobs_uploaded: uploaded.iter().flatten().count(),
            bytes_uploaded: uploaded.iter().flatten().sum(),
            manifest,
        })
    }
}

pub(crate) fn store_error(op: &'static str, err: impl std::fmt::Display) -> SnapshotError {
    SnapshotError::Store {
        op,
        reason: err.to_string(),
    }
}

/// Errors while reading an object's chunks. The object store's own digest check failing means
/// the stored bytes were damaged.
pub(crate) fn read_error(name: &str, err: std::io::Error) -> SnapshotError {
    if err.kind() == std::io::ErrorKind::InvalidData {
        SnapshotError::Integrity {
            path: name.to_string(),
            reason: format!("object store digest check failed: {err}"),
        }
    } else {
        store_error("read", err)
    }
}

async fn bounded<T, E: std::fmt::Display>(
    op: &'static str,
    after: Duration,
    fut: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, SnapshotError> {
    match tokio::time::timeout(after, fut).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(store_error(op, err)),
        Err(_) => Err(SnapshotError::Timeout { op, after }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
