//! The chaos report as Markdown: the figures table of docs/reliability.md, the recovery tables
//! per component and per fault kind, what went wrong, and the goals.

use std::fmt::Write as _;

use super::report::ChaosReport;

impl ChaosReport {
    /// The report as Markdown (the figures table of docs/reliability.md).
    pub fn markdown(&self) -> String {
        let pct = |n: usize| {
            if self.runs == 0 {
                0.0
            } else {
                100.0 * n as f64 / self.runs as f64
            }
        };
        let c = &self.config;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{} runs ({} in flight{}), {} managers, {} executors, {} auditors; faults for {:.0} s (one every {:.1}-{:.1} s, freezes up to {} s); stand-in latency {}-{} ms; worker ack_wait {} s; seed {:#x}.",
            self.runs,
            c.runs,
            if c.keep_in_flight {
                ", topped up after every fault"
            } else {
                " at the start"
            },
            c.managers.max(2),
            c.executors,
            c.auditors,
            self.chaos_secs,
            c.fault_every.as_secs_f64() / 2.0,
            c.fault_every.as_secs_f64() * 1.5,
            c.max_freeze.as_secs(),
            c.latency.min.as_millis(),
            c.latency.max.as_millis(),
            c.worker_ack_wait_secs,
            c.seed
        );
        let _ = writeln!(
            s,
            "Fault kinds drawn: {}.",
            self.kinds
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(", ")
        );
        if let Some(why) = &self.faults_stopped {
            let _ = writeln!(s, "**Faults stopped early**: {why}\n");
        }
        let _ = writeln!(
            s,
            "Load average (1 min) {} at the start, {:.1} at most; {:.0} s from the first submit to the last run's end.\n",
            self.load_start
                .map(|l| format!("{l:.1}"))
                .unwrap_or_else(|| "?".into()),
            self.load_max,
            self.total_secs
        );
        let _ = writeln!(s, "| Figure | Value |\n|---|---|");
        let _ = writeln!(
            s,
            "| Runs terminal | {}/{} ({:.0}%) |",
            self.terminal,
            self.runs,
            pct(self.terminal)
        );
        let _ = writeln!(
            s,
            "| Runs completed | {}/{} ({:.0}%) |",
            self.completed,
            self.runs,
            pct(self.completed)
        );
        let _ = writeln!(
            s,
            "| Duplicate episodes | {} (of {} episodes) |",
            self.duplicate_episodes.len(),
            self.episodes
        );
        let _ = writeln!(
            s,
            "| Rounds redone after a fault hit their worker | {} |",
            self.redone_rounds
        );
        let _ = writeln!(
            s,
            "| Episodes of a step dispatched again in a new round (not duplicates) | {} |",
            self.redispatched
        );
        let _ = writeln!(
            s,
            "| Steps recorded twice in a run log | {} |",
            self.duplicate_log_steps.len()
        );
        let _ = writeln!(
            s,
            "| Evidence records lost | {} |",
            self.lost_evidence.len()
        );
        if self.config.redis_ha {
            let (failovers, lost) = self.log_checks();
            let (runs, entries) = self
                .faults
                .iter()
                .filter_map(|f| f.log_check.as_ref())
                .fold((0, 0), |(r, e), c| (r + c.runs, e + c.entries));
            let _ = writeln!(
                s,
                "| Run logs that lost entries across a fault of the Redis primary | {} (of {runs} logs, {entries} entries, read before and after {failovers} faults) |",
                lost.len()
            );
        }
        let _ = writeln!(
            s,
            "| Longest stall (no run logged anything) | {:.1} s |",
            self.longest_stall_ms as f64 / 1000.0
        );
        let _ = writeln!(
            s,
            "| Longest time one run went without a log entry | {:.1} s |",
            self.longest_run_gap_ms as f64 / 1000.0
        );
        let _ = writeln!(
            s,
            "\n| Component | Kills | Freezes | Partitions | Disk full | Back (median / max) | Moved again (median / max) | Moved again after a kill (median / max) | Recovery (median / max) |\n|---|---|---|---|---|---|---|---|---|"
        );
        for (kind, r) in &self.recovery {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                kind.name(),
                r.kills,
                r.freezes,
                r.partitions,
                r.disk_full,
                median_max(&r.back_ms),
                median_max(&r.moved_ms),
                median_max(&r.kill_moved_ms),
                median_max(&r.recovery_ms)
            );
        }
        let _ = writeln!(
            s,
            "\n| Fault kind | Faults | Back (median / max) | Moved again (median / max) | Recovery (median / max) | Runs open during one | Terminal | Completed | Duplicate episodes | Evidence lost |\n|---|---|---|---|---|---|---|---|---|---|"
        );
        for (action, r) in &self.recovery_by_action {
            let e = self
                .exposure_by_action
                .get(action)
                .cloned()
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                action.name(),
                r.faults(),
                median_max(&r.back_ms),
                median_max(&r.moved_ms),
                median_max(&r.recovery_ms),
                e.runs,
                e.terminal,
                e.completed,
                e.duplicate_episodes,
                e.lost_evidence
            );
        }
        for (title, list) in [
            (
                "Runs not completed",
                self.not_completed
                    .iter()
                    .map(|(i, s)| format!("{i}: {s}"))
                    .collect::<Vec<_>>(),
            ),
            ("Duplicate episodes", self.duplicate_episodes.clone()),
            ("Steps recorded twice", self.duplicate_log_steps.clone()),
            ("Evidence lost", self.lost_evidence.clone()),
            (
                "Log entries lost across a Redis failover",
                self.log_checks().1,
            ),
        ] {
            if !list.is_empty() {
                let _ = writeln!(s, "\n{title}:");
                for item in list.iter().take(20) {
                    let _ = writeln!(s, "- {item}");
                }
                if list.len() > 20 {
                    let _ = writeln!(s, "- ... {} more", list.len() - 20);
                }
            }
        }
        let _ = writeln!(s, "\n| Goal | Measured | Met |\n|---|---|---|");
        for goal in self.goals() {
            let _ = writeln!(
                s,
                "| {} | {} | {} |",
                goal.what,
                goal.measured,
                if goal.met { "yes" } else { "**no**" }
            );
        }
        s
    }
}

fn median_max(values: &[i64]) -> String {
    if values.is_empty() {
        return "-".into();
    }
    let mut v = values.to_vec();
    v.sort_unstable();
    format!(
        "{:.1} s / {:.1} s",
        v[v.len() / 2] as f64 / 1000.0,
        v[v.len() - 1] as f64 / 1000.0
    )
}
