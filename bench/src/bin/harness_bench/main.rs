//! Harness benchmark (not a test): what loopgate itself costs per round and how many rounds it
//! turns over, with an instant stand-in model and a no-op check, over real nats-server and
//! redis-server with the manager, executor and auditor binaries as separate processes.
//!
//! 1. Per-round overhead: `--runs` runs of `--rounds` rounds, one at a time (p50/p95/p99, split
//!    into parts), plus the loopback floor measured in-process and the ratio to it.
//! 2. Throughput: concurrent runs x executors (`--matrix-runs`, `--matrix-executors`), runs of
//!    `--matrix-rounds` rounds; rounds/s, runs/s and peak RSS of every process.
//!
//! Prints tables; `--out DIR` also writes `harness.json` and `throughput.json` there.
//!
//! `cargo build --release -p loopgate-manager -p loopgate-executor -p loopgate-auditor -p loopgate-tests --bins`
//! then `$CARGO_TARGET_DIR/release/harness-bench --out target/bench`
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used
)]

mod floor;
mod latency;
mod scenario;
mod stats;
mod throughput;

use std::path::PathBuf;

use anyhow::{bail, Context};
use loopgate_tests::Stack;
use serde_json::{json, Value};

use crate::stats::{now_rfc3339, Summary};

struct Args {
    out: Option<PathBuf>,
    runs: usize,
    rounds: u32,
    floor_samples: usize,
    matrix_runs: Vec<usize>,
    matrix_executors: Vec<usize>,
    /// `[auditor] concurrency` of the one auditor, per cell.
    matrix_auditors: Vec<usize>,
    matrix_rounds: u32,
    skip_latency: bool,
    skip_matrix: bool,
}

fn list(value: &str) -> anyhow::Result<Vec<usize>> {
    value
        .split(',')
        .map(|v| {
            v.trim()
                .parse()
                .with_context(|| format!("bad number '{v}'"))
        })
        .collect()
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        out: None,
        runs: 4,
        rounds: 300,
        floor_samples: 1000,
        matrix_runs: vec![1, 10, 100],
        matrix_executors: vec![1, 2, 4],
        matrix_auditors: vec![1],
        matrix_rounds: 3,
        skip_latency: false,
        skip_matrix: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--out" => args.out = Some(PathBuf::from(value()?)),
            "--runs" => args.runs = value()?.parse()?,
            "--rounds" => args.rounds = value()?.parse()?,
            "--floor-samples" => args.floor_samples = value()?.parse()?,
            "--matrix-runs" => args.matrix_runs = list(&value()?)?,
            "--matrix-executors" => args.matrix_executors = list(&value()?)?,
            "--matrix-auditors" => args.matrix_auditors = list(&value()?)?,
            "--matrix-rounds" => args.matrix_rounds = value()?.parse()?,
            "--skip-latency" => args.skip_latency = true,
            "--skip-matrix" => args.skip_matrix = true,
            "-h" | "--help" => {
                println!("harness-bench [--out DIR] [--runs 4] [--rounds 300] [--floor-samples 1000] [--matrix-runs 1,10,100] [--matrix-executors 1,2,4] [--matrix-auditors 1] [--matrix-rounds 3] [--skip-latency] [--skip-matrix]");
                std::process::exit(0);
            }
            other => bail!("unknown argument '{other}' (see --help)"),
        }
    }
    if !(1..=1000).contains(&args.rounds) {
        bail!("--rounds must be 1..=1000 (the task budget's hard cap)");
    }
    Ok(args)
}

fn write_json(out: &Option<PathBuf>, name: &str, value: &Value) -> anyhow::Result<()> {
    if let Some(dir) = out {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(name);
        std::fs::write(&path, serde_json::to_string_pretty(value)? + "\n")?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

fn row(label: &str, s: &Summary) -> String {
    format!(
        "| {label:<24} | {:>7.2} | {:>7.2} | {:>7.2} | {:>7.2} |",
        s.p50, s.p95, s.p99, s.mean
    )
}

async fn latency_part(args: &Args, command: &str) -> anyhow::Result<()> {
    let started_at = now_rfc3339();
    let model = scenario::standin().await?;
    let stack = Stack::start(scenario::stack_options(&model, 1)).await?;
    let latency = latency::measure(&stack, args.runs, args.rounds).await?;
    eprintln!(
        "measuring the floor and components ({} samples)",
        args.floor_samples
    );
    let floor = floor::measure(
        &stack.nats.url(),
        &stack.redis.url(),
        &latency.last_run,
        (&model.base_url(), scenario::EXECUTOR_MODEL),
        args.floor_samples,
    )
    .await?;
    drop(stack);

    println!(
        "\nPer-round harness overhead: {} rounds ({} runs x {} rounds, one at a time), 1 executor, \
         instant stand-in model, check `true`\n",
        latency.round.n, args.runs, args.rounds
    );
    println!("| part                     |  p50 ms |  p95 ms |  p99 ms | mean ms |");
    println!("|--------------------------|--------:|--------:|--------:|--------:|");
    println!("{}", row("round (dispatch→dispatch)", &latency.round));
    for ((id, _), s) in latency::PARTS.iter().zip(&latency.parts) {
        println!("{}", row(id, s));
    }
    let floor_ms = floor.floor_ms();
    println!(
        "\nFloor: {} JetStream hops x {:.3} ms + {} Redis RTTs x {:.3} ms = {:.2} ms; \
         round p50/p95/p99 = {:.1}x / {:.1}x / {:.1}x the floor",
        floor::HOPS_PER_ROUND,
        floor.hop.p50,
        floor::REDIS_RTTS_PER_ROUND,
        floor.ping.p50,
        floor_ms,
        latency.round.p50 / floor_ms,
        latency.round.p95 / floor_ms,
        latency.round.p99 / floor_ms
    );
    println!("\n| component (in-process)   |  p50 ms |  p95 ms |  p99 ms | mean ms |");
    println!("|--------------------------|--------:|--------:|--------:|--------:|");
    for (label, s) in [
        ("JetStream hop", &floor.hop),
        ("Redis PING", &floor.ping),
        ("run store load (HMGET)", &floor.load),
        ("run store CAS (EVALSHA)", &floor.cas),
        ("freeze (2 files)", &floor.freeze),
        ("materialize (2 files)", &floor.materialize),
        ("spawn sh -c true", &floor.spawn_true),
        ("stand-in chat call", &floor.chat),
    ] {
        println!("{}", row(label, s));
    }
    let mut doc = latency.json;
    doc["bench"] = json!("harness");
    doc["command"] = json!(command);
    doc["started_at"] = json!(started_at);
    doc["finished_at"] = json!(now_rfc3339());
    doc["floor"] = floor.json(&latency.round);
    doc["components"] = floor.components_json();
    write_json(&args.out, "harness.json", &doc)
}

async fn matrix_part(args: &Args, command: &str) -> anyhow::Result<()> {
    let started_at = now_rfc3339();
    let model = scenario::standin().await?;
    let mut cells = Vec::new();
    for &auditors in &args.matrix_auditors {
        for &executors in &args.matrix_executors {
            for &concurrent in &args.matrix_runs {
                let cell =
                    throughput::cell(&model, executors, auditors, concurrent, args.matrix_rounds)
                        .await?;
                eprintln!(
                    "cell auditors={auditors} executors={executors} runs={concurrent}: {} rounds in {:.2} s",
                    cell.rounds, cell.wall_s
                );
                cells.push(cell);
            }
        }
    }
    println!(
        "\nThroughput: runs of {} rounds submitted at once; 1 manager, 1 auditor process running `auditors` audits at once ([auditor] concurrency); peak RSS (VmHWM) in MiB\n",
        args.matrix_rounds
    );
    println!("| runs | executors | auditors | rounds/s | runs/s | run p50 s | manager | executor (max) | auditor | nats |");
    println!("|-----:|----------:|---------:|---------:|-------:|----------:|--------:|---------------:|--------:|-----:|");
    for c in &cells {
        let mib = |k: u64| k as f64 / 1024.0;
        println!(
            "| {:>4} | {:>9} | {:>8} | {:>8.1} | {:>6.2} | {:>9.2} | {:>7.1} | {:>14.1} | {:>7.1} | {:>4.1} |",
            c.concurrent,
            c.executors,
            c.auditors,
            c.rounds_per_s,
            c.runs_per_s,
            c.run_latency_ms.p50 / 1000.0,
            mib(c.rss_peak_kib[0]),
            mib(c.rss_peak_kib[1]),
            mib(c.rss_peak_kib[3]),
            mib(c.rss_peak_kib[4]),
        );
    }
    println!(
        "\nCPU ms per round while each cell ran (a worker's with its sandboxed checks and tool commands; machine: all busy CPU, the bench and its stand-in model included), and the messages nats-server took in per round\n"
    );
    println!(
        "| runs | executors | auditors | manager | executors | auditor | nats | redis | machine | nats msgs in |"
    );
    println!(
        "|-----:|----------:|---------:|--------:|----------:|--------:|-----:|------:|--------:|-------------:|"
    );
    for c in &cells {
        let cpu = &c.cpu_per_round;
        println!(
            "| {:>4} | {:>9} | {:>8} | {:>7.2} | {:>9.2} | {:>7.2} | {:>4.2} | {:>5.2} | {:>7.2} | {:>12} |",
            c.concurrent,
            c.executors,
            c.auditors,
            cpu.manager,
            cpu.executors,
            cpu.auditor,
            cpu.nats,
            cpu.redis,
            cpu.machine,
            c.nats_msgs_per_round
                .map_or("-".to_string(), |m| format!("{m:.1}")),
        );
    }
    let doc = json!({
        "bench": "throughput",
        "command": command,
        "started_at": started_at,
        "finished_at": now_rfc3339(),
        "rounds_per_run": args.matrix_rounds,
        "managers": 1,
        "auditors": 1,
        "cells": cells.iter().map(throughput::Cell::json).collect::<Vec<_>>(),
    });
    write_json(&args.out, "throughput.json", &doc)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let command = std::env::args()
        .map(|a| a.rsplit('/').next().unwrap_or(&a).to_string())
        .collect::<Vec<_>>()
        .join(" ");
    if !args.skip_latency {
        latency_part(&args, &command).await?;
    }
    if !args.skip_matrix {
        matrix_part(&args, &command).await?;
    }
    Ok(())
}
