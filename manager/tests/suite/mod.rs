mod bad_snapshots;
mod failover;
mod http_edges;
mod outbox;
mod run_store;
