//! loopgate-transport: the async adapters every binary shares — the NATS JetStream bus and its
//! work consumers, the content-addressed snapshot store on the object store, the Redis run
//! store, and logging setup.

mod audit_queue;
pub mod bus;
pub mod control_listener;
pub mod metrics;
pub mod metrics_server;
pub mod otel;
mod otel_runtime;
pub mod run_store;
mod snapshot_chunks;
pub mod snapshot_evidence;
pub mod snapshot_freeze;
pub mod snapshot_gc;
pub mod snapshot_manifests;
pub mod snapshot_materialize;
pub mod snapshot_stat_cache;
pub mod snapshot_store;
pub mod snapshot_upload;
pub mod telemetry;
pub mod work_consumer;

pub use bus::{
    inbox_prefix_for_user, Bus, BusError, BusOptions, Subscriber, DUPLICATE_WINDOW, EVENTS_MAX_AGE,
};
pub use run_store::{CasOutcome, CasWrite, LogRecord, RunStore, StoreError, Versioned};
pub use snapshot_evidence::EVIDENCE_BUCKET;
pub use snapshot_freeze::{
    FreezeRules, Refusal, DEFAULT_IGNORES, DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_TOTAL_BYTES,
};
pub use snapshot_gc::{GcReport, GcRoots, DEFAULT_GC_GRACE};
pub use snapshot_stat_cache::StatCache;
pub use snapshot_store::{FreezeOutcome, SnapshotError, SnapshotStore};
pub use telemetry::init_logging;
pub use work_consumer::{ConsumerOptions, Delivery, ProgressHandle, Work, WorkConsumer};
