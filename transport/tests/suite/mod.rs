mod bus;
mod run_store;
mod snapshots;
