mod snapshot_scale;
mod snapshots;
mod warm_cache;
