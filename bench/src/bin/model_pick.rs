//! Which local model should the demo use? Runs the demo task (examples/hello) N times with each
//! local Qwen2.5-Coder size over the real stack and prints completion rate, rounds and time.
//!
//! `cargo run --release -p loopgate-tests --bin model-pick -- [runs per model, default 2]`
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used
)]

use std::time::{Duration, Instant};

use loopgate_test_support::LocalModel;
use loopgate_tests::{Profile, Stack, StackOptions};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2);
    let task = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/hello/task.toml"
    ))?;
    println!("| model | runs | completed | mean rounds | mean wall s | tool calls |");
    println!("|---|---:|---:|---:|---:|---:|");
    for size in ["0.5b", "1.5b"] {
        let Some(llm) = LocalModel::start(size).await? else {
            println!(
                "| {size} | SKIPPED: {} | | | | |",
                LocalModel::unavailable_reason(size).unwrap_or_default()
            );
            continue;
        };
        let mut completed = 0;
        let mut rounds = 0u64;
        let mut wall = Duration::ZERO;
        let mut tools = 0u64;
        for i in 0..runs {
            let mut profile = Profile::new("local", &llm.base_url(), llm.model_name());
            profile.timeout_secs = 600;
            let stack = Stack::start(StackOptions::new(vec![profile], 2)).await?;
            let started = Instant::now();
            let id = stack.submit(&task, &[]).await?["id"]
                .as_str()
                .unwrap()
                .to_string();
            let done = stack.wait_terminal(&id, Duration::from_secs(3600)).await?;
            let took = started.elapsed();
            wall += took;
            rounds += done["round"].as_u64().unwrap_or(0);
            let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
            tools += log["entries"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["type"] == "exec_result")
                .map(|e| e["tool_calls"].as_u64().unwrap_or(0))
                .sum::<u64>();
            if done["state"] == "completed" {
                completed += 1;
            }
            eprintln!(
                "{size} run {i}: {} after {} rounds in {:.0} s",
                done["state"],
                done["round"],
                took.as_secs_f64()
            );
        }
        println!(
            "| {size} | {runs} | {completed} | {:.1} | {:.0} | {:.1} |",
            rounds as f64 / runs as f64,
            wall.as_secs_f64() / runs as f64,
            tools as f64 / runs as f64
        );
    }
    Ok(())
}
