//! loopgate-common: domain types, wire messages, subjects and pure decision logic. No I/O.
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)
)]

pub mod audit_parse;
pub mod budget;
pub mod capabilities;
pub mod clause_reading;
pub mod config;
pub mod contract;
pub mod contract_proposal;
pub mod decide;
pub mod gate;
pub mod git_diff;
pub mod goal_calls;
pub mod goal_criteria;
pub mod goal_words;
pub mod gui;
mod json_span;
pub mod named_tool_calls;
pub mod next_step;
pub mod output_cap;
pub mod path_hints;
pub mod prompts;
pub mod protected_paths;
pub mod redact;
pub mod report_claims;
pub mod report_signing;
pub mod rubric;
pub mod snapshot;
pub mod state;
pub mod subject_binding;
pub mod subjects;
pub mod task;
pub mod tool_call_parse;
pub mod unified_diff;
pub mod usage;
pub mod verdict;
pub mod wire;
