//! loopgate-common: the run's pure core: the task file, budgets, the contract a run holds
//! (with its derived goal criteria, `goal`), the stored run record (`state`), the state machine
//! (`decide`) and the gate. What crosses the wire lives in `loopgate-protocol`. No I/O.
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)
)]

pub mod apply_message;
pub mod budget;
pub mod config;
pub mod contract_proposal;
pub mod decide;
pub mod gate;
pub mod git_diff;
pub mod goal;
pub mod json_span;
pub mod next_step;
pub mod output_cap;
pub mod prompt_template;
pub mod redact;
pub mod state;
pub mod task;
pub mod unified_diff;
