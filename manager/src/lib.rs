//! loopgate-manager: the control plane. Stateless: every transition is load -> decide -> CAS.
//!
//! `http/` (the API), `engine` (load, pure decide, compare-and-set, publish the outbox),
//! `results_loop` (results, reports and decision requests on the shared runtime), `admission`
//! (each message on its own subject, reports signed by a trusted auditor key), `decision`
//! (the manager model's turn), `outbox` (the relay of effects left unpublished),
//! `deadline_sweeper`, `snapshot_gc_loop`, `gauges`, `run_store`
//! (Redis, this crate's alone), `config`.
#![warn(unreachable_pub)]

mod admission;
pub mod config;
mod dead_letters;
mod deadline_sweeper;
mod decision;
mod effects;
mod engine;
mod gauges;
mod http;
mod outbox;
mod overdue_results;
mod protected_paths;
mod results_loop;
mod run_admission;
pub mod run_store;
mod snapshot_gc_loop;

pub use admission::log_report_trust;
pub use dead_letters::DeadLetterLoop;
pub use deadline_sweeper::{DeadlineSweeper, Serving};
pub use engine::{Applied, Engine, EngineError};
pub use gauges::run_gauges;
pub use http::{openapi_document, router, ApiState};
pub use outbox::{OutboxRelay, RELAY_EVERY, REPUBLISH_AFTER};
pub use overdue_results::{OverdueResults, OVERDUE_EVERY};
pub use results_loop::ResultsLoop;
pub use run_admission::RunAdmission;
pub use snapshot_gc_loop::SnapshotGc;
