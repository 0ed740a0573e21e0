//! loopgate-snapshot: content-addressed snapshots on the JetStream object store. A workspace is
//! frozen into blobs (one per distinct content) and a manifest whose sha256 is the snapshot id;
//! readers materialize it again, re-hashing every blob. Also the evidence bucket (full check
//! outputs), the stat cache that spares re-hashing unchanged files, and garbage collection.
//!
//! Modules: `error` (the one error type, no dependencies on the rest), `store` (the bucket
//! handle and blob reads/writes), `chunks` (direct-get chunk reads), `freeze` (the blocking
//! half: the workspace listed by `loopgate_workspace_walk` on all cores, size limits, hashing),
//! `upload` (freeze + upload), `manifests` (flat and paged manifests; `manifest_read`: their
//! groups and pages fetched and checked), `manifest_limits` (the
//! `[snapshot]` caps readers and writers hold manifests to), `packed` (manifest objects stored
//! zstd-compressed, decoded within caps), `materialize`,
//! `stat_cache`, `gc`, `evidence`, `cache` (warm workspaces: kept trees and blobs), and
//! `overlay` (episode workspaces as overlays over a kept tree, frozen from the upper layer).

pub mod cache;
mod chunks;
mod error;
mod evidence;
pub mod freeze;
pub mod gc;
mod gc_chunks;
mod manifest_limits;
mod manifest_read;
pub mod manifests;
mod materialize;
mod object_write;
pub mod overlay;
mod packed;
pub mod stat_cache;
mod store;
mod upload;

pub use cache::{CacheStats, LowerLease, WarmReport, WorkspaceCache};
pub use error::{Refusal, SnapshotError};
pub use evidence::EVIDENCE_BUCKET;
pub use freeze::{FreezeRules, DEFAULT_IGNORES, DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_TOTAL_BYTES};
pub use gc::{GcRefusal, GcReport, GcRoots, DEFAULT_GC_GRACE, MIN_SAFE_GC_GRACE};
pub use gc_chunks::ChunkSweep;
pub use loopgate_common::config::SnapshotLimits;
pub use overlay::OverlayWorkspace;
pub use stat_cache::StatCache;
pub use store::{
    blob_object_name, manifest_object_name, FreezeOutcome, SnapshotStore, BLOB_REFRESH_AFTER,
    MAX_BLOB_READ_BYTES,
};
