//! [`WorkspaceCache`]: the bookkeeping and disk layout of one worker's cache (see `mod.rs`).

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use loopgate_protocol::snapshot::{diff_manifests, Manifest, PathChange};

use crate::cache::clone;
use crate::cache::known::{KnownManifest, KnownManifests};
use crate::cache::lru::{Item, Lru};
use crate::cache::pages::{Page, PageCache, MAX_PAGE_ENTRIES_HELD};
use crate::error::SnapshotError;
use crate::materialize::io_error;
use crate::stat_cache::StatCache;

/// At most this many materialized directories are remembered as checked out (a worker that
/// materializes and then never freezes or checks in, e.g. a failed episode, leaks nothing).
const MAX_CHECKED_OUT: usize = 64;

/// Bytes charged per kept file on top of its content (inode, directory entry, bookkeeping), so
/// trees of many small or empty files are bounded by `cache_bytes` too.
const ENTRY_OVERHEAD: u64 = 512;
/// Bytes charged per kept tree on top of its files.
const TREE_OVERHEAD: u64 = 64 * 1024;

fn tree_charge(manifest: &Manifest) -> u64 {
    manifest.total_bytes() + TREE_OVERHEAD + ENTRY_OVERHEAD * manifest.entries.len() as u64
}

/// Whether a kept tree's manifest is `target`: the same shared manifest (the known manifests,
/// the kept trees and the workspaces share one `Arc`), or equal entry by entry.
fn same_manifest(kept: &Manifest, target: &Manifest) -> bool {
    std::ptr::eq(kept, target) || kept == target
}

/// What a tree holds: the manifest it matches (shared with the workspace that reads it, not
/// copied) and the stat cache of its files.
#[derive(Debug, Clone)]
pub(crate) struct TreeState {
    pub(crate) manifest: Arc<Manifest>,
    pub(crate) stat: StatCache,
    /// Only ever written by this cache and lent out read-only (an overlay's lower layer): it
    /// holds exactly `manifest`, so reusing it applies the manifest difference without
    /// looking at its other files (`sealed.rs`).
    pub(crate) sealed: bool,
}

/// A kept tree taken out of the cache to be brought to a target manifest.
#[derive(Debug)]
pub(crate) struct ClosestTree {
    pub(crate) dir: PathBuf,
    pub(crate) tree: TreeState,
    /// Its manifest's difference from the target, computed once when choosing it.
    pub(crate) changes: Vec<PathChange>,
}

/// Counters for benchmarks and logs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Bytes held on disk (blobs and kept trees).
    pub bytes_held: u64,
    pub trees_kept: usize,
    pub trees_reused: u64,
    pub trees_evicted: u64,
    pub blob_hits: u64,
    pub blobs_evicted: u64,
    /// Cached blobs whose bytes no longer matched their digest.
    pub blobs_corrupt: u64,
    /// Manifest pages taken from the cache instead of the store.
    pub page_hits: u64,
    /// Manifest reads whose head this process had verified or written: put together from
    /// held pages, not checked again.
    pub manifests_known: u64,
}

#[derive(Debug, Default)]
struct State {
    lru: Lru,
    trees: HashMap<u64, TreeState>,
    checked_out: HashMap<PathBuf, (u64, TreeState)>,
    /// Trees lent out read-only as overlays' lower layers, by slot, with how many hold each.
    lent: HashMap<u64, (TreeState, usize)>,
    next_slot: u64,
    next_checkout: u64,
    stats: CacheStats,
    pages: PageCache,
    known: KnownManifests,
}

#[derive(Debug)]
struct Shared {
    root: PathBuf,
    budget: u64,
    state: Mutex<State>,
}

/// A kept tree lent out read-only as the lower layer of overlays (never changed while any
/// lease on it lives); given back to the cache when the last lease is dropped.
#[derive(Debug)]
pub struct LowerLease {
    cache: WorkspaceCache,
    slot: u64,
    path: PathBuf,
}

impl LowerLease {
    /// The tree's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for LowerLease {
    fn drop(&mut self) {
        self.cache.give_back(self.slot);
    }
}

/// Handle on one worker's cache; cheap to clone, safe to share between concurrent episodes.
#[derive(Debug, Clone)]
pub struct WorkspaceCache {
    shared: Arc<Shared>,
}

impl WorkspaceCache {
    /// A cache under `root` holding at most `cache_bytes` (0: keep nothing, every materialize
    /// is cold). `root` is cleared first. Put it on the filesystem of the directories that
    /// will be materialized (trees move by rename).
    pub fn open(root: &Path, cache_bytes: u64) -> Result<WorkspaceCache, SnapshotError> {
        match std::fs::remove_dir_all(root) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(io_error(root, err)),
        }
        for dir in ["blobs", "trees"] {
            let path = root.join(dir);
            std::fs::create_dir_all(&path).map_err(|e| io_error(&path, e))?;
        }
        // The worker's alone: a check or agent run as another user cannot even read it.
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| io_error(root, e))?;
        Ok(WorkspaceCache {
            shared: Arc::new(Shared {
                root: root.to_path_buf(),
                budget: cache_bytes,
                state: Mutex::new(State {
                    pages: PageCache::new(MAX_PAGE_ENTRIES_HELD),
                    ..State::default()
                }),
            }),
        })
    }

    /// Where worker `worker_id` keeps its cache: `<work_dir>/.cache-<worker_id>` (characters
    /// other than ASCII letters, digits and `-` as `_`), on the work dir's filesystem so that
    /// trees move to and from episode and audit directories by rename.
    pub fn worker_root(work_dir: &Path, worker_id: &str) -> PathBuf {
        let name: String = worker_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        work_dir.join(format!(".cache-{name}"))
    }

    /// Worker `worker_id`'s cache under its work dir ([`WorkspaceCache::worker_root`]: the
    /// filesystem of its episode and audit directories, so kept trees move by rename), or
    /// `None` when `cache_bytes` is 0 or it cannot be set up (logged; every materialize is then
    /// from scratch).
    pub fn open_for_worker(
        work_dir: &Path,
        worker_id: &str,
        cache_bytes: u64,
    ) -> Option<WorkspaceCache> {
        if cache_bytes == 0 {
            return None;
        }
        let root = WorkspaceCache::worker_root(work_dir, worker_id);
        match WorkspaceCache::open(&root, cache_bytes) {
            Ok(cache) => Some(cache),
            Err(err) => {
                tracing::warn!(error = %err, root = %root.display(), "warm workspace cache off");
                None
            }
        }
    }

    pub fn root(&self) -> &Path {
        &self.shared.root
    }

    pub fn cache_bytes(&self) -> u64 {
        self.shared.budget
    }

    pub fn stats(&self) -> CacheStats {
        let state = self.lock();
        CacheStats {
            bytes_held: state.lru.bytes(),
            trees_kept: state.trees.len(),
            ..state.stats
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent-enough bookkeeping: keep going.
        self.shared
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn blob_path(&self, sha256: &str) -> PathBuf {
        self.shared.root.join("blobs").join(sha256)
    }

    fn tree_path(&self, slot: u64) -> PathBuf {
        self.shared.root.join("trees").join(slot.to_string())
    }

    /// Is blob `sha256` held (marks it used)?
    pub(crate) fn has_blob(&self, sha256: &str) -> bool {
        self.lock().lru.touch(&Item::Blob(sha256.to_string()))
    }

    pub(crate) fn count_blob_hit(&self) {
        self.lock().stats.blob_hits += 1;
    }

    /// Copy the verified file `from` into the cache as blob `sha256`. Blocking. Best effort:
    /// a cache that cannot store a blob just misses later.
    pub(crate) fn insert_blob(&self, sha256: &str, from: &Path, size: u64) {
        if size + ENTRY_OVERHEAD > self.shared.budget || self.has_blob(sha256) {
            return;
        }
        let dest = self.blob_path(sha256);
        let temp = dest.with_extension(format!("tmp-{}", uuid::Uuid::new_v4().simple()));
        let stored = clone::reflink_or_copy(from, &temp).and_then(|_| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(0o444))?;
            std::fs::rename(&temp, &dest)
        });
        if let Err(err) = stored {
            let _ = std::fs::remove_file(&temp);
            tracing::debug!(error = %err, "caching a blob failed");
            return;
        }
        let evicted = {
            let mut state = self.lock();
            state
                .lru
                .insert(Item::Blob(sha256.to_string()), size + ENTRY_OVERHEAD);
            self.evict_locked(&mut state)
        };
        self.remove_evicted(evicted);
    }

    /// Forget blob `sha256` and delete its file (its bytes did not match). Blocking.
    pub(crate) fn drop_corrupt_blob(&self, sha256: &str) {
        {
            let mut state = self.lock();
            state.lru.remove(&Item::Blob(sha256.to_string()));
            state.stats.blobs_corrupt += 1;
        }
        let _ = std::fs::remove_file(self.blob_path(sha256));
    }

    /// The held manifest page with digest `sha256` (verified when it was first held).
    pub(crate) fn page(&self, sha256: &str) -> Option<Page> {
        let mut state = self.lock();
        let page = state.pages.get(sha256);
        if page.is_some() {
            state.stats.page_hits += 1;
        }
        page
    }

    /// Hold `page`, whose bytes were checked against `sha256`.
    pub(crate) fn hold_page(&self, sha256: &str, page: Page) {
        self.lock().pages.insert(sha256, page);
    }

    /// What this process verified or wrote of manifest `id`, if its head still hashes to
    /// `head_sha256`, and the manifest (kept assembled, else put together from the pages it
    /// stands for), if all its pages are still held.
    pub(crate) fn known_manifest(
        &self,
        id: &str,
        head_sha256: &str,
    ) -> Option<(KnownManifest, Arc<Manifest>)> {
        let (known, held) = {
            let mut state = self.lock();
            let known = state.known.get(id, head_sha256)?;
            let mut held = Vec::with_capacity(known.pages.len());
            for sha in known.pages.iter() {
                held.push(state.pages.get(sha)?);
            }
            state.stats.page_hits += held.len() as u64;
            state.stats.manifests_known += 1;
            (known, held)
        };
        if let Some(manifest) = known.assembled.clone() {
            // Kept as verified or written: shared, not copied.
            return Some((known, manifest));
        }
        // Copied out of the pages after the lock is let go.
        let mut entries = Vec::with_capacity(held.iter().map(|page| page.len()).sum());
        for page in &held {
            entries.extend(page.iter().cloned());
        }
        let manifest = Arc::new(Manifest {
            v: known.v,
            entries,
        });
        Some((known, manifest))
    }

    /// Remember manifest `id` as verified (or written) by this process.
    pub(crate) fn remember_manifest(&self, id: &str, known: KnownManifest) {
        self.lock().known.insert(id, known);
    }

    /// Is page `sha256` held (marked used)?
    pub(crate) fn holds_page(&self, sha256: &str) -> bool {
        self.lock().pages.get(sha256).is_some()
    }

    /// Take the kept tree closest to `target` out of the cache: its directory, its state and
    /// how its manifest differs from `target`.
    pub(crate) fn take_closest(&self, target: &Manifest) -> Option<ClosestTree> {
        let mut state = self.lock();
        let mut best: Option<(u64, Vec<PathChange>)> = None;
        for (&slot, tree) in &state.trees {
            let changes = diff_manifests(&tree.manifest, target);
            // A tree that differs in more paths than the target has is worse than an empty dir.
            let closer = best
                .as_ref()
                .is_none_or(|(at, least)| (changes.len(), slot) < (least.len(), *at));
            if changes.len() <= target.entries.len() && closer {
                best = Some((slot, changes));
            }
        }
        let (slot, changes) = best?;
        let tree = state.trees.remove(&slot)?;
        state.lru.remove(&Item::Tree(slot));
        state.stats.trees_reused += 1;
        Some(ClosestTree {
            dir: self.tree_path(slot),
            tree,
            changes,
        })
    }

    /// Remember that `dir` now holds `tree` (materialized or frozen through this cache).
    pub(crate) fn record_checkout(&self, dir: &Path, tree: TreeState) {
        let mut state = self.lock();
        state.next_checkout += 1;
        let order = state.next_checkout;
        state.checked_out.insert(dir.to_path_buf(), (order, tree));
        while state.checked_out.len() > MAX_CHECKED_OUT {
            let oldest = state
                .checked_out
                .iter()
                .min_by_key(|(_, (order, _))| *order)
                .map(|(path, _)| path.clone());
            match oldest {
                Some(path) => state.checked_out.remove(&path),
                None => break,
            };
        }
    }

    /// What `dir` holds, if it was materialized or frozen through this cache (forgotten here).
    pub(crate) fn take_checkout(&self, dir: &Path) -> Option<TreeState> {
        self.lock().checked_out.remove(dir).map(|(_, tree)| tree)
    }

    /// A kept tree that holds exactly `target` and only ever held what this cache wrote
    /// (sealed), lent out read-only: one already lent is shared. None: there is none.
    pub(crate) fn lend_held(&self, target: &Manifest) -> Option<LowerLease> {
        let mut state = self.lock();
        if let Some((slot, lent)) = state
            .lent
            .iter_mut()
            .find(|(_, (tree, _))| same_manifest(&tree.manifest, target))
        {
            lent.1 += 1;
            let slot = *slot;
            return Some(self.lease(slot));
        }
        let slot = state
            .trees
            .iter()
            .find(|(_, tree)| tree.sealed && same_manifest(&tree.manifest, target))
            .map(|(slot, _)| *slot)?;
        let tree = state.trees.remove(&slot)?;
        state.lru.remove(&Item::Tree(slot));
        state.stats.trees_reused += 1;
        state.lent.insert(slot, (tree, 1));
        Some(self.lease(slot))
    }

    /// A fresh tree slot's directory (not yet created) for a tree to lend out.
    pub(crate) fn new_tree_slot(&self) -> (u64, PathBuf) {
        let mut state = self.lock();
        state.next_slot += 1;
        let slot = state.next_slot;
        (slot, self.tree_path(slot))
    }

    /// Lend out the tree this cache just wrote in `slot`'s directory, holding `tree`; from
    /// now on it is sealed: nothing but this cache writes it.
    pub(crate) fn lend_new(&self, slot: u64, mut tree: TreeState) -> LowerLease {
        tree.sealed = true;
        self.lock().lent.insert(slot, (tree, 1));
        self.lease(slot)
    }

    fn lease(&self, slot: u64) -> LowerLease {
        LowerLease {
            cache: self.clone(),
            slot,
            path: self.tree_path(slot),
        }
    }

    /// One holder of lent tree `slot` is done with it; the last one puts it back among the
    /// kept trees (reusable, evictable).
    fn give_back(&self, slot: u64) {
        let evicted = {
            let mut state = self.lock();
            let Some((_, users)) = state.lent.get_mut(&slot) else {
                return;
            };
            *users = users.saturating_sub(1);
            if *users > 0 {
                return;
            }
            let Some((tree, _)) = state.lent.remove(&slot) else {
                return;
            };
            let bytes = tree_charge(&tree.manifest);
            state.trees.insert(slot, tree);
            state.lru.insert(Item::Tree(slot), bytes);
            self.evict_locked(&mut state)
        };
        if evicted.is_empty() {
            return;
        }
        let cache = self.clone();
        // Removing evicted trees blocks: off the async threads where there are some.
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn_blocking(move || cache.remove_evicted(evicted));
            }
            Err(_) => cache.remove_evicted(evicted),
        }
    }

    /// Move `dir` (materialized or frozen through this cache, and not changed since, or its
    /// changes are caught by the stat cache) back into the cache for a later materialize.
    /// Returns false, leaving `dir` alone, when the cache does not know it.
    pub async fn check_in(&self, dir: &Path) -> Result<bool, SnapshotError> {
        let Some(tree) = self.take_checkout(dir) else {
            return Ok(false);
        };
        let bytes = tree_charge(&tree.manifest);
        if self.shared.budget == 0 || bytes > self.shared.budget {
            return Ok(false);
        }
        let slot = {
            let mut state = self.lock();
            state.next_slot += 1;
            state.next_slot
        };
        let to = self.tree_path(slot);
        tokio::fs::rename(dir, &to)
            .await
            .map_err(|e| io_error(dir, e))?;
        let evicted = {
            let mut state = self.lock();
            state.trees.insert(slot, tree);
            state.lru.insert(Item::Tree(slot), bytes);
            self.evict_locked(&mut state)
        };
        let cache = self.clone();
        // Removing evicted trees blocks: keep it off the async threads.
        let _ = tokio::task::spawn_blocking(move || cache.remove_evicted(evicted)).await;
        Ok(true)
    }

    fn evict_locked(&self, state: &mut State) -> Vec<PathBuf> {
        state
            .lru
            .evict_to(self.shared.budget)
            .into_iter()
            .map(|item| match item {
                Item::Blob(sha256) => {
                    state.stats.blobs_evicted += 1;
                    self.blob_path(&sha256)
                }
                Item::Tree(slot) => {
                    state.trees.remove(&slot);
                    state.stats.trees_evicted += 1;
                    self.tree_path(slot)
                }
            })
            .collect()
    }

    fn remove_evicted(&self, paths: Vec<PathBuf>) {
        for path in paths {
            let removed = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            if let Err(err) = removed {
                tracing::warn!(path = %path.display(), error = %err, "removing an evicted cache entry");
            }
        }
    }
}
