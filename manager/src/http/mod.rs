//! The manager's HTTP API: submit, inspect, stream, steer runs and read snapshots, with the
//! OpenAPI document generated from the same routes. Request and response types live in
//! `loopgate-api`; this module answers with them.
//!
//! `state` (the shared state and loading a run) and `error` (the JSON error) import no handler
//! file; the handler files import them; `router` imports everything.

mod auth;
mod catalog;
mod certificate;
mod console;
mod contract;
mod error;
mod extract;
mod openapi;
mod probes;
mod rounds;
mod router;
mod run_actions;
mod run_log;
mod run_patch;
mod runs;
mod screenshots;
mod snapshot_diff;
mod snapshots;
mod state;
mod steering;
mod strict_json;
mod transcript;
mod views;

pub use router::{openapi_document, router};
pub use state::ApiState;
