mod bad_snapshots;
mod outbox;
mod run_store;
