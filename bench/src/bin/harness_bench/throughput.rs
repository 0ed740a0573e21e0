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
use crate::stats::{cpu_ms, machine_busy_ms, round3, rss_kib, Summary};

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
    /// Messages nats-server took in (`/varz` `in_msgs`: publishes, acks, pulls, KV writes and
    /// reads, requests) per round while the cell ran; `None` when the monitor did not answer.
    pub nats_msgs_per_round: Option<f64>,
    /// CPU ms per round while the cell ran, with reaped children (checks, tool commands).
    pub cpu_per_round: CpuPerRound,
    pub states: Value,
}

/// Where a round's CPU went: ms per round by process, and the machine's busy time per round
/// (which also holds the bench itself, its stand-in model, and anything else running).
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuPerRound {
    pub manager: f64,
    pub executors: f64,
    pub auditor: f64,
    pub nats: f64,
    pub redis: f64,
    pub machine: f64,
}

impl CpuPerRound {
    pub fn json(&self) -> Value {
        json!({
            "manager": round3(self.manager),
            "executors": round3(self.executors),
            "auditor": round3(self.auditor),
            "nats_server": round3(self.nats),
            "redis_server": round3(self.redis),
            "machine": round3(self.machine),
        })
    }
}

/// Messages nats-server has taken in so far (`/varz` `in_msgs`).
async fn nats_in_msgs(stack: &Stack) -> Option<u64> {
    let varz: Value = reqwest::Client::new()
        .get(format!("{}/varz", stack.nats.monitor_url()))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    varz["in_msgs"].as_u64()
}

/// CPU ms so far of each process of the stack: manager(s), executors, auditor, nats-server,
/// redis-server, and the whole machine.
fn cpu_now(stack: &mut Stack) -> [u64; 6] {
    let sum = |pids: &[u32]| pids.iter().filter_map(|&p| cpu_ms(p)).sum::<u64>();
    let managers: Vec<u32> = stack.managers.iter().map(|m| m.child.pid()).collect();
    let executors: Vec<u32> = stack.executors.iter().map(|e| e.pid()).collect();
    [
        sum(&managers),
        sum(&executors),
        cpu_ms(stack.auditor.pid()).unwrap_or(0),
        cpu_ms(stack.nats.process_mut().pid()).unwrap_or(0),
        cpu_ms(stack.redis.process_mut().pid()).unwrap_or(0),
        machine_busy_ms().unwrap_or(0),
    ]
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
            "cpu_ms_per_round": self.cpu_per_round.json(),
            "nats_in_msgs_per_round": self.nats_msgs_per_round.map(round3),
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
    let cpu_before = cpu_now(&mut stack);
    let msgs_before = nats_in_msgs(&stack).await;
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
    let cpu_after = cpu_now(&mut stack);
    let msgs_after = nats_in_msgs(&stack).await;

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
    let per_round =
        |i: usize| cpu_after[i].saturating_sub(cpu_before[i]) as f64 / (total_rounds.max(1) as f64);
    let nats_msgs_per_round = msgs_before
        .zip(msgs_after)
        .map(|(before, after)| after.saturating_sub(before) as f64 / total_rounds.max(1) as f64);
    let cpu_per_round = CpuPerRound {
        manager: per_round(0),
        executors: per_round(1),
        auditor: per_round(2),
        nats: per_round(3),
        redis: per_round(4),
        machine: per_round(5),
    };
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
        cpu_per_round,
        nats_msgs_per_round,
        states: Value::Object(states),
    })
}
