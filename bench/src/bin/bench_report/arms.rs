//! The verified-results section: solve rate per arm from `arms-<size>.json` (written by
//! `arms-bench`), one table set and one chart per model size.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use loopgate_bench::Table;
use serde_json::Value;

use crate::svg::hbar_chart;
use crate::{fmt_num, median, num};

/// One arm's totals over its results.
#[derive(Debug, Clone, PartialEq)]
pub struct ArmStats {
    pub tasks: usize,
    pub solved: usize,
    pub claimed: usize,
    pub false_done: usize,
    pub tokens: f64,
    pub wall_s: Vec<f64>,
}

impl ArmStats {
    /// Every token the arm spent / tasks solved (None when nothing was solved).
    pub fn tokens_per_solved(&self) -> Option<f64> {
        (self.solved > 0).then(|| self.tokens / self.solved as f64)
    }

    pub fn median_wall_s(&self) -> f64 {
        median(&self.wall_s)
    }

    pub fn total_wall_s(&self) -> f64 {
        self.wall_s.iter().filter(|w| w.is_finite()).sum()
    }

    /// `n` as a fraction of the arm's tasks (NaN without tasks).
    pub fn fraction(&self, n: usize) -> f64 {
        if self.tasks == 0 {
            f64::NAN
        } else {
            n as f64 / self.tasks as f64
        }
    }
}

/// Per arm (by name): tasks, solved (`passes`), claimed done, false completions (claimed but
/// not passing), tokens and wall times.
pub fn arm_stats(results: &[Value]) -> BTreeMap<String, ArmStats> {
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

/// `n/d (p%)`, "n/a" for an empty denominator.
pub fn rate(n: usize, d: usize) -> String {
    if d == 0 {
        "n/a".into()
    } else {
        format!("{n}/{d} ({:.0}%)", 100.0 * n as f64 / d as f64)
    }
}

/// The per-task results as a table, inside a `<details>` block; `kind` names the kind column.
pub fn per_task_details(results: &[Value], kind: &str) -> String {
    let mut per_task = Table::new(&[
        "task",
        kind,
        "arm",
        "passes",
        "claimed done",
        "tokens",
        "rounds",
        "wall s",
        "end state",
        "note",
    ]);
    for r in results {
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
            table_cell(r["note"].as_str().unwrap_or("")),
        ]);
    }
    let mut out = String::from("<details><summary>Per task</summary>\n\n");
    out.push_str(&per_task.render());
    out.push_str("\n</details>\n\n");
    out
}

/// `text` fit for one Markdown table cell: line breaks folded into spaces, `|` escaped (a
/// model's reply quoted in a note can hold both).
pub fn table_cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// The run's own notes as a list (nothing when it has none).
pub fn run_notes(doc: &Value) -> String {
    let mut out = String::new();
    if let Some(notes) = doc["notes"].as_array().filter(|n| !n.is_empty()) {
        out.push_str("Notes from the run:\n\n");
        for note in notes {
            let _ = writeln!(out, "- {}", note.as_str().unwrap_or(""));
        }
        out.push('\n');
    }
    out
}

/// The model, budget and dates line of a run file, and a warning when it is partial.
pub fn run_header(doc: &Value) -> String {
    let mut out = format!(
        "Model file `{}`, sha256 `{}`; token budget per task {}; started {}, finished {}.\n\n",
        doc["model"]["file"].as_str().unwrap_or("?"),
        doc["model"]["sha256"].as_str().unwrap_or("?"),
        doc["token_budget"],
        doc["started_at"].as_str().unwrap_or("?"),
        doc["finished_at"].as_str().unwrap_or("?"),
    );
    if doc["finished_at"].is_null() {
        out.push_str(
            "**Partial results: this run had not finished when the report was written.**\n\n",
        );
    }
    out
}

/// Two rates per arm (each a fraction of the arm's tasks) as grouped bars on a 0..1 axis.
pub fn write_rate_chart(
    path: &Path,
    title: &str,
    labels: [&str; 2],
    rows: &[(String, [f64; 2])],
) -> anyhow::Result<()> {
    let names: Vec<&str> = rows.iter().map(|(a, _)| a.as_str()).collect();
    let chart_rows: Vec<(String, Vec<f64>)> = labels
        .iter()
        .enumerate()
        .map(|(i, label)| (label.to_string(), rows.iter().map(|(_, r)| r[i]).collect()))
        .collect();
    std::fs::write(
        path,
        hbar_chart(title, "fraction of tasks", &names, &chart_rows, Some(1.0)),
    )?;
    Ok(())
}

/// How a section names its rates, its kind column and its chart.
pub struct ArmsLabels {
    pub rate: &'static str,
    pub false_rate: &'static str,
    pub kind: &'static str,
    /// File name of the chart inside the SVG directory.
    pub chart_file: String,
    pub chart_title: String,
}

impl ArmsLabels {
    /// The chart is `<chart_stem>-<size>.svg`, titled `<chart_title>, model <size>`.
    pub fn new(
        [rate, false_rate]: [&'static str; 2],
        kind: &'static str,
        chart_stem: &str,
        chart_title: &str,
        size: &str,
    ) -> ArmsLabels {
        ArmsLabels {
            rate,
            false_rate,
            kind,
            chart_file: format!("{chart_stem}-{size}.svg"),
            chart_title: format!("{chart_title}, model {size}"),
        }
    }
}

/// A whole section for one run file: `### <heading>`, the model line, `preamble`, then
/// [`arms_body`].
pub fn arms_section(
    doc: &Value,
    heading: &str,
    preamble: &str,
    labels: &ArmsLabels,
    svg_dirs: (&Path, &str),
) -> anyhow::Result<String> {
    let mut out = format!("### {heading}\n\n");
    out.push_str(&run_header(doc));
    out.push_str(preamble);
    out.push_str(&arms_body(doc, labels, svg_dirs.0, svg_dirs.1)?);
    Ok(out)
}

/// Everything after a section's header: the per-arm table (rates, claims, tokens per solved
/// task, median and total wall time), the chart, the per-task table and the run's notes.
pub fn arms_body(
    doc: &Value,
    labels: &ArmsLabels,
    svg_dir: &Path,
    svg_rel: &str,
) -> anyhow::Result<String> {
    let mut out = String::new();
    let results = doc["results"].as_array().cloned().unwrap_or_default();
    if results.is_empty() {
        out.push_str("No results in the file.\n\n");
        return Ok(out);
    }
    let mut table = Table::new(&[
        "arm",
        labels.rate,
        labels.false_rate,
        "claimed done",
        "tokens per solved task",
        "median wall s per task",
        "total wall s",
    ]);
    let mut rows = Vec::new();
    for (arm, s) in &arm_stats(&results) {
        table.row(vec![
            arm.clone(),
            rate(s.solved, s.tasks),
            rate(s.false_done, s.tasks),
            rate(s.claimed, s.tasks),
            match s.tokens_per_solved() {
                Some(t) => format!("{t:.0}"),
                None => "n/a (nothing solved)".into(),
            },
            fmt_num(s.median_wall_s(), 1),
            fmt_num(s.total_wall_s(), 0),
        ]);
        rows.push((
            arm.clone(),
            [s.fraction(s.solved), s.fraction(s.false_done)],
        ));
    }
    out.push_str(&table.render());
    out.push('\n');
    write_rate_chart(
        &svg_dir.join(&labels.chart_file),
        &labels.chart_title,
        [labels.rate, labels.false_rate],
        &rows,
    )?;
    let _ = writeln!(
        out,
        "![{}]({svg_rel}/{})\n",
        labels.chart_title, labels.chart_file
    );
    out.push_str(&per_task_details(&results, labels.kind));
    out.push_str(&run_notes(doc));
    Ok(out)
}

/// The section for one model (`doc` is one arms-<size>.json); writes its chart into `svg_dir`.
pub fn section(doc: &Value, svg_dir: &Path, svg_rel: &str) -> anyhow::Result<String> {
    let size = doc["model"]["size"].as_str().unwrap_or("?");
    let labels = ArmsLabels::new(
        ["solve rate", "false-completion rate"],
        "kind",
        "solve-rate",
        "Solve rate per arm",
        size,
    );
    arms_section(
        doc,
        &format!("Model {size}"),
        "",
        &labels,
        (svg_dir, svg_rel),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn table_cells_hold_one_line() {
        let cases: &[(&str, &str)] = &[
            ("plain", "plain"),
            ("a\n  \"b\": 1\n}", "a \"b\": 1 }"),
            ("x | y", "x \\| y"),
            ("", ""),
        ];
        for (input, want) in cases {
            assert_eq!(table_cell(input), *want, "{input:?}");
        }
    }

    /// (arm, passes, claimed done, tokens, wall s) per result.
    type Row = (&'static str, bool, bool, f64, f64);
    /// Rows; then for arm "a": [tasks, solved, claimed, false completions], tokens per solved
    /// task, median wall s.
    type Case = (&'static [Row], [usize; 4], Option<f64>, f64);

    fn results(rows: &[Row]) -> Vec<Value> {
        rows.iter()
            .map(|(arm, passes, claimed, tokens, wall)| {
                json!({"arm": arm, "passes": passes, "claimed_done": claimed,
                       "tokens": tokens, "wall_s": wall})
            })
            .collect()
    }

    #[test]
    fn arm_stats_add_up_per_arm() {
        let cases: &[Case] = &[
            (
                &[
                    ("a", true, true, 100.0, 10.0),
                    ("a", false, true, 200.0, 20.0),
                    ("a", false, false, 300.0, 90.0),
                    ("b", true, true, 1.0, 1.0),
                ],
                [3, 1, 2, 1],
                Some(600.0),
                20.0,
            ),
            (
                &[
                    ("a", false, false, 50.0, 4.0),
                    ("a", false, false, 50.0, 6.0),
                ],
                [2, 0, 0, 0],
                None,
                5.0,
            ),
        ];
        for (rows, counts, per_solved, wall) in cases {
            let stats = arm_stats(&results(rows));
            let s = &stats["a"];
            assert_eq!(
                [s.tasks, s.solved, s.claimed, s.false_done],
                *counts,
                "{rows:?}"
            );
            assert_eq!(s.tokens_per_solved(), *per_solved);
            assert_eq!(s.median_wall_s(), *wall);
        }
        // Missing fields count as not passing, not claimed, no tokens, no wall time.
        let stats = arm_stats(&[json!({"arm": "a"})]);
        assert_eq!(stats["a"].tasks, 1);
        assert_eq!(stats["a"].tokens_per_solved(), None);
        assert!(stats["a"].median_wall_s().is_nan());
        assert_eq!(rate(1, 4), "1/4 (25%)");
        assert_eq!(rate(0, 0), "n/a");
    }
}
