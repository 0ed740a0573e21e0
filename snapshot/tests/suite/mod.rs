mod snapshot_scale;
mod snapshots;
