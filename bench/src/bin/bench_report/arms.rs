//! The verified-results section: solve rate per arm from `arms-<size>.json` (written by
//! `arms-bench`), one table set and one chart per model size.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use loopgate_bench::Table;
use serde_json::Value;

use crate::svg::hbar_chart;
use crate::{fmt_num, num};

struct ArmStats {
    tasks: usize,
    solved: usize,
    claimed: usize,
    false_done: usize,
    tokens: f64,
    wall_s: Vec<f64>,
}

fn arm_stats(results: &[Value]) -> BTreeMap<String, ArmStats> {
    let mut arms: BTreeMap<String, ArmStats> = BTreeMap::new();
    for r in results {
        let arm = r["arm"].as_str().unwrap_or("?").to_string();
        let s = arms.entry(arm).or_insert(ArmStats {
            tasks: 0,
            solved: 0,
            claimed: 0,
            false_done: 0,
            tokens: 0.0,
            wall_s: Vec::new(),
        });
        let passes = r["passes"].as_bool().unwrap_or(false);
        let claimed = r["claimed_done"].as_bool().unwrap_or(false);
        s.tasks += 1;
        s.solved += usize::from(passes);
        s.claimed += usize::from(claimed);
        s.false_done += usize::from(claimed && !passes);
        s.tokens += num(&r["tokens"]).max(0.0);
        s.wall_s.push(num(&r["wall_s"]));
    }
    arms
}

fn rate(n: usize, d: usize) -> String {
    if d == 0 {
        "n/a".into()
    } else {
        format!("{n}/{d} ({:.0}%)", 100.0 * n as f64 / d as f64)
    }
}

/// The section for one model (`doc` is one arms-<size>.json); writes its chart into `svg_dir`.
pub fn section(doc: &Value, svg_dir: &Path, svg_rel: &str) -> anyhow::Result<String> {
    let size = doc["model"]["size"].as_str().unwrap_or("?");
    let mut out = String::new();
    let _ = writeln!(out, "### Model {size}\n");
    let _ = writeln!(
        out,
        "Model file `{}`, sha256 `{}`; token budget per task {}; started {}, finished {}.\n",
        doc["model"]["file"].as_str().unwrap_or("?"),
        doc["model"]["sha256"].as_str().unwrap_or("?"),
        doc["token_budget"],
        doc["started_at"].as_str().unwrap_or("?"),
        doc["finished_at"].as_str().unwrap_or("?"),
    );
    if doc["finished_at"].is_null() {
        out.push_str(
            "**Partial results: this arms run had not finished when the report was written.**\n\n",
        );
    }
    let results = doc["results"].as_array().cloned().unwrap_or_default();
    if results.is_empty() {
        out.push_str("No results in the file.\n\n");
        return Ok(out);
    }
    let arms = arm_stats(&results);
    let mut table = Table::new(&[
        "arm",
        "solve rate",
        "false-completion rate",
        "claimed done",
        "tokens per solved task",
        "median wall s",
    ]);
    let mut rows = Vec::new();
    for (arm, s) in &arms {
        let mut walls: Vec<f64> = s.wall_s.iter().copied().filter(|w| w.is_finite()).collect();
        walls.sort_by(|a, b| a.total_cmp(b));
        let median = walls.get(walls.len() / 2).copied().unwrap_or(f64::NAN);
        table.row(vec![
            arm.clone(),
            rate(s.solved, s.tasks),
            rate(s.false_done, s.tasks),
            rate(s.claimed, s.tasks),
            if s.solved == 0 {
                "n/a (nothing solved)".into()
            } else {
                format!("{:.0}", s.tokens / s.solved as f64)
            },
            fmt_num(median, 1),
        ]);
        let frac = |n: usize| {
            if s.tasks == 0 {
                f64::NAN
            } else {
                n as f64 / s.tasks as f64
            }
        };
        rows.push((arm.clone(), [frac(s.solved), frac(s.false_done)]));
    }
    out.push_str(&table.render());
    out.push('\n');

    let names: Vec<&str> = rows.iter().map(|(a, _)| a.as_str()).collect();
    let chart_rows = vec![
        (
            "solve rate".to_string(),
            rows.iter().map(|(_, r)| r[0]).collect(),
        ),
        (
            "false-completion rate".to_string(),
            rows.iter().map(|(_, r)| r[1]).collect(),
        ),
    ];
    let file = format!("solve-rate-{size}.svg");
    std::fs::write(
        svg_dir.join(&file),
        hbar_chart(
            &format!("Solve rate per arm, model {size}"),
            "fraction of tasks",
            &names,
            &chart_rows,
            Some(1.0),
        ),
    )?;
    let _ = writeln!(out, "![solve rate per arm, {size}]({svg_rel}/{file})\n");

    let mut per_task = Table::new(&[
        "task",
        "kind",
        "arm",
        "passes",
        "claimed done",
        "tokens",
        "rounds",
        "wall s",
        "end state",
        "note",
    ]);
    for r in &results {
        let yes = |v: &Value| {
            if v.as_bool().unwrap_or(false) {
                "yes"
            } else {
                "no"
            }
            .to_string()
        };
        per_task.row(vec![
            r["task"].as_str().unwrap_or("?").into(),
            r["kind"].as_str().unwrap_or("").into(),
            r["arm"].as_str().unwrap_or("?").into(),
            yes(&r["passes"]),
            yes(&r["claimed_done"]),
            fmt_num(num(&r["tokens"]), 0),
            fmt_num(num(&r["rounds"]), 0),
            fmt_num(num(&r["wall_s"]), 1),
            r["terminal_state"].as_str().unwrap_or("").into(),
            r["note"].as_str().unwrap_or("").replace('|', "\\|"),
        ]);
    }
    out.push_str("<details><summary>Per task</summary>\n\n");
    out.push_str(&per_task.render());
    out.push_str("\n</details>\n\n");
    if let Some(notes) = doc["notes"].as_array().filter(|n| !n.is_empty()) {
        out.push_str("Notes from the run:\n\n");
        for note in notes {
            let _ = writeln!(out, "- {}", note.as_str().unwrap_or(""));
        }
        out.push('\n');
    }
    Ok(out)
}
