//! `arms-<size>.json` / `humaneval-<size>.json` (rewritten after every task, so a cut-short
//! bench still leaves a file), the final table and the headline numbers per arm.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

pub use loopgate_bench::role_tokens::RoleTokens;

pub const ARMS: [&str; 2] = ["single_shot", "loopgate"];

/// How the note of a `--resume` begins.
pub const RESUMED_NOTE: &str = "Resumed at";

/// One task on one arm.
#[derive(Debug, Clone)]
pub struct ArmResult {
    pub task: String,
    pub kind: String,
    pub arm: &'static str,
    pub claimed_done: bool,
    pub passes: bool,
    pub tokens: u64,
    /// `tokens` split by role (manager, executor, auditor), from the run's `usage`; `None`
    /// in a file written before the split was recorded.
    pub role_tokens: Option<RoleTokens>,
    pub wall_s: f64,
    pub rounds: u32,
    pub terminal_state: String,
    pub note: String,
    /// The run's id (in the note too; not a field of the file's schema).
    pub run_id: String,
    /// The snapshot the checks ran on (not a field of the file's schema).
    pub snapshot: String,
}

impl ArmResult {
    /// A result read back from an earlier file (`--resume`); `None` for an entry that is not
    /// one (an unknown arm, a missing field).
    pub fn from_json(v: &Value) -> Option<ArmResult> {
        let named = v.get("arm")?.as_str()?;
        let arm = ARMS.into_iter().find(|a| *a == named)?;
        Some(ArmResult {
            task: v.get("task")?.as_str()?.to_string(),
            kind: v.get("kind")?.as_str()?.to_string(),
            arm,
            claimed_done: v.get("claimed_done")?.as_bool()?,
            passes: v.get("passes")?.as_bool()?,
            tokens: v.get("tokens")?.as_u64()?,
            role_tokens: v.get("tokens_by_role").and_then(RoleTokens::from_json),
            wall_s: v.get("wall_s")?.as_f64()?,
            rounds: u32::try_from(v.get("rounds")?.as_u64()?).ok()?,
            terminal_state: v.get("terminal_state")?.as_str()?.to_string(),
            note: v.get("note")?.as_str()?.to_string(),
            run_id: String::new(),
            snapshot: String::new(),
        })
    }

    fn to_json(&self) -> Value {
        let mut v = json!({
            "task": self.task,
            "kind": self.kind,
            "arm": self.arm,
            "claimed_done": self.claimed_done,
            "passes": self.passes,
            "tokens": self.tokens,
            "wall_s": (self.wall_s * 10.0).round() / 10.0,
            "rounds": self.rounds,
            "terminal_state": self.terminal_state,
            "note": self.note,
        });
        if let Some(split) = &self.role_tokens {
            v["tokens_by_role"] = split.to_json();
        }
        v
    }
}

pub struct Report {
    pub path: PathBuf,
    /// `examples/suite` or `humaneval`.
    pub suite: &'static str,
    /// HumanEval: the seeded subset, the dataset and the per-problem sanity results.
    pub subset: Option<Value>,
    /// A published number to read ours against (HumanEval).
    pub anchor: Option<&'static str>,
    pub size: String,
    pub model_file: String,
    pub model_sha256: String,
    pub token_budget: u64,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub notes: Vec<String>,
    pub results: Vec<ArmResult>,
}

impl Report {
    pub fn to_json(&self) -> Value {
        let mut doc = json!({
            "suite": self.suite,
            "model": {"size": self.size, "file": self.model_file, "sha256": self.model_sha256},
            "token_budget": self.token_budget,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "notes": self.notes,
            "results": self.results.iter().map(ArmResult::to_json).collect::<Vec<_>>(),
        });
        if let Some(subset) = &self.subset {
            doc["subset"] = subset.clone();
        }
        if let Some(anchor) = self.anchor {
            doc["anchor"] = json!(anchor);
        }
        doc
    }

    /// Write the whole file (atomically: a reader never sees half of it).
    pub fn save(&self) -> anyhow::Result<()> {
        let tmp = self.path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_string_pretty(&self.to_json())? + "\n")?;
        std::fs::rename(&tmp, &self.path)?;
        Ok(())
    }

    /// The results, the `started_at` and the notes of earlier resumptions of an earlier file at
    /// `path`, to go on from (`--resume`). A result of the bench itself failing (`bench_error`)
    /// is dropped, so that task runs again.
    pub fn earlier(path: &Path) -> anyhow::Result<(Vec<ArmResult>, String, Vec<String>)> {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
        let results = doc
            .get("results")
            .and_then(Value::as_array)
            .map(|rs| {
                rs.iter()
                    .filter_map(ArmResult::from_json)
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r.terminal_state != "bench_error")
            .collect();
        let started = doc
            .get("started_at")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let resumptions = doc
            .get("notes")
            .and_then(Value::as_array)
            .map(|ns| {
                ns.iter()
                    .filter_map(Value::as_str)
                    .filter(|n| n.starts_with(RESUMED_NOTE))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        Ok((results, started, resumptions))
    }

    pub fn table(&self) -> String {
        let mut s = format!(
            "{:<26} {:<12} {:>7} {:>6} {:>7} {:>20} {:>7} {:>6}  {}\n",
            "task",
            "arm",
            "claimed",
            "passes",
            "tokens",
            "mgr/exec/aud",
            "wall_s",
            "rounds",
            "terminal_state"
        );
        for r in &self.results {
            s.push_str(&format!(
                "{:<26} {:<12} {:>7} {:>6} {:>7} {:>20} {:>7.1} {:>6}  {}\n",
                r.task,
                r.arm,
                yes_no(r.claimed_done),
                yes_no(r.passes),
                r.tokens,
                r.role_tokens
                    .map(|t| format!("{}/{}/{}", t.manager, t.executor, t.auditor))
                    .unwrap_or_else(|| "-".into()),
                r.wall_s,
                r.rounds,
                r.terminal_state
            ));
        }
        s.push('\n');
        for arm in ARMS {
            s.push_str(&headline(arm, &self.results));
            s.push('\n');
        }
        s
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// Solve rate, false-completion rate and tokens per solved task for one arm.
pub fn headline(arm: &str, results: &[ArmResult]) -> String {
    let rs: Vec<&ArmResult> = results.iter().filter(|r| r.arm == arm).collect();
    let n = rs.len();
    let solved = rs.iter().filter(|r| r.passes).count();
    let claimed = rs.iter().filter(|r| r.claimed_done).count();
    let false_claims = rs.iter().filter(|r| r.claimed_done && !r.passes).count();
    let tokens: u64 = rs.iter().map(|r| r.tokens).sum();
    let mut split = RoleTokens::default();
    let mut split_of = 0usize;
    for t in rs.iter().filter_map(|r| r.role_tokens) {
        split.add(t);
        split_of += 1;
    }
    let split_note = if split_of == 0 {
        String::new()
    } else {
        format!(
            " (by role over {split_of} run(s): manager {}, executor {}, auditor {})",
            split.manager, split.executor, split.auditor
        )
    };
    let wall: f64 = rs.iter().map(|r| r.wall_s).sum();
    let pct = |a: usize, b: usize| {
        if b == 0 {
            "n/a".to_string()
        } else {
            format!("{:.0}%", 100.0 * a as f64 / b as f64)
        }
    };
    let per_solved = if solved == 0 {
        "n/a (none solved)".to_string()
    } else {
        format!("{}", tokens / solved as u64)
    };
    format!(
        "{arm:<12} solve rate {solved}/{n} ({}); false completions {false_claims} of {claimed} claims ({} of claims, {} of tasks); tokens per solved task {per_solved} ({tokens} tokens in all{split_note}); wall {wall:.0} s in all",
        pct(solved, n),
        pct(false_claims, claimed),
        pct(false_claims, n),
    )
}

/// Now as RFC 3339 UTC with seconds (`2026-01-05T10:00:00Z`).
pub fn now_rfc3339() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    rfc3339(secs)
}

fn rfc3339(unix_secs: u64) -> String {
    let days = (unix_secs / 86_400) as i64;
    let rem = unix_secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// sha256 of a (large) file, streamed by `sha256sum`.
pub fn sha256_file(path: &Path) -> anyhow::Result<String> {
    let out = std::process::Command::new("sha256sum").arg(path).output()?;
    anyhow::ensure!(out.status.success(), "sha256sum {} failed", path.display());
    Ok(String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string())
}
