mod bus;
mod run_store;
mod snapshot_scale;
mod snapshots;
