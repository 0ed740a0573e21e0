//! The daemons' config files as written (raw, `deny_unknown_fields`), defined once: the tables
//! every daemon shares (`[nats]`, `[metrics]`, `[snapshot]`) and each daemon's own table
//! (`[redis]`, `[http]`, `[manager]`; `[executor]`; `[auditor]`). The daemons read and resolve
//! them; `loopgate up` writes its local stack's files from the same types. Env values are
//! passed in by `main`, never read here.

mod auditor_file;
mod error;
mod executor_file;
mod manager_file;
mod metrics;
mod nats;
mod sandbox_mode;
mod snapshot;

pub use auditor_file::AuditorSection;
pub use error::ConfigError;
pub use executor_file::{AgentNetwork, ExecutorSection};
pub use manager_file::{HttpSection, ManagerSection, RedisSection};
pub use metrics::MetricsSection;
pub use nats::{NatsSection, NatsSettings, DEFAULT_NATS_URL};
pub use sandbox_mode::SandboxMode;
pub use snapshot::{
    SnapshotLimits, SnapshotSection, DEFAULT_MAX_MANIFEST_ENTRIES, DEFAULT_MAX_TREE_BYTES,
};
