//! Warm workspaces: a worker's local, content-addressed cache of blobs (`blobs/<sha256>`) and
//! of the trees of recent snapshots (`trees/<slot>`), bounded by `cache_bytes` and evicted
//! least recently used first.
//!
//! A materialize ([`crate::SnapshotStore::materialize_warm`]) takes the kept tree closest to
//! the snapshot (fewest differing paths) out of the cache, moves it to the destination and
//! applies the manifest difference (`reconcile.rs`, `warm.rs`), so a one-file change costs
//! about one file. The tree is *checked out*: no one else can get it until
//! [`WorkspaceCache::check_in`] moves it back, so two materializes never share a directory.
//!
//! Trust: the cache's directory belongs to the worker; agents and checks only ever see
//! checked-out trees and copies (reflinks or plain copies, never hard links, see `clone.rs`).
//! Nothing read from the cache is taken on faith: a blob is re-hashed each time it is used (a
//! changed one is an `Integrity` error and is dropped), and a kept file of a reused tree is kept
//! only when its stat still matches the stat cache recorded when its content was last verified
//! (the same rule as freezing by stat cache, see `stat_cache.rs`), else it is re-hashed.
//! The cache starts empty: [`WorkspaceCache::open`] clears what an earlier process left.

mod clone;
mod fill;
pub(crate) mod known;
mod lru;
pub(crate) mod pages;
mod reconcile;
mod sealed;
mod warm;
mod workspace_cache;

pub(crate) use warm::TreeUse;
pub use warm::WarmReport;
pub use workspace_cache::{CacheStats, LowerLease, WorkspaceCache};
