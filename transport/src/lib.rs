//! loopgate-transport: the async adapters every binary shares — the NATS JetStream bus and its
//! work consumers, the content-addressed snapshot store on the object store, the Redis run
//! store, and logging setup.

pub mod bus;
pub mod run_store;
pub mod snapshot_freeze;
pub mod snapshot_materialize;
pub mod snapshot_store;
pub mod telemetry;
pub mod work_consumer;

pub use bus::{Bus, BusError, BusOptions, Subscriber, DUPLICATE_WINDOW, EVENTS_MAX_AGE};
pub use run_store::{CasOutcome, CasWrite, LogRecord, RunStore, StoreError, Versioned};
pub use snapshot_freeze::{FreezeRules, Refusal, DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_TOTAL_BYTES};
pub use snapshot_store::{FreezeOutcome, SnapshotError, SnapshotStore};
pub use telemetry::init_logging;
pub use work_consumer::{ConsumerOptions, Delivery, ProgressHandle, Work, WorkConsumer};
