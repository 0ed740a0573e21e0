mod outbox;
mod run_store;
