//! Percentile summaries and small helpers shared by the harness benchmark's parts.

use serde_json::{json, Value};

/// Nearest-rank percentile of an ascending slice (NaN when empty).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// n, mean, p50, p95, p99 and max of `samples` (any order), as printed and stored.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

impl Summary {
    pub fn of(samples: &[f64]) -> Summary {
        let mut sorted: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
        sorted.sort_by(|a, b| a.total_cmp(b));
        let mean = if sorted.is_empty() {
            f64::NAN
        } else {
            sorted.iter().sum::<f64>() / sorted.len() as f64
        };
        Summary {
            n: sorted.len(),
            mean,
            p50: percentile(&sorted, 0.50),
            p95: percentile(&sorted, 0.95),
            p99: percentile(&sorted, 0.99),
            max: sorted.last().copied().unwrap_or(f64::NAN),
        }
    }

    pub fn json(&self) -> Value {
        json!({
            "n": self.n,
            "mean": round3(self.mean),
            "p50": round3(self.p50),
            "p95": round3(self.p95),
            "p99": round3(self.p99),
            "max": round3(self.max),
        })
    }
}

/// Three decimals (JSON stays readable; NaN becomes null).
pub fn round3(v: f64) -> Value {
    if v.is_finite() {
        json!((v * 1000.0).round() / 1000.0)
    } else {
        Value::Null
    }
}

/// Milliseconds since `start`.
pub fn ms_since(start: std::time::Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}

/// Unix time in RFC 3339 (UTC), for the JSON files.
pub fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Resident set size now and at its peak (`VmRSS`, `VmHWM` in /proc/<pid>/status), KiB.
/// CPU time `pid` and its reaped children have used, in ms: `/proc/PID/stat` fields 14-17
/// (utime, stime, cutime, cstime), counted in USER_HZ, which Linux fixes at 100 per second for
/// `/proc`. The children are what a worker waits for: its sandboxed checks and tool commands.
pub fn cpu_ms(pid: u32) -> Option<u64> {
    stat_cpu_ms(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// [`cpu_ms`] of one `/proc/PID/stat` line.
fn stat_cpu_ms(stat: &str) -> Option<u64> {
    // The command name (field 2) may hold spaces: count fields after its closing paren.
    let after_name = stat.get(stat.rfind(')')? + 1..)?;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // fields[0] is field 3 (state), so fields 14-17 are fields[11..15].
    let ticks = fields
        .get(11..15)?
        .iter()
        .map(|f| f.parse::<u64>().ok())
        .sum::<Option<u64>>()?;
    Some(ticks * 10)
}

/// The whole machine's busy CPU time so far, in ms (`/proc/stat`, every mode but idle and
/// iowait, in USER_HZ).
pub fn machine_busy_ms() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu = stat.lines().next()?.strip_prefix("cpu ")?;
    let fields: Vec<u64> = cpu
        .split_whitespace()
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal; guest time is inside user and nice.
    let counted = fields.get(..8)?;
    let idle = counted[3] + counted[4];
    Some((counted.iter().sum::<u64>() - idle) * 10)
}

pub fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

#[cfg(test)]
mod tests {
    use super::stat_cpu_ms;

    #[test]
    fn cpu_time_is_read_past_a_command_name_with_spaces() {
        let cases = [
            // utime 150, stime 50, cutime 20, cstime 10 ticks: 230 ticks = 2300 ms.
            (
                "4242 (loopgate-exec) S 1 4242 4242 0 -1 4194560 900 0 0 0 150 50 20 10 20 0 9 0",
                Some(2300),
            ),
            (
                "7 (a b) c)) R 1 7 7 0 -1 0 0 0 0 0 1 2 3 4 20 0 1 0",
                Some(100),
            ),
            ("7 (short) R 1 7", None),
            ("no paren here", None),
        ];
        for (line, want) in cases {
            assert_eq!(stat_cpu_ms(line), want, "{line}");
        }
    }
}
