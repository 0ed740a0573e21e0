//! Writing the files a warm materialize still needs (`warm.rs`): each from the cache (reflink
//! or copy, re-hashed) or the store (verified), to a temp file beside its target and renamed
//! over it. The file system work of one file is one blocking task: the directories are made
//! once for all files first, and a small blob is fetched into memory and written in one go,
//! instead of a blocking-pool hop per `stat`, `mkdir`, write, `chmod` and `rename`.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use loopgate_protocol::snapshot::ManifestEntry;
use tokio::sync::Semaphore;

use crate::cache::clone::clone_into;
use crate::cache::workspace_cache::WorkspaceCache;
use crate::error::SnapshotError;
use crate::freeze::hash_file;
use crate::materialize::{blocking_failed, io_error, temp_path_for};
use crate::store::SnapshotStore;

/// Blobs up to this size are fetched into memory and written in one blocking task; larger ones
/// stream to disk as they arrive.
const IN_MEMORY_MAX: u64 = 1024 * 1024;

/// Where a written file's bytes came from.
pub(crate) enum Source {
    Cache,
    Download,
}

/// A file being written for `target`: `target` itself when nothing was there (created
/// exclusively, so never through a symlink left in its place), else a temp file beside it that
/// [`NewFile::finish`] renames over the old one (a replacement never writes through the old
/// file, which could be a hard link out of the tree).
struct NewFile {
    file: fs::File,
    path: PathBuf,
    target: PathBuf,
}

impl NewFile {
    fn create(target: &Path) -> Result<NewFile, SnapshotError> {
        let exclusive = |path: &Path| {
            fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
        };
        let (file, path) = match exclusive(target) {
            Ok(file) => (file, target.to_path_buf()),
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                let temp = temp_path_for(target);
                let file = exclusive(&temp).map_err(|e| io_error(&temp, e))?;
                (file, temp)
            }
            Err(err) => return Err(io_error(target, err)),
        };
        Ok(NewFile {
            file,
            path,
            target: target.to_path_buf(),
        })
    }

    /// The temp file at `temp`, already filled, to be put in place at `target`; removed when it
    /// cannot be opened.
    fn adopt(temp: PathBuf, target: &Path) -> Result<NewFile, SnapshotError> {
        match fs::File::open(&temp) {
            Ok(file) => Ok(NewFile {
                file,
                path: temp,
                target: target.to_path_buf(),
            }),
            Err(err) => {
                let _ = fs::remove_file(&temp);
                Err(io_error(&temp, err))
            }
        }
    }

    /// Run `fill` on the file; on any failure the new file is removed.
    fn fill(
        mut self,
        fill: impl FnOnce(&mut fs::File) -> std::io::Result<()>,
    ) -> Result<NewFile, SnapshotError> {
        match fill(&mut self.file) {
            Ok(()) => Ok(self),
            Err(err) => {
                let _ = fs::remove_file(&self.path);
                Err(io_error(&self.path, err))
            }
        }
    }

    /// Set the mode and owner and put the file in place; removed on failure.
    fn finish(self, mode: u32, owner: Option<(u32, u32)>) -> Result<(), SnapshotError> {
        let path = &self.path;
        let done = self
            .file
            .set_permissions(fs::Permissions::from_mode(mode & 0o777))
            .map_err(|e| io_error(path, e))
            .and_then(|()| match owner {
                Some((uid, gid)) => std::os::unix::fs::fchown(&self.file, Some(uid), Some(gid))
                    .map_err(|e| io_error(path, e)),
                None => Ok(()),
            })
            .and_then(|()| {
                if *path == self.target {
                    return Ok(());
                }
                // rename replaces a regular file atomically, never following a symlink.
                fs::rename(path, &self.target).map_err(|e| io_error(&self.target, e))
            });
        if done.is_err() {
            let _ = fs::remove_file(path);
        }
        done
    }
}

/// One file to write: its entry, where it goes (its directories exist), for whom.
pub(crate) struct FileWrite<'a> {
    pub(crate) entry: &'a ManifestEntry,
    pub(crate) dest: &'a Path,
    pub(crate) owner: Option<(u32, u32)>,
    /// Bounds the file system work running at once (more than the cores only contend for the
    /// directories' locks).
    pub(crate) writers: &'a Semaphore,
}

impl FileWrite<'_> {
    fn target(&self) -> PathBuf {
        self.dest.join(&self.entry.path)
    }
}

/// Run blocking file system work `op` under a writer permit.
async fn write_blocking<T: Send + 'static>(
    writers: &Semaphore,
    op: impl FnOnce() -> Result<T, SnapshotError> + Send + 'static,
) -> Result<T, SnapshotError> {
    let _permit = writers.acquire().await.map_err(|_| SnapshotError::Store {
        op: "write",
        reason: "writers closed".to_string(),
    })?;
    tokio::task::spawn_blocking(op)
        .await
        .map_err(|e| blocking_failed("write", e))?
}

impl SnapshotStore {
    /// Write one file from the cache (re-hashed) or the store (verified); a blob downloaded
    /// while `keep_blob` is also put into the cache.
    pub(crate) async fn write_file(
        &self,
        file: FileWrite<'_>,
        cache: &WorkspaceCache,
        keep_blob: bool,
    ) -> Result<Source, SnapshotError> {
        let (entry, owner) = (file.entry.clone(), file.owner);
        let target = file.target();
        if cache.has_blob(&entry.sha256) {
            let (held, target, entry) = (cache.clone(), target.clone(), entry.clone());
            let copied = write_blocking(file.writers, move || {
                copy_from_cache(&held, &entry, &target, owner)
            })
            .await?;
            if copied {
                cache.count_blob_hit();
                return Ok(Source::Cache);
            }
        }
        let keep = keep_blob.then(|| cache.clone());
        if entry.size <= IN_MEMORY_MAX {
            let bytes = self.blob(&entry.sha256).await.map_err(|err| match err {
                SnapshotError::BlobNotFound { sha256 } => SnapshotError::Integrity {
                    path: entry.path.clone(),
                    reason: format!("blob {sha256} is missing"),
                },
                SnapshotError::Integrity { reason, .. } => SnapshotError::Integrity {
                    path: entry.path.clone(),
                    reason,
                },
                other => other,
            })?;
            if bytes.len() as u64 != entry.size {
                return Err(SnapshotError::Integrity {
                    path: entry.path.clone(),
                    reason: format!(
                        "blob is {} bytes, manifest says {}",
                        bytes.len(),
                        entry.size
                    ),
                });
            }
            write_blocking(file.writers, move || {
                let new = NewFile::create(&target)?.fill(|out| out.write_all(&bytes))?;
                if let Some(cache) = keep {
                    cache.insert_blob(&entry.sha256, &new.path, entry.size);
                }
                new.finish(entry.mode, owner)
            })
            .await?;
            return Ok(Source::Download);
        }
        let temp = temp_path_for(&target);
        if let Err(err) = self.download_verified(&entry, &temp).await {
            let _ = tokio::fs::remove_file(&temp).await;
            return Err(err);
        }
        write_blocking(file.writers, move || {
            if let Some(cache) = keep {
                cache.insert_blob(&entry.sha256, &temp, entry.size);
            }
            NewFile::adopt(temp, &target)?.finish(entry.mode, owner)
        })
        .await?;
        Ok(Source::Download)
    }
}

/// Copy cached blob `entry.sha256` to `target` and re-hash the copy. False (and the blob
/// forgotten) when the cache no longer has the file; `Integrity` when its bytes changed.
/// Blocking.
fn copy_from_cache(
    cache: &WorkspaceCache,
    entry: &ManifestEntry,
    target: &Path,
    owner: Option<(u32, u32)>,
) -> Result<bool, SnapshotError> {
    let blob = cache.blob_path(&entry.sha256);
    let new = NewFile::create(target)?;
    let mut missing = false;
    let new = new.fill(|out| match clone_into(&blob, out) {
        Ok(_) => Ok(()),
        Err(err) => {
            missing = err.kind() == std::io::ErrorKind::NotFound;
            Err(err)
        }
    });
    let new = match new {
        Ok(new) => new,
        Err(_) if missing => {
            cache.drop_corrupt_blob(&entry.sha256);
            return Ok(false);
        }
        Err(err) => return Err(err),
    };
    let verified = hash_file(&new.path, &entry.path, entry.size)
        .map(|(sha256, size)| sha256 == entry.sha256 && size == entry.size)
        .unwrap_or(false);
    if !verified {
        let _ = fs::remove_file(&new.path);
        cache.drop_corrupt_blob(&entry.sha256);
        return Err(SnapshotError::Integrity {
            path: entry.path.clone(),
            reason: format!("cached blob {} no longer matches its digest", entry.sha256),
        });
    }
    new.finish(entry.mode, owner)?;
    Ok(true)
}

/// Write each `(entry, from)`: a copy of the already written and verified file `from` (same
/// content), for paths that share a blob with another. Blocking.
pub(crate) fn copy_written(
    dest: &Path,
    copies: &[(ManifestEntry, String)],
    owner: Option<(u32, u32)>,
) -> Result<(), SnapshotError> {
    for (entry, from) in copies {
        let source = dest.join(from);
        NewFile::create(&dest.join(&entry.path))?
            .fill(|out| {
                fs::File::open(&source)
                    .and_then(|mut src| std::io::copy(&mut src, out))
                    .map(drop)
            })?
            .finish(entry.mode, owner)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use loopgate_protocol::snapshot::sha256_hex;

    #[test]
    fn shared_content_is_copied_from_the_written_file() {
        let dest = tempfile::tempdir().unwrap();
        fs::write(dest.path().join("one"), b"same").unwrap();
        let entry = ManifestEntry {
            path: "two".into(),
            mode: 0o755,
            size: 4,
            sha256: sha256_hex(b"same"),
        };
        copy_written(dest.path(), &[(entry.clone(), "one".into())], None).unwrap();
        assert_eq!(fs::read(dest.path().join("two")).unwrap(), b"same");
        let mode = fs::metadata(dest.path().join("two"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
    }
}
