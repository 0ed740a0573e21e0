//! loopgate-manager: the control plane. Stateless: every transition is load -> decide -> CAS.

pub mod config;
pub mod deadline_sweeper;
pub mod decision;
pub mod engine;
pub mod gauges;
pub mod http;
pub mod results_loop;
pub mod run_store;
pub mod snapshot_gc_loop;
