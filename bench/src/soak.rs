//! Soak (issue 43 part 4, `chaos-bench --soak`): the whole stack with a stand-in model and no
//! faults, `runs` runs kept in flight for `duration` (each of `rounds` rounds, then
//! `budget_exhausted`), the manager's resident set sampled every `sample_every`. What it answers:
//! does the manager's memory follow the runs it *holds* (in flight) and stay flat while
//! thousands of runs come and go, or does it grow with the runs it has *seen* (a leak)?
//!
//! The verdict compares the RSS after a warm-up (the first sixth of the soak, at least a minute)
//! with the RSS at the end: flat within 10% is the goal. The slope after the warm-up,
//! per minute and per run finished, tells a slow leak from noise.

use std::time::{Duration, Instant};

use anyhow::Context;
use loopgate_manager::run_store::RunStore;
use loopgate_tests::Stack;
use serde_json::{json, Value};

use crate::round_scenario::{stack_options, standin, task_toml, TERMINAL};
/// The bound on the manager's growth after the warm-up.
pub const FLAT_WITHIN: f64 = 0.10;

/// What a soak runs.
#[derive(Debug, Clone)]
pub struct SoakConfig {
    pub duration: Duration,
    pub runs: usize,
    pub rounds: u32,
    pub executors: usize,
    /// Stand-in latency per model reply (keeps the machine below saturation).
    pub latency: Duration,
    pub sample_every: Duration,
}

impl SoakConfig {
    /// `make chaos`'s soak: 30 minutes, 100 runs in flight.
    pub fn full() -> SoakConfig {
        SoakConfig {
            duration: Duration::from_secs(30 * 60),
            runs: 100,
            rounds: 3,
            executors: 2,
            latency: Duration::from_millis(200),
            sample_every: Duration::from_secs(10),
        }
    }
}

/// One sample of the soak.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub at_s: f64,
    pub manager_rss_kib: u64,
    pub in_flight: u64,
    pub finished: u64,
}

/// The soak's samples and what they say.
#[derive(Debug, Clone)]
pub struct SoakReport {
    pub config: SoakConfig,
    pub samples: Vec<Sample>,
    pub verdict: Verdict,
}

/// The manager's memory after the warm-up against the end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    pub warm_up_s: f64,
    pub rss_after_warm_up_kib: u64,
    pub rss_at_end_kib: u64,
    pub growth: f64,
    /// Least-squares slope of the RSS after the warm-up.
    pub kib_per_minute: f64,
    pub kib_per_run_finished: f64,
    pub runs_finished: u64,
    pub flat: bool,
}

/// Pure: the verdict of `samples` (in time order) with the warm-up ending at `warm_up_s`.
pub fn verdict(samples: &[Sample], warm_up_s: f64) -> Option<Verdict> {
    let after: Vec<&Sample> = samples.iter().filter(|s| s.at_s >= warm_up_s).collect();
    let (first, last) = (after.first()?, after.last()?);
    let n = after.len() as f64;
    let slope = |x: &dyn Fn(&Sample) -> f64| {
        let mean_x = after.iter().map(|s| x(s)).sum::<f64>() / n;
        let mean_y = after.iter().map(|s| s.manager_rss_kib as f64).sum::<f64>() / n;
        let var: f64 = after.iter().map(|s| (x(s) - mean_x).powi(2)).sum();
        if var == 0.0 {
            return 0.0;
        }
        after
            .iter()
            .map(|s| (x(s) - mean_x) * (s.manager_rss_kib as f64 - mean_y))
            .sum::<f64>()
            / var
    };
    let growth = if first.manager_rss_kib == 0 {
        0.0
    } else {
        (last.manager_rss_kib as f64 - first.manager_rss_kib as f64) / first.manager_rss_kib as f64
    };
    Some(Verdict {
        warm_up_s,
        rss_after_warm_up_kib: first.manager_rss_kib,
        rss_at_end_kib: last.manager_rss_kib,
        growth,
        kib_per_minute: slope(&|s| s.at_s / 60.0),
        kib_per_run_finished: slope(&|s| s.finished as f64),
        runs_finished: last.finished,
        flat: growth.abs() <= FLAT_WITHIN,
    })
}

/// The warm-up of a soak of `duration`: a sixth of it, at least a minute (or all of a shorter
/// soak but its last sample).
pub fn warm_up(duration: Duration) -> Duration {
    (duration / 6).max(Duration::from_secs(60).min(duration / 2))
}

/// Resident set of `pid` now (`VmRSS`, KiB).
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

async fn counts(store: &RunStore) -> anyhow::Result<u64> {
    let mut total = 0;
    for state in TERMINAL {
        total += store.count(state).await?;
    }
    Ok(total)
}

/// Run the soak; `progress` gets a line per sample.
pub async fn run(config: &SoakConfig, progress: &dyn Fn(&str)) -> anyhow::Result<SoakReport> {
    let model = standin(config.latency).await?;
    let stack = Stack::start(stack_options(&model, config.executors)).await?;
    let store = RunStore::connect(&stack.redis.url(), Duration::from_secs(5)).await?;
    let manager_pid = stack
        .managers
        .first()
        .map(|m| m.child.pid())
        .context("the stack has no manager")?;
    let task = task_toml("soak", config.rounds);
    let started = Instant::now();
    let mut submitted: u64 = 0;
    let mut samples = Vec::new();
    let mut next_sample = Duration::ZERO;
    while started.elapsed() < config.duration {
        let finished = counts(&store).await?;
        let in_flight = submitted.saturating_sub(finished);
        for _ in in_flight..config.runs as u64 {
            stack.submit(&task, &[]).await?;
            submitted += 1;
        }
        if started.elapsed() >= next_sample {
            let sample = Sample {
                at_s: started.elapsed().as_secs_f64(),
                manager_rss_kib: rss_kib(manager_pid).unwrap_or(0),
                in_flight: submitted.saturating_sub(finished),
                finished,
            };
            progress(&format!(
                "{:>6.0} s: manager {:.1} MiB, {} in flight, {} finished",
                sample.at_s,
                sample.manager_rss_kib as f64 / 1024.0,
                sample.in_flight,
                sample.finished
            ));
            samples.push(sample);
            next_sample += config.sample_every;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let warm = warm_up(config.duration).as_secs_f64();
    let verdict = verdict(&samples, warm).context("the soak took no sample after its warm-up")?;
    Ok(SoakReport {
        config: config.clone(),
        samples,
        verdict,
    })
}

impl SoakReport {
    /// The Markdown of docs/benchmarks.md's "Memory held per run" section.
    pub fn markdown(&self, command: &str) -> String {
        let v = &self.verdict;
        let mib = |k: u64| k as f64 / 1024.0;
        format!(
            "Command: `{command}`\n\n{} runs of {} rounds kept in flight for {} s, {} executors, \
             stand-in latency {} ms per reply, no faults; manager RSS sampled every {} s.\n\n\
             | Figure | Value |\n|---|---|\n\
             | Runs finished | {} |\n\
             | Manager RSS after the warm-up ({:.0} s) | {:.1} MiB |\n\
             | Manager RSS at the end | {:.1} MiB |\n\
             | Growth after the warm-up | {:+.1}% (goal: within {:.0}%) |\n\
             | Slope after the warm-up | {:+.1} KiB/min, {:+.3} KiB per run finished |\n\
             | Verdict | {} |\n",
            self.config.runs,
            self.config.rounds,
            self.config.duration.as_secs(),
            self.config.executors,
            self.config.latency.as_millis(),
            self.config.sample_every.as_secs(),
            v.runs_finished,
            v.warm_up_s,
            mib(v.rss_after_warm_up_kib),
            mib(v.rss_at_end_kib),
            v.growth * 100.0,
            FLAT_WITHIN * 100.0,
            v.kib_per_minute,
            v.kib_per_run_finished,
            if v.flat { "flat" } else { "grows" },
        )
    }

    pub fn json(&self, command: &str) -> Value {
        let v = &self.verdict;
        json!({
            "bench": "soak",
            "command": command,
            "runs_in_flight": self.config.runs,
            "rounds_per_run": self.config.rounds,
            "duration_s": self.config.duration.as_secs(),
            "executors": self.config.executors,
            "latency_ms": self.config.latency.as_millis() as u64,
            "warm_up_s": v.warm_up_s,
            "rss_after_warm_up_kib": v.rss_after_warm_up_kib,
            "rss_at_end_kib": v.rss_at_end_kib,
            "growth": v.growth,
            "kib_per_minute": v.kib_per_minute,
            "kib_per_run_finished": v.kib_per_run_finished,
            "runs_finished": v.runs_finished,
            "flat": v.flat,
            "samples": self.samples.iter().map(|s| json!({
                "at_s": s.at_s,
                "manager_rss_kib": s.manager_rss_kib,
                "in_flight": s.in_flight,
                "finished": s.finished,
            })).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn samples(rss: &[u64]) -> Vec<Sample> {
        rss.iter()
            .enumerate()
            .map(|(i, &r)| Sample {
                at_s: i as f64 * 60.0,
                manager_rss_kib: r,
                in_flight: 100,
                finished: i as u64 * 1000,
            })
            .collect()
    }

    #[test]
    fn the_verdict_reads_growth_after_the_warm_up() {
        // (RSS per minute, warm-up s, flat, growth)
        let cases: [(&[u64], f64, bool, f64); 4] = [
            // Start-up growth inside the warm-up does not count.
            (
                &[10_000, 30_000, 30_500, 31_000, 30_800],
                60.0,
                true,
                0.0267,
            ),
            // Steady growth after it does.
            (&[30_000, 30_000, 33_000, 36_000, 39_000], 60.0, false, 0.30),
            (&[30_000, 30_000, 30_000], 0.0, true, 0.0),
            // A fall is not a leak, but it is not flat either past the bound.
            (&[30_000, 20_000], 0.0, false, -0.3333),
        ];
        for (rss, warm, flat, growth) in cases {
            let v = verdict(&samples(rss), warm).unwrap();
            assert_eq!(v.flat, flat, "{rss:?}");
            assert!((v.growth - growth).abs() < 1e-3, "{rss:?}: {}", v.growth);
        }
        let v = verdict(&samples(&[30_000, 31_000, 32_000]), 0.0).unwrap();
        assert!((v.kib_per_minute - 1000.0).abs() < 1e-6);
        assert!((v.kib_per_run_finished - 1.0).abs() < 1e-6);
        assert!(verdict(&samples(&[1, 2]), 600.0).is_none());
    }

    #[test]
    fn the_warm_up_is_a_sixth_and_at_least_a_minute() {
        let s = Duration::from_secs;
        for (duration, want) in [(s(1800), s(300)), (s(300), s(60)), (s(60), s(30))] {
            assert_eq!(warm_up(duration), want, "{duration:?}");
        }
    }
}
