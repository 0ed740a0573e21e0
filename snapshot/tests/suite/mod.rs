mod bucket_limits;
mod compressed_manifests;
mod known_manifests;
mod orphan_chunks;
mod overlay_workspaces;
mod snapshot_scale;
mod snapshots;
mod warm_cache;
