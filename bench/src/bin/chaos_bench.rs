//! Chaos run (not a test): the whole stack (nats-server on its file store, the managers'
//! Redis, 2+ managers, several executors and auditors) with runs kept in flight against
//! stand-in models of random latency, while for a fixed time a random component is killed
//! with SIGKILL (and restarted on its own data) or frozen with SIGSTOP, a link is cut or the
//! executors' disk filled, every few seconds. Prints the figures of docs/reliability.md.
//!
//! `cargo build --workspace --bins && cargo run -p loopgate-bench --bin chaos-bench -- [flags]`
//! (`make chaos` passes `--production`). Flags: `--duration-secs N` (300), `--runs N` (100),
//! `--managers N` (2), `--executors N` (8), `--auditors N` (3), `--fault-every-secs N` (4),
//! `--seed N`, `--runs-once` (submit `--runs` once at the start instead of keeping that many
//! in flight), `--out PATH` (also write the Markdown there), `--strict` (exit 1 when a goal is
//! missed), `--uniform-workers` (a drawn executor or auditor is any of them, busy or not; by
//! default one that holds a step is hit when any does), `--logs DIR` (copy every daemon's whole
//! log there at the end, killed and restarted ones included).
//!
//! `--production` (first; the flags after it change its profile): 40 runs, 30 minutes, a
//! fault every 5-15 s drawn from a shuffled bag of every kind, executor steps of about 5-60 s
//! and checks of 1-10 s from stand-in delays, freezes past `ack_wait`, Redis with Sentinel.
//!
//! Partitions (a manager's, an executor's or an auditor's link to nats-server or the
//! managers' to redis-server cut at a fault proxy) and full disks (the executors' work-dir
//! tmpfs filled) are among the faults by default: `--no-partitions`, `--no-disk-full` leave
//! them out. `--redis-ha` (on with `--production`; `--no-redis-ha` off): the managers' Redis
//! is a primary, a replica and three sentinels, a Redis fault kills or freezes the primary,
//! and the open runs' logs are compared across it.
//!
//! `--soak` runs the soak instead (no faults; issue 43): `--duration-secs N` (1800), `--runs N`
//! runs in flight (100), `--rounds N` per run (3), `--executors N` (2), `--latency-ms N` per
//! stand-in reply (200), `--out PATH` (Markdown), `--json PATH`, `--strict` (exit 1 when the
//! manager's RSS is not flat within 10% after the warm-up).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::time::Duration;

use anyhow::Context;
use loopgate_tests::chaos::{self, ChaosConfig};

const USAGE: &str = "usage: chaos-bench [--duration-secs N (300)] [--runs N (100)] \
[--managers N (2)] [--executors N (8)] [--auditors N (3)] [--fault-every-secs N (4)] [--seed N] \
[--out PATH] [--logs DIR] [--strict] [--uniform-workers] [--runs-once] [--no-partitions] [--no-disk-full] \
[--redis-ha] [--no-redis-ha] [--production (first)]";

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    if std::env::args().any(|a| a == "--soak") {
        return soak_main().await;
    }
    let mut config = ChaosConfig::full();
    let mut out = None;
    let mut strict = false;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            println!("{USAGE}");
            return Ok(());
        }
        if flag == "--production" {
            config = ChaosConfig::production();
            continue;
        }
        if flag == "--strict" {
            strict = true;
            continue;
        }
        if flag == "--runs-once" {
            config.keep_in_flight = false;
            continue;
        }
        if flag == "--uniform-workers" {
            config.prefer_busy_workers = false;
            continue;
        }
        if flag == "--no-partitions" {
            config.partitions = false;
            continue;
        }
        if flag == "--no-disk-full" {
            config.disk_full = false;
            continue;
        }
        if flag == "--redis-ha" || flag == "--no-redis-ha" {
            config.redis_ha = flag == "--redis-ha";
            continue;
        }
        let value = args
            .next()
            .with_context(|| format!("{flag} needs a value\n{USAGE}"))?;
        let number = || -> anyhow::Result<u64> {
            value
                .parse()
                .with_context(|| format!("{flag}: {value:?} is not a number"))
        };
        match flag.as_str() {
            "--duration-secs" => config.duration = Duration::from_secs(number()?),
            "--runs" => config.runs = number()? as usize,
            "--managers" => config.managers = number()? as usize,
            "--executors" => config.executors = number()?.max(1) as usize,
            "--auditors" => config.auditors = number()?.max(1) as usize,
            "--fault-every-secs" => config.fault_every = Duration::from_secs(number()?.max(1)),
            "--seed" => config.seed = number()?,
            "--out" => out = Some(value.clone()),
            "--logs" => config.logs = Some(value.clone().into()),
            other => anyhow::bail!("unknown flag {other}\n{USAGE}"),
        }
    }
    let uptime = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    eprintln!("chaos-bench: {config:?}\nload: {}", uptime.trim());
    let report = chaos::run(&config, &|line| eprintln!("chaos-bench: {line}")).await?;
    let text = report.markdown();
    println!("{text}");
    if let Some(path) = out {
        std::fs::write(&path, &text).with_context(|| format!("writing {path}"))?;
    }
    if strict && !report.goals_met() {
        anyhow::bail!("chaos goals missed (see the figures above)");
    }
    Ok(())
}

const SOAK_USAGE: &str = "usage: chaos-bench --soak [--duration-secs N (1800)] [--runs N (100)] \
[--rounds N (3)] [--executors N (2)] [--latency-ms N (200)] [--out PATH] [--json PATH] [--strict]";

/// `chaos-bench --soak`: runs kept in flight without faults, the manager's RSS followed.
async fn soak_main() -> anyhow::Result<()> {
    use loopgate_bench::soak::{self, SoakConfig};
    let mut config = SoakConfig::full();
    let (mut out, mut json_out, mut strict) = (None, None, false);
    let mut args = std::env::args().skip(1).filter(|a| a != "--soak");
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--help" | "-h" => {
                println!("{SOAK_USAGE}");
                return Ok(());
            }
            "--strict" => {
                strict = true;
                continue;
            }
            _ => {}
        }
        let value = args
            .next()
            .with_context(|| format!("{flag} needs a value\n{SOAK_USAGE}"))?;
        let number = || -> anyhow::Result<u64> {
            value
                .parse()
                .with_context(|| format!("{flag}: {value:?} is not a number"))
        };
        match flag.as_str() {
            "--duration-secs" => config.duration = Duration::from_secs(number()?.max(1)),
            "--runs" => config.runs = number()?.max(1) as usize,
            "--rounds" => config.rounds = number()?.clamp(1, 1000) as u32,
            "--executors" => config.executors = number()?.max(1) as usize,
            "--latency-ms" => config.latency = Duration::from_millis(number()?),
            "--out" => out = Some(value.clone()),
            "--json" => json_out = Some(value.clone()),
            other => anyhow::bail!("unknown flag {other}\n{SOAK_USAGE}"),
        }
    }
    let command = std::env::args()
        .map(|a| a.rsplit('/').next().unwrap_or(&a).to_string())
        .collect::<Vec<_>>()
        .join(" ");
    eprintln!("chaos-bench --soak: {config:?}");
    let report = soak::run(&config, &|line| eprintln!("soak: {line}")).await?;
    let text = report.markdown(&command);
    println!("{text}");
    if let Some(path) = out {
        std::fs::write(&path, &text).with_context(|| format!("writing {path}"))?;
    }
    if let Some(path) = json_out {
        let body = serde_json::to_string_pretty(&report.json(&command))?;
        std::fs::write(&path, body + "\n").with_context(|| format!("writing {path}"))?;
    }
    if strict && !report.verdict.flat {
        anyhow::bail!("the manager's RSS grew past the bound after the warm-up");
    }
    Ok(())
}
