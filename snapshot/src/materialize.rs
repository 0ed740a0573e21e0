//! Materialize a snapshot into a directory, re-hashing every blob on the way in.

use std::collections::{BTreeSet, HashMap};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use loopgate_protocol::snapshot::{Manifest, ManifestEntry};
use loopgate_workspace_walk::{BeneathError, RootDir};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use crate::chunks::ChunkReader;
use crate::error::SnapshotError;
use crate::stat_cache::{wall_clock_ns, FileStamp, StatCache};
use crate::store::{blob_object_name, SnapshotStore};

pub(crate) fn io_error(path: &Path, source: std::io::Error) -> SnapshotError {
    SnapshotError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// A blocking task that panicked or was cancelled.
pub(crate) fn blocking_failed(op: &'static str, err: tokio::task::JoinError) -> SnapshotError {
    SnapshotError::Store {
        op,
        reason: err.to_string(),
    }
}

fn unsafe_destination(path: &Path, reason: &str) -> SnapshotError {
    SnapshotError::UnsafeDestination {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

/// Make every directory the files at `paths` (relative) need under `dest`, parents first,
/// refusing to go through a symlink or anything else that is not a directory, and refusing a
/// target that is a symlink or a directory (a regular file there is replaced by rename).
/// Beneath `dest`, following no symlink. Blocking.
pub(crate) fn prepare_dirs<'a>(
    dest: &Path,
    paths: impl IntoIterator<Item = &'a str> + Clone,
) -> Result<(), SnapshotError> {
    let mut dirs = BTreeSet::new();
    for path in paths.clone() {
        for (at, _) in path.match_indices('/') {
            dirs.insert(&path[..at]);
        }
    }
    let root = RootDir::open(dest).map_err(|e| io_error(dest, e.into()))?;
    // BTreeSet order puts `a` before `a/b`: parents are made first; each is made or opened
    // beneath `dest` following no symlink.
    for dir in dirs {
        let current = dest.join(dir);
        match root.create_dir_all(dir) {
            Ok(()) => {}
            Err(BeneathError::Symlink { .. }) => {
                return Err(unsafe_destination(&current, "is a symlink"))
            }
            Err(err) if err.io_kind() == Some(std::io::ErrorKind::NotADirectory) => {
                return Err(unsafe_destination(
                    &current,
                    "exists and is not a directory",
                ))
            }
            Err(err) => return Err(io_error(&current, err.into())),
        }
    }
    for path in paths {
        let target = dest.join(path);
        match root.symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(unsafe_destination(&target, "is a symlink"))
            }
            Ok(meta) if meta.is_dir() => return Err(unsafe_destination(&target, "is a directory")),
            Ok(_) => {}
            Err(err) if err.io_kind() == Some(std::io::ErrorKind::NotFound) => {}
            Err(BeneathError::Symlink { .. }) => {
                return Err(unsafe_destination(&target, "goes through a symlink"))
            }
            Err(err) => return Err(io_error(&target, err.into())),
        }
    }
    Ok(())
}

pub(crate) fn temp_path_for(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    target.with_file_name(format!(".{name}.lg-tmp-{}", uuid::Uuid::new_v4().simple()))
}

impl SnapshotStore {
    /// Write snapshot `id` into `dest` (created if missing): every file with its mode, each blob
    /// re-hashed against the manifest. A missing or mismatching blob is `Integrity`.
    pub async fn materialize(&self, id: &str, dest: &Path) -> Result<Manifest, SnapshotError> {
        self.materialize_inner(id, dest, None).await
    }

    /// As [`SnapshotStore::materialize`], recording every written file (and every blob as
    /// present) in `cache`, so a later [`SnapshotStore::freeze_cached`] of `dest` re-hashes
    /// and uploads only what changed.
    pub async fn materialize_cached(
        &self,
        id: &str,
        dest: &Path,
        cache: &mut StatCache,
    ) -> Result<Manifest, SnapshotError> {
        self.materialize_inner(id, dest, Some(cache)).await
    }

    async fn materialize_inner(
        &self,
        id: &str,
        dest: &Path,
        cache: Option<&mut StatCache>,
    ) -> Result<Manifest, SnapshotError> {
        let (manifest, pages) = self.manifest_with_pages(id).await?;
        let mut stamps = Vec::new();
        tokio::fs::create_dir_all(dest)
            .await
            .map_err(|e| io_error(dest, e))?;
        let (dir, paths) = (
            dest.to_path_buf(),
            manifest
                .entries
                .iter()
                .map(|e| e.path.clone())
                .collect::<Vec<_>>(),
        );
        tokio::task::spawn_blocking(move || prepare_dirs(&dir, paths.iter().map(String::as_str)))
            .await
            .map_err(|e| blocking_failed("prepare dirs", e))??;
        let mut written: HashMap<&str, PathBuf> = HashMap::new();
        for entry in &manifest.entries {
            let target = dest.join(&entry.path);
            let temp = temp_path_for(&target);
            let result = match written.get(entry.sha256.as_str()) {
                // Same content already fetched and verified in this run: copy it locally.
                Some(previous) => tokio::fs::copy(previous, &temp)
                    .await
                    .map(|_| ())
                    .map_err(|e| io_error(&temp, e)),
                None => self.download_verified(entry, &temp).await,
            };
            let result = match result {
                Ok(()) => finish_file(&temp, &target, entry.mode).await,
                Err(err) => Err(err),
            };
            if let Err(err) = result {
                let _ = tokio::fs::remove_file(&temp).await;
                return Err(err);
            }
            if cache.is_some() {
                let metadata = tokio::fs::metadata(&target)
                    .await
                    .map_err(|e| io_error(&target, e))?;
                stamps.push(FileStamp::of(&metadata));
            }
            written.insert(&entry.sha256, target);
        }
        if let Some(cache) = cache {
            // Recorded after the last write: files written in the last moments are racy and
            // get re-hashed by the next freeze, the rest are trusted.
            let recorded_at = wall_clock_ns();
            for (entry, stamp) in manifest.entries.iter().zip(stamps) {
                cache.record(&entry.path, stamp, &entry.sha256, recorded_at);
            }
            cache.mark_all_present(manifest.entries.iter().map(|e| e.sha256.as_str()));
            cache.mark_all_present(pages.iter().map(String::as_str));
        }
        Ok(manifest)
    }

    /// Stream blob `entry.sha256` into a new file at `temp`, hashing as it goes.
    pub(crate) async fn download_verified(
        &self,
        entry: &ManifestEntry,
        temp: &Path,
    ) -> Result<(), SnapshotError> {
        let integrity = |reason: String| SnapshotError::Integrity {
            path: entry.path.clone(),
            reason,
        };
        let name = blob_object_name(&entry.sha256);
        let after = self.transfer_timeout(entry.size);
        let download = async {
            let Some(info) = self.object_info(&name).await? else {
                return Err(integrity(format!("blob {} is missing", entry.sha256)));
            };
            if info.size as u64 != entry.size {
                return Err(integrity(format!(
                    "blob is {} bytes, manifest says {}",
                    info.size, entry.size
                )));
            }
            let mut file = tokio::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(temp)
                .await
                .map_err(|e| io_error(temp, e))?;
            let mut hasher = Sha256::new();
            let mut size: u64 = 0;
            let mut reader =
                ChunkReader::new(self.stream(), self.bucket(), self.request_timeout(), &info);
            while let Some(chunk) = reader.next_chunk().await.map_err(|err| match err {
                SnapshotError::Integrity { reason, .. } => integrity(reason),
                other => other,
            })? {
                size += chunk.len() as u64;
                hasher.update(&chunk);
                file.write_all(&chunk)
                    .await
                    .map_err(|e| io_error(temp, e))?;
            }
            file.flush().await.map_err(|e| io_error(temp, e))?;
            Ok((hex::encode(hasher.finalize()), size))
        };
        let (actual, size) = match tokio::time::timeout(after, download).await {
            Ok(result) => result?,
            Err(_) => {
                return Err(SnapshotError::Timeout {
                    op: "get blob",
                    after,
                })
            }
        };
        if actual != entry.sha256 || size != entry.size {
            return Err(integrity(format!(
                "content hashes to {actual} ({size} bytes), manifest says {} ({} bytes)",
                entry.sha256, entry.size
            )));
        }
        Ok(())
    }
}

pub(crate) async fn finish_file(
    temp: &Path,
    target: &Path,
    mode: u32,
) -> Result<(), SnapshotError> {
    tokio::fs::set_permissions(temp, std::fs::Permissions::from_mode(mode & 0o777))
        .await
        .map_err(|e| io_error(temp, e))?;
    // rename replaces a regular file atomically and never follows a symlink at `target`.
    tokio::fs::rename(temp, target)
        .await
        .map_err(|e| io_error(target, e))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::fs;

    #[test]
    fn dirs_are_made_once_and_never_through_a_symlink() {
        let dest = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        prepare_dirs(
            dest.path(),
            ["a/b/c.txt", "a/b/d.txt", "a/e.txt", "top.txt"],
        )
        .unwrap();
        assert!(dest.path().join("a/b").is_dir());
        assert!(
            !dest.path().join("top.txt").exists(),
            "only directories are made"
        );

        std::os::unix::fs::symlink(outside.path(), dest.path().join("link")).unwrap();
        let err = prepare_dirs(dest.path(), ["link/x.txt"]).unwrap_err();
        assert!(
            matches!(err, SnapshotError::UnsafeDestination { .. }),
            "{err:?}"
        );
        assert!(fs::read_dir(outside.path()).unwrap().next().is_none());

        std::os::unix::fs::symlink(outside.path().join("f"), dest.path().join("f")).unwrap();
        let err = prepare_dirs(dest.path(), ["f"]).unwrap_err();
        assert!(
            matches!(err, SnapshotError::UnsafeDestination { .. }),
            "a symlink target: {err:?}"
        );
        fs::write(dest.path().join("plain"), b"x").unwrap();
        let err = prepare_dirs(dest.path(), ["plain/x"]).unwrap_err();
        assert!(
            matches!(err, SnapshotError::UnsafeDestination { .. }),
            "a file as a directory: {err:?}"
        );
        let err = prepare_dirs(dest.path(), ["a/b"]).unwrap_err();
        assert!(
            matches!(err, SnapshotError::UnsafeDestination { .. }),
            "a directory as the target: {err:?}"
        );
        prepare_dirs(dest.path(), ["plain"]).unwrap();
    }
}
