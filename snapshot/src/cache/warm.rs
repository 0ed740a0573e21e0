//! [`SnapshotStore::materialize_warm`] and [`SnapshotStore::freeze_warm`]: materialize from the
//! closest kept tree plus the manifest difference, and freeze with the stat cache that
//! materialize filled.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use loopgate_protocol::snapshot::{Manifest, ManifestEntry};

use crate::cache::fill::{copy_written, FileWrite, Source};
use crate::cache::reconcile::{reconcile, Reconciled};
use crate::cache::sealed::reconcile_sealed;
use crate::cache::workspace_cache::{ClosestTree, TreeState, WorkspaceCache};
use crate::error::SnapshotError;
use crate::freeze::FreezeRules;
use crate::materialize::{blocking_failed, io_error, prepare_dirs};
use crate::stat_cache::{wall_clock_ns, FileStamp};
use crate::store::{FreezeOutcome, SnapshotStore};

/// Files written at once.
const WRITE_CONCURRENCY: usize = 32;

/// What a materialized tree is for, which decides what its stat cache needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TreeUse {
    /// A workspace the copy path freezes ([`SnapshotStore::freeze_warm`]): every blob and
    /// page of the manifest is marked present, so its freeze looks none of them up again.
    Checkout,
    /// A sealed overlay lower layer: never frozen itself (the overlay freeze marks the base's
    /// objects present from the manifest it read), so nothing is marked.
    SealedLower,
}

/// What a warm materialize did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WarmReport {
    /// A kept tree was reused (else the directory was filled from scratch).
    pub reused_tree: bool,
    /// Files already right in the reused tree.
    pub files_kept: usize,
    /// Kept files whose stat did not vouch for them, re-hashed.
    pub files_rehashed: usize,
    pub files_written: usize,
    /// Blobs copied out of the cache (each re-hashed).
    pub blobs_from_cache: usize,
    pub blobs_downloaded: usize,
    pub bytes_downloaded: u64,
}

impl SnapshotStore {
    /// Materialize snapshot `id` into `dest` (missing or empty) through `cache`: the kept tree
    /// closest to it is moved there and the difference applied; without one, every file is
    /// written. Every file written is verified against its digest, cache hits included (a
    /// cached blob whose bytes changed is `Integrity`), and kept files are vouched for by the
    /// stat cache or re-hashed. `dest` is checked out: [`SnapshotStore::freeze_warm`] freezes
    /// it by stat cache and [`WorkspaceCache::check_in`] gives it back to the cache.
    pub async fn materialize_warm(
        &self,
        id: &str,
        dest: &Path,
        cache: &WorkspaceCache,
    ) -> Result<(Manifest, WarmReport), SnapshotError> {
        self.materialize_warm_as(id, dest, cache, None).await
    }

    /// [`SnapshotStore::materialize_warm`] for the user (`uid`, `gid`) that will work in `dest`
    /// (the agent or check user a root worker drops to): every file written is given to it
    /// before its stat is recorded. Giving the tree away afterwards (a `chown`, as the agent
    /// sandbox does before each command) would change every file's ctime, so the stat cache
    /// could vouch for none of them and the next freeze would re-read the whole tree. `None`:
    /// files stay the worker's.
    pub async fn materialize_warm_as(
        &self,
        id: &str,
        dest: &Path,
        cache: &WorkspaceCache,
        owner: Option<(u32, u32)>,
    ) -> Result<(Manifest, WarmReport), SnapshotError> {
        let (manifest, pages, _groups) = self.manifest_with_pages_via(id, Some(cache)).await?;
        let report = self
            .materialize_manifest_as(&manifest, &pages, dest, cache, owner, TreeUse::Checkout)
            .await?;
        // The checkout's record shares it: the caller gets its own copy.
        Ok((Arc::unwrap_or_clone(manifest), report))
    }

    /// [`SnapshotStore::materialize_warm_as`] of a manifest already read (with its pages),
    /// for `tree_use`.
    pub(crate) async fn materialize_manifest_as(
        &self,
        manifest: &Arc<Manifest>,
        pages: &[String],
        dest: &Path,
        cache: &WorkspaceCache,
        owner: Option<(u32, u32)>,
        tree_use: TreeUse,
    ) -> Result<WarmReport, SnapshotError> {
        let mut report = WarmReport::default();
        let mut reconciled = None;
        if let Some(closest) = cache.take_closest(manifest) {
            reconciled = reuse_tree(closest, manifest, dest).await;
            report.reused_tree = reconciled.is_some();
        }
        let reconciled = match reconciled {
            Some(done) => done,
            None => {
                tokio::fs::create_dir_all(dest)
                    .await
                    .map_err(|e| io_error(dest, e))?;
                let (dir, target) = (dest.to_path_buf(), Arc::clone(manifest));
                tokio::task::spawn_blocking(move || reconcile(&dir, None, &target))
                    .await
                    .map_err(|e| blocking_failed("reconcile", e))??
            }
        };
        report.files_kept = reconciled.kept;
        report.files_rehashed = reconciled.rehashed;
        let Reconciled {
            write, mut stat, ..
        } = reconciled;
        // One write per distinct content; the other paths with it are local copies.
        let mut first: HashMap<&str, usize> = HashMap::new();
        let mut copies = Vec::new();
        for &index in &write {
            let entry = &manifest.entries[index];
            match first.get(entry.sha256.as_str()) {
                Some(&original) => copies.push((index, original)),
                None => {
                    first.insert(&entry.sha256, index);
                }
            }
        }
        // Blobs fetched for an incremental update are cached for the next one; a full fill is
        // not (the tree itself, once checked in, holds those bytes).
        let keep_blobs = report.reused_tree;
        let uniques: Vec<usize> = write
            .iter()
            .copied()
            .filter(|i| first.get(manifest.entries[*i].sha256.as_str()) == Some(i))
            .collect();
        let (dir, paths) = (
            dest.to_path_buf(),
            write
                .iter()
                .map(|&i| manifest.entries[i].path.clone())
                .collect::<Vec<_>>(),
        );
        // The paths come back for the stat pass below.
        let written = tokio::task::spawn_blocking(move || {
            prepare_dirs(&dir, paths.iter().map(String::as_str)).map(|()| paths)
        })
        .await
        .map_err(|e| blocking_failed("prepare dirs", e))??;
        // A loop, not `map` over `&usize`: the futures must be `Send` for every lifetime.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let writers = tokio::sync::Semaphore::new(cores);
        let mut writes = Vec::with_capacity(uniques.len());
        for index in uniques.iter().copied() {
            let file = FileWrite {
                entry: &manifest.entries[index],
                dest,
                owner,
                writers: &writers,
            };
            writes.push(self.write_file(file, cache, keep_blobs));
        }
        let sources: Vec<Source> = futures::stream::iter(writes)
            .buffer_unordered(WRITE_CONCURRENCY)
            .try_collect()
            .await?;
        for source in &sources {
            match source {
                Source::Cache => report.blobs_from_cache += 1,
                Source::Download => report.blobs_downloaded += 1,
            }
        }
        report.bytes_downloaded = uniques
            .iter()
            .zip(&sources)
            .filter(|(_, s)| matches!(s, Source::Download))
            .map(|(i, _)| manifest.entries[*i].size)
            .sum();
        if !copies.is_empty() {
            let copies: Vec<(ManifestEntry, String)> = copies
                .iter()
                .map(|&(index, original)| {
                    (
                        manifest.entries[index].clone(),
                        manifest.entries[original].path.clone(),
                    )
                })
                .collect();
            let dir = dest.to_path_buf();
            tokio::task::spawn_blocking(move || copy_written(&dir, &copies, owner))
                .await
                .map_err(|e| blocking_failed("copy", e))??;
        }
        report.files_written = write.len();
        // Stat the written files, then note when: files written in the last moments are racy
        // and get re-hashed by the next freeze or reuse.
        let dir = dest.to_path_buf();
        let stamps = tokio::task::spawn_blocking(move || {
            written
                .iter()
                .map(|rel| {
                    let path = dir.join(rel);
                    std::fs::symlink_metadata(&path)
                        .map(|m| FileStamp::of(&m))
                        .map_err(|e| io_error(&path, e))
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .await
        .map_err(|e| blocking_failed("stat", e))??;
        let recorded_at = wall_clock_ns();
        for (&index, stamp) in write.iter().zip(stamps) {
            let entry = &manifest.entries[index];
            stat.record(&entry.path, stamp, &entry.sha256, recorded_at);
        }
        if tree_use == TreeUse::Checkout {
            stat.mark_all_present(manifest.entries.iter().map(|e| e.sha256.as_str()));
            stat.mark_all_present(pages.iter().map(String::as_str));
        }
        cache.record_checkout(
            dest,
            TreeState {
                manifest: Arc::clone(manifest),
                stat,
                sealed: false,
            },
        );
        Ok(report)
    }

    /// Freeze `dir` with the stat cache its materialize (or last freeze) through `cache`
    /// recorded, so only files whose stat changed are read; it stays checked out, now holding
    /// the frozen manifest. A directory the cache does not know is frozen from scratch.
    pub async fn freeze_warm(
        &self,
        dir: &Path,
        rules: &FreezeRules,
        cache: &WorkspaceCache,
    ) -> Result<FreezeOutcome, SnapshotError> {
        let mut stat = cache.take_checkout(dir).map(|t| t.stat).unwrap_or_default();
        let outcome = self.freeze_cached(dir, rules, &mut stat).await?;
        crate::manifests::hold_pages(cache, &outcome.manifest, &outcome.written);
        cache.record_checkout(
            dir,
            TreeState {
                manifest: Arc::clone(&outcome.manifest),
                stat,
                sealed: false,
            },
        );
        Ok(outcome)
    }
}

/// Reconcile a kept tree with `target` where it lies, then move it to `dest`. None (the tree
/// discarded) when that fails: the caller fills `dest` from scratch.
async fn reuse_tree(
    closest: ClosestTree,
    target: &Arc<Manifest>,
    dest: &Path,
) -> Option<Reconciled> {
    let ClosestTree {
        dir: tree_dir,
        tree,
        changes,
    } = closest;
    let (dir, wanted) = (tree_dir.clone(), Arc::clone(target));
    let done = tokio::task::spawn_blocking(move || {
        if tree.sealed {
            reconcile_sealed(&dir, &changes, &wanted)
        } else {
            reconcile(&dir, Some(tree), &wanted)
        }
    })
    .await;
    let failure = match done {
        Ok(Ok(done)) => match tokio::fs::rename(&tree_dir, dest).await {
            Ok(()) => return Some(done),
            Err(err) => err.to_string(),
        },
        Ok(Err(err)) => err.to_string(),
        Err(err) => err.to_string(),
    };
    tracing::warn!(tree = %tree_dir.display(), error = %failure, "kept tree not reusable; materializing from scratch");
    let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&tree_dir)).await;
    None
}
