//! The chaos run against the goals of issue 44: every run terminal and completed, no
//! duplicate episode or step, no evidence lost, nothing lost across a Redis failover, recovery
//! within `ack_wait` + 2 s (median) for every role, and every fault kind drawn hitting work in
//! flight at least [`MIN_HITS`] times.

use super::fault::Component;
use super::report::ChaosReport;

/// How many times each fault kind must land while runs are open.
pub(crate) const MIN_HITS: usize = 10;

/// One goal: what it asks, what the run measured, whether it was met.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Goal {
    pub what: String,
    pub measured: String,
    pub met: bool,
}

impl ChaosReport {
    /// Every goal of issue 44 with what this run measured (the failover goal only with Redis
    /// Sentinel).
    pub fn goals(&self) -> Vec<Goal> {
        goals(self)
    }
}

fn goals(report: &ChaosReport) -> Vec<Goal> {
    let mut goals = vec![
        Goal {
            what: "100% of runs terminal".into(),
            measured: format!("{}/{}", report.terminal, report.runs),
            met: report.terminal == report.runs,
        },
        Goal {
            what: "100% of runs completed (every stand-in is correct)".into(),
            measured: format!("{}/{}", report.completed, report.runs),
            met: report.completed == report.runs,
        },
        Goal {
            what: "0 duplicate episodes, 0 steps recorded twice".into(),
            measured: format!(
                "{} and {}",
                report.duplicate_episodes.len(),
                report.duplicate_log_steps.len()
            ),
            met: report.duplicate_episodes.is_empty() && report.duplicate_log_steps.is_empty(),
        },
        Goal {
            what: "0 evidence records lost".into(),
            measured: report.lost_evidence.len().to_string(),
            met: report.lost_evidence.is_empty(),
        },
    ];
    if report.config.redis_ha {
        let (failovers, lost) = report.log_checks();
        goals.push(Goal {
            what: "0 log entries lost across a fault of the Redis primary".into(),
            measured: format!("{} over {failovers} faults of the primary", lost.len()),
            met: failovers > 0 && lost.is_empty(),
        });
    }
    // The take-over after a kill: until the work the killed process held moved again (for a
    // worker, until each step it held had its result or a new episode), not until the
    // redone episode ended. Freezes, cut links and full disks hold work until they end, which
    // the tables show per fault kind.
    let limit_ms = (report.config.worker_ack_wait_secs as i64 + 2) * 1000;
    for role in [Component::Manager, Component::Executor, Component::Auditor] {
        let median = report
            .recovery
            .get(&role)
            .and_then(|r| median(&r.kill_moved_ms));
        goals.push(Goal {
            what: format!(
                "{} kills: work moved again within ack_wait + 2 s ({:.0} s), median",
                role.name(),
                limit_ms as f64 / 1000.0
            ),
            measured: median.map_or("not measured".into(), |ms| {
                format!("{:.1} s", ms as f64 / 1000.0)
            }),
            met: median.is_some_and(|ms| ms <= limit_ms),
        });
    }
    for kind in &report.kinds {
        let hits = report.faults_with_work.get(kind).copied().unwrap_or(0);
        goals.push(Goal {
            what: format!("{} hit work in flight >= {MIN_HITS} times", kind.name()),
            measured: hits.to_string(),
            met: hits >= MIN_HITS,
        });
    }
    goals
}

fn median(values: &[i64]) -> Option<i64> {
    let mut v = values.to_vec();
    v.sort_unstable();
    v.get(v.len() / 2).copied()
}
