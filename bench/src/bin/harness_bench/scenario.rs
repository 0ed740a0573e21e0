//! The measured scenario: `loopgate_bench::round_scenario` with an instant stand-in model.

use std::time::Duration;

use loopgate_test_support::StandInModel;

pub use loopgate_bench::round_scenario::{stack_options, EXECUTOR_MODEL, TERMINAL};

/// The stand-in with no latency.
pub async fn standin() -> anyhow::Result<StandInModel> {
    loopgate_bench::round_scenario::standin(Duration::ZERO).await
}

/// The harness bench's task of `rounds` rounds.
pub fn task_toml(rounds: u32) -> String {
    loopgate_bench::round_scenario::task_toml("harness-bench", rounds)
}
