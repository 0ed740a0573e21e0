//! loopgate-manager: the control plane. Stateless: every transition is load -> decide -> CAS.

pub mod api_error;
pub mod config;
pub mod deadline_sweeper;
pub mod decision;
pub mod engine;
pub mod gauges;
pub mod http_api;
pub mod http_auth;
pub mod http_contract;
pub mod http_rounds;
pub mod openapi;
pub mod results_loop;
pub mod run_store;
pub mod run_view;
pub mod snapshot_gc_loop;
