//! Overlay workspaces: an episode's workspace is an overlayfs mount whose read-only lower layer
//! is a sealed tree of the worker's cache (the base snapshot, lent out, see
//! [`crate::LowerLease`]) and whose upper layer is a fresh directory of the episode's own.
//! Materializing is a mount (plus the manifest difference when no kept tree holds the base
//! yet); a freeze reads only the upper layer (`upper.rs`), the lower being the base's files
//! exactly, since nothing but the cache writes it.
//!
//! `mount.rs`: the mount, the unmount and the start-up probe; `upper.rs`: what the upper layer
//! says changed; `workspace.rs`: [`crate::SnapshotStore::materialize_overlay`] and
//! [`crate::SnapshotStore::freeze_overlay`].

pub mod mount;
mod upper;
mod workspace;

pub use mount::{probe, unmount_stale, OverlayLayers};
pub use workspace::OverlayWorkspace;
