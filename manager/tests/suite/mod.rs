mod bad_snapshots;
mod http_edges;
mod outbox;
mod run_store;
