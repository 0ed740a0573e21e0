//! loopgate-protocol: what crosses NATS and HTTP between the roles. Versioned wire envelopes
//! (`wire`), the subjects and the rule binding each message kind to its subject (`subjects`),
//! signed audit reports (`report`), worker capabilities, snapshot manifests and ids, the
//! contract and its criteria, verdicts and evidence, the rubric, token usage and the dispatch
//! id every request is deduplicated by. Types and pure functions only: no I/O.
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)
)]

pub mod capabilities;
pub mod contract;
pub mod dispatch_id;
pub mod gui;
pub mod report;
pub mod rubric;
pub mod snapshot;
pub mod subjects;
pub mod transcript;
pub mod usage;
pub mod verdict;
pub mod wire;
