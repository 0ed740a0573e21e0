//! Manager benchmark (not a test): drive one run for 100 rounds against an instant stand-in
//! model over the real stack (nats-server, redis-server, manager, executor and auditor as
//! separate processes) and print a table of manager prompt sizes and per-round harness time.
//!
//! `cargo build --release --workspace --bins && cargo run --release -p loopgate-tests --bin manager-bench [-- --json PATH]`
//!
//! `--json PATH` also writes the numbers there (read by `bench-report`).
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used
)]

use std::time::{Duration, Instant};

use loopgate_test_support::{last_message_content, Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions};
use serde_json::{json, Value};

const ROUNDS: u32 = 100;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn json_path() -> anyhow::Result<Option<std::path::PathBuf>> {
    let mut args = std::env::args().skip(1);
    let mut path = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--json" => {
                path = Some(
                    args.next()
                        .ok_or_else(|| anyhow::anyhow!("--json needs a path"))?
                        .into(),
                )
            }
            other => {
                anyhow::bail!("unknown argument '{other}' (usage: manager-bench [--json PATH])")
            }
        }
    }
    Ok(path)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let json_out = json_path()?;
    let executor = Reply::dynamic(|req: &Value| {
        let last_role = req["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["role"].as_str())
            .unwrap_or("");
        if last_role == "tool" {
            Reply::tool_call("finish", json!({"summary": "wrote notes"}))
        } else {
            let step = last_message_content(req, "user").unwrap_or_default().len();
            Reply::tool_call(
                "write_file",
                json!({"path": "notes.txt", "content": format!("attempt {step}\n")}),
            )
        }
    });
    // A long, varied manager reply so the task state and history really grow.
    let manager = Reply::dynamic(|req: &Value| {
        let n = last_message_content(req, "user").unwrap_or_default().len();
        Reply::content(format!(
            "Current task state: the check still fails after many attempts; prompt was {n} chars. {}\nNext: cli\nTask: try another approach to make the check pass, attempt {n}. {}",
            "Details of what was tried so far. ".repeat(20),
            "Be careful with the exact output format. ".repeat(20)
        ))
    });
    let model = StandInModel::start(
        Script::new()
            .fallback("standin-manager", manager)
            .fallback("standin-executor", executor),
    )
    .await?;
    let profiles = vec![
        Profile::new("mgr", &model.base_url(), "standin-manager"),
        Profile::new("exec", &model.base_url(), "standin-executor"),
    ];
    let stack = Stack::start(StackOptions::new(profiles, 1)).await?;
    let task = format!(
        r#"
goal = "Make the acceptance check pass (it never does: this run exists to measure the harness)"
[[acceptance]]
id = "never"
description = "a check that always fails, with a long output"
check = "seq 1 400; exit 1"
[roles]
manager = "mgr"
executor = "exec"
[budget]
max_rounds = {ROUNDS}
max_failed_rounds = 1000
"#
    );
    let started = Instant::now();
    let id = stack.submit(&task, &[]).await?["id"]
        .as_str()
        .unwrap()
        .to_string();
    let done = stack.wait_terminal(&id, Duration::from_secs(1800)).await?;
    let wall = started.elapsed();
    let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
    let entries = log["entries"].as_array().cloned().unwrap_or_default();
    let dispatch_at: Vec<f64> = entries
        .iter()
        .filter(|e| e["type"] == "exec_dispatched")
        .map(|e| e["at"].as_f64().unwrap_or(0.0))
        .collect();
    let mut per_round: Vec<f64> = dispatch_at.windows(2).map(|w| w[1] - w[0]).collect();
    per_round.sort_by(|a, b| a.total_cmp(b));

    let prompts = model.requests("standin-manager");
    println!(
        "loopgate manager benchmark — {} rounds, instant stand-in model, final state {}",
        dispatch_at.len(),
        done["state"]
    );
    println!();
    println!("| round | manager prompt chars (system + user) |");
    println!("|------:|------------------------------------:|");
    let mut prompt_rows = Vec::new();
    for round in [1usize, 5, 10, 25, 50, 100] {
        if let Some(req) = prompts.get(round - 1) {
            let chars: usize = req["messages"]
                .as_array()
                .map(|ms| {
                    ms.iter()
                        .map(|m| m["content"].as_str().unwrap_or("").chars().count())
                        .sum()
                })
                .unwrap_or(0);
            println!("| {round:>5} | {chars:>35} |");
            prompt_rows.push(json!({"round": round, "prompt_chars": chars}));
        }
    }
    println!();
    println!("Harness time per round (dispatch to next dispatch: manager decision + executor episode with 2 model");
    println!("calls + freeze + audit with 1 check + 4 NATS hops + Redis CAS; the stand-in answers in well under 1 ms):");
    println!();
    println!("| rounds | p50 ms | p99 ms | max ms | total wall s |");
    println!("|-------:|-------:|-------:|-------:|-------------:|");
    println!(
        "| {:>6} | {:>6.1} | {:>6.1} | {:>6.1} | {:>12.1} |",
        per_round.len(),
        percentile(&per_round, 0.50),
        percentile(&per_round, 0.99),
        per_round.last().copied().unwrap_or(f64::NAN),
        wall.as_secs_f64()
    );
    if let Some(path) = json_out {
        let doc = json!({
            "bench": "manager",
            "rounds": dispatch_at.len(),
            "final_state": done["state"],
            "prompt_chars": prompt_rows,
            "prompt_chars_every_round": prompts.iter().map(|req| {
                req["messages"].as_array().map(|ms| {
                    ms.iter().map(|m| m["content"].as_str().unwrap_or("").chars().count()).sum::<usize>()
                }).unwrap_or(0)
            }).collect::<Vec<_>>(),
            "per_round_ms": {
                "n": per_round.len(),
                "p50": percentile(&per_round, 0.50),
                "p99": percentile(&per_round, 0.99),
                "max": per_round.last().copied(),
            },
            "check": "seq 1 400; exit 1 (always fails, long output)",
            "wall_s": wall.as_secs_f64(),
        });
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, serde_json::to_string_pretty(&doc)? + "\n")?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
