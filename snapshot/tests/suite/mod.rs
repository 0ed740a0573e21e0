mod bucket_limits;
mod snapshot_scale;
mod snapshots;
mod warm_cache;
