//! loopgate-manager: the control plane. Stateless: every transition is load -> decide -> CAS.

pub mod api_error;
pub mod config;
pub mod decision;
pub mod engine;
pub mod http_api;
pub mod results_loop;
pub mod run_view;
