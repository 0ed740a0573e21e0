//! Throughput: `c` concurrent runs of a few rounds each against `e` executors (one manager,
//! one auditor), every cell on a fresh stack so each process's peak RSS (`VmHWM`) belongs to
//! that cell.

use std::time::{Duration, Instant};

use anyhow::Context;
use loopgate_manager::run_store::RunStore;
use loopgate_test_support::StandInModel;
use loopgate_tests::Stack;
use serde_json::{json, Value};

use crate::scenario::{stack_options, task_toml, TERMINAL};
use crate::stats::{round3, rss_kib, Summary};

pub struct Cell {
    pub concurrent: usize,
    pub executors: usize,
    /// `[auditor] concurrency`.
    pub auditors: usize,
    pub rounds: u64,
    pub wall_s: f64,
    pub rounds_per_s: f64,
    pub runs_per_s: f64,
    pub run_latency_ms: Summary,
    /// Peak RSS (KiB): manager, the largest executor, all executors together, auditor, nats-server.
    pub rss_peak_kib: [u64; 5],
    pub states: Value,
}

impl Cell {
    pub fn json(&self) -> Value {
        let [manager, executor_max, executors_sum, auditor, nats] = self.rss_peak_kib;
        json!({
            "concurrent_runs": self.concurrent,
            "executors": self.executors,
            "auditors": self.auditors,
            "rounds": self.rounds,
            "wall_s": round3(self.wall_s),
            "rounds_per_s": round3(self.rounds_per_s),
            "runs_per_s": round3(self.runs_per_s),
            "run_latency_ms": self.run_latency_ms.json(),
            "terminal_states": self.states,
            "rss_peak_kib": {
                "manager": manager,
                "executor_max": executor_max,
                "executors_total": executors_sum,
                "auditor": auditor,
                "nats_server": nats,
            },
        })
    }
}

async fn terminal_count(store: &RunStore) -> anyhow::Result<u64> {
    let mut total = 0;
    for state in TERMINAL {
        total += store.count(state).await?;
    }
    Ok(total)
}

fn peak(pid: u32) -> u64 {
    rss_kib(pid).map(|(_, hwm)| hwm).unwrap_or(0)
}

pub async fn cell(
    model: &StandInModel,
    executors: usize,
    auditors: usize,
    concurrent: usize,
    rounds: u32,
) -> anyhow::Result<Cell> {
    let mut options = stack_options(model, executors);
    options.auditor_extra = format!("concurrency = {auditors}");
    let mut stack = Stack::start(options).await?;
    let store = RunStore::connect(&stack.redis.url(), Duration::from_secs(5)).await?;
    let task = task_toml(rounds);
    let started = Instant::now();
    let submitted =
        futures::future::join_all((0..concurrent).map(|_| stack.submit(&task, &[]))).await;
    let ids: Vec<String> = submitted
        .into_iter()
        .map(|r| Ok(r?["id"].as_str().context("run id")?.to_string()))
        .collect::<anyhow::Result<_>>()?;
    let deadline = Duration::from_secs(120 + 2 * (concurrent as u64) * u64::from(rounds));
    while terminal_count(&store).await? < concurrent as u64 {
        anyhow::ensure!(
            started.elapsed() < deadline,
            "cell e={executors} c={concurrent}: not all runs terminal after {deadline:?}\n{}",
            stack.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let rss_peak_kib = {
        let executor_peaks: Vec<u64> = stack.executors.iter().map(|e| peak(e.pid())).collect();
        [
            stack
                .managers
                .iter()
                .map(|m| peak(m.child.pid()))
                .max()
                .unwrap_or(0),
            executor_peaks.iter().copied().max().unwrap_or(0),
            executor_peaks.iter().sum(),
            peak(stack.auditor.pid()),
            peak(stack.nats.process_mut().pid()),
        ]
    };

    let (mut first, mut last, mut total_rounds) = (f64::MAX, f64::MIN, 0u64);
    let mut latencies = Vec::new();
    let mut states = serde_json::Map::new();
    for id in &ids {
        let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
        let entries = log["entries"].as_array().cloned().unwrap_or_default();
        let submitted = entries
            .first()
            .and_then(|e| e["at"].as_f64())
            .unwrap_or(0.0);
        let terminal = entries
            .iter()
            .find(|e| e["type"] == "terminal")
            .context("a terminal run has a terminal entry")?;
        let ended = terminal["at"].as_f64().unwrap_or(submitted);
        let state = terminal["state"].as_str().unwrap_or("?").to_string();
        let count = states.entry(state).or_insert(json!(0));
        *count = json!(count.as_u64().unwrap_or(0) + 1);
        first = first.min(submitted);
        last = last.max(ended);
        latencies.push(ended - submitted);
        total_rounds += entries
            .iter()
            .filter(|e| e["type"] == "exec_dispatched")
            .count() as u64;
    }
    let wall_s = ((last - first) / 1000.0).max(1e-3);
    Ok(Cell {
        concurrent,
        executors,
        auditors,
        rounds: total_rounds,
        wall_s,
        rounds_per_s: total_rounds as f64 / wall_s,
        runs_per_s: concurrent as f64 / wall_s,
        run_latency_ms: Summary::of(&latencies),
        rss_peak_kib,
        states: Value::Object(states),
    })
}
