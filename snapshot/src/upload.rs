//! Freezing: a workspace directory (or in-memory files) becomes blobs the store lacks plus a
//! manifest. Bytes moved follow what changed: blobs the store has are not uploaded, and with a
//! [`StatCache`] unchanged files are neither re-hashed nor looked up.

use std::collections::HashSet;
use std::path::Path;

use futures::{StreamExt, TryStreamExt};
use loopgate_protocol::snapshot::{
    file_and_directory_conflict, sha256_hex, validate_relative_path, Manifest, ManifestEntry,
    SnapshotPathError,
};

use crate::error::{Refusal, SnapshotError};
use crate::freeze::{normalize_mode, open_walked, walk_workspace_cached, FreezeRules, WalkedFile};
use crate::materialize::blocking_failed;
use crate::stat_cache::StatCache;
use crate::store::ManifestWrite;
use crate::store::{blob_object_name, reusable_size, FreezeOutcome, SnapshotStore};

/// Concurrent existence checks / uploads during one freeze.
const UPLOAD_CONCURRENCY: usize = 16;

impl SnapshotStore {
    /// Freeze a workspace directory: hash every file, upload the blobs the store lacks, then
    /// write the manifest.
    pub async fn freeze(
        &self,
        dir: &Path,
        rules: &FreezeRules,
    ) -> Result<FreezeOutcome, SnapshotError> {
        self.freeze_cached(dir, rules, &mut StatCache::new()).await
    }

    /// As [`SnapshotStore::freeze`], reusing and updating `cache` (fill it with
    /// [`SnapshotStore::materialize_cached`] or a previous freeze of the same directory).
    pub async fn freeze_cached(
        &self,
        dir: &Path,
        rules: &FreezeRules,
        cache: &mut StatCache,
    ) -> Result<FreezeOutcome, SnapshotError> {
        let root = dir.to_path_buf();
        let walk_rules = rules.clone();
        let taken = std::mem::take(cache);
        let (taken, walked) = tokio::task::spawn_blocking(move || {
            let walked = walk_workspace_cached(&root, &walk_rules, Some(&taken));
            (taken, walked)
        })
        .await
        .map_err(|err| SnapshotError::Store {
            op: "walk",
            reason: err.to_string(),
        })?;
        *cache = taken;
        self.upload_walked(walked?, cache).await
    }

    /// The second half of a freeze: upload the blobs of `files` (a walk's, sorted by path) that
    /// neither `cache` knows present nor the store holds, write the manifest, update `cache`.
    pub(crate) async fn upload_walked(
        &self,
        files: Vec<WalkedFile>,
        cache: &mut StatCache,
    ) -> Result<FreezeOutcome, SnapshotError> {
        let uploaded = self.upload_blobs(&files, cache).await?;
        let files_hashed = files.iter().filter(|f| f.hashed).count();
        let manifest = Manifest::new(files.iter().map(|f| f.entry.clone()).collect())
            .map_err(SnapshotError::InvalidManifest)?;
        let written = self.write_manifest(&manifest, Some(cache)).await?;
        for file in files.iter().filter(|file| file.hashed) {
            cache.record(
                &file.entry.path,
                file.stamp,
                &file.entry.sha256,
                file.recorded_at_ns,
            );
        }
        cache.mark_all_present(files.iter().map(|file| file.entry.sha256.as_str()));
        cache.mark_all_present(written.pages.iter().map(String::as_str));
        cache.mark_all_present(written.groups.iter().map(String::as_str));
        cache.retain_paths(|path| manifest.get(path).is_some());
        Ok(outcome(manifest, written, &uploaded, files_hashed))
    }

    /// Upload the blobs of `files` that `known` does not hold present and the store lacks,
    /// each once, read from its walked source and checked against its digest as it is read;
    /// a blob the store holds is dated again where it must be. The bytes uploaded per blob,
    /// `None` where nothing was.
    pub(crate) async fn upload_blobs(
        &self,
        files: &[WalkedFile],
        known: &StatCache,
    ) -> Result<Vec<Option<u64>>, SnapshotError> {
        let mut seen = HashSet::new();
        let uploads: Vec<_> = files
            .iter()
            .filter(|file| !known.is_present(&file.entry.sha256))
            .filter(|file| seen.insert(file.entry.sha256.as_str()))
            .map(|file| async move {
                let name = blob_object_name(&file.entry.sha256);
                let held = self.object_info(&name).await?;
                if let Some(info) = held.as_ref().filter(|i| i.size as u64 == file.entry.size) {
                    if reusable_size(info).is_none() {
                        self.date_again(info).await?;
                    }
                    return Ok::<_, SnapshotError>(None);
                }
                let (source, rel) = (file.source.clone(), file.entry.path.clone());
                let bytes = tokio::task::spawn_blocking(move || read_walked(&source, &rel))
                    .await
                    .map_err(|err| blocking_failed("read", err))??;
                if sha256_hex(&bytes) != file.entry.sha256 {
                    return Err(SnapshotError::ChangedDuringFreeze {
                        path: file.entry.path.clone(),
                    });
                }
                self.put_object(&name, &bytes, held.as_ref()).await?;
                Ok(Some(bytes.len() as u64))
            })
            .collect();
        futures::stream::iter(uploads)
            .buffer_unordered(UPLOAD_CONCURRENCY)
            .try_collect()
            .await
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
        // Refused before anything is uploaded: `a` and `a/b` can never be written out.
        if let Some(conflict) = file_and_directory_conflict(files.iter().map(|(p, ..)| p.as_str()))
        {
            let path = match &conflict {
                SnapshotPathError::FileAndDirectory { nested, .. } => nested.clone(),
                _ => String::new(),
            };
            return Err(SnapshotError::Refused {
                path,
                reason: Refusal::InvalidPath(conflict),
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
        let files_hashed = entries.len();
        let manifest = Manifest::new(entries).map_err(SnapshotError::InvalidManifest)?;
        let written = self.write_manifest(&manifest, None).await?;
        Ok(outcome(manifest, written, &uploaded, files_hashed))
    }

    /// The empty snapshot, for runs without a starting workspace.
    pub async fn freeze_empty(&self) -> Result<FreezeOutcome, SnapshotError> {
        let manifest = Manifest::empty();
        let written = self.write_manifest(&manifest, None).await?;
        Ok(outcome(manifest, written, &[], 0))
    }
}

/// The bytes of a walked file (its canonical `source`), no symlink followed on the way.
fn read_walked(source: &Path, rel: &str) -> Result<Vec<u8>, SnapshotError> {
    use std::io::Read;
    let mut bytes = Vec::new();
    open_walked(source, rel)?
        .read_to_end(&mut bytes)
        .map_err(|e| SnapshotError::Io {
            path: source.display().to_string(),
            source: e,
        })?;
    Ok(bytes)
}

pub(crate) fn outcome(
    manifest: impl Into<std::sync::Arc<Manifest>>,
    written: ManifestWrite,
    uploaded: &[Option<u64>],
    files_hashed: usize,
) -> FreezeOutcome {
    let manifest = manifest.into();
    FreezeOutcome {
        id: written.id.clone(),
        files: manifest.entries.len(),
        bytes_total: manifest.total_bytes(),
        blobs_uploaded: uploaded.iter().flatten().count(),
        bytes_uploaded: uploaded.iter().flatten().sum(),
        manifest_bytes_uploaded: written.bytes_uploaded,
        files_hashed,
        manifest,
        pages: written.pages.clone(),
        written,
    }
}
