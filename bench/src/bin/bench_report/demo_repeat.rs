//! The `make demo` repeat section from `demo-repeat.json` (scripts/demo-repeat.sh): how many of
//! N consecutive runs of examples/hello completed, the median time, every run, and each failed
//! run's end state and reason.

use std::fmt::Write as _;
use std::path::Path;

use loopgate_bench::Table;
use serde_json::Value;

use crate::svg::hbar_chart;
use crate::{fmt_num, median, num};

/// What the runs add up to.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoSummary {
    pub asked: u64,
    pub runs: usize,
    pub completed: usize,
    pub median_wall_s: f64,
    pub median_run_s: f64,
    /// (run number, end state, reason) of each run that did not complete.
    pub failures: Vec<(u64, String, String)>,
}

pub fn summarize(doc: &Value) -> DemoSummary {
    let runs = doc["runs"].as_array().cloned().unwrap_or_default();
    let completed = |r: &Value| r["state"] == "completed" && r["exit_code"] == 0;
    let walls: Vec<f64> = runs.iter().map(|r| num(&r["wall_s"])).collect();
    let run_secs: Vec<f64> = runs.iter().map(|r| num(&r["run_s"])).collect();
    DemoSummary {
        asked: doc["runs_asked"].as_u64().unwrap_or(runs.len() as u64),
        runs: runs.len(),
        completed: runs.iter().filter(|r| completed(r)).count(),
        median_wall_s: median(&walls),
        median_run_s: median(&run_secs),
        failures: runs
            .iter()
            .filter(|r| !completed(r))
            .map(|r| {
                (
                    r["run"].as_u64().unwrap_or(0),
                    r["state"].as_str().unwrap_or("?").to_string(),
                    r["terminal_reason"]
                        .as_str()
                        .unwrap_or(if r["exit_code"] == 0 {
                            ""
                        } else {
                            "scripts/demo.sh exited non-zero"
                        })
                        .to_string(),
                )
            })
            .collect(),
    }
}

fn model_of(doc: &Value) -> String {
    doc["model"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| doc["model_url"].as_str().unwrap_or("?").to_string())
}

/// The headline line.
pub fn headline(doc: &Value) -> String {
    let s = summarize(doc);
    format!(
        "- **`make demo`, {} in a row, model {}**: {} of {} completed; median {} s per run \
         (the whole scripts/demo.sh){}.\n",
        if s.asked == 1 {
            "1 run".to_string()
        } else {
            format!("{} runs", s.asked)
        },
        model_of(doc),
        s.completed,
        s.runs,
        fmt_num(s.median_wall_s, 1),
        if s.runs < s.asked as usize {
            " (partial: not every run has finished)"
        } else {
            ""
        }
    )
}

pub fn section(doc: &Value, svg_dir: &Path, svg_rel: &str) -> anyhow::Result<String> {
    let s = summarize(doc);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Model {} on {} cores; started {}, finished {}; load average (1 min) {} before, {} after.\n",
        model_of(doc),
        doc["cores"],
        doc["started_at"].as_str().unwrap_or("?"),
        doc["finished_at"].as_str().unwrap_or("not yet"),
        doc["load_start"].as_str().unwrap_or("?"),
        doc["load_end"].as_str().unwrap_or("?"),
    );
    let _ = writeln!(
        out,
        "**{} of {} runs completed** ({} asked). Median wall time {} s per run (scripts/demo.sh \
         from `loopgate up` to its stop, model server already loaded), median {} s from submit \
         to the run's last update.\n",
        s.completed,
        s.runs,
        s.asked,
        fmt_num(s.median_wall_s, 1),
        fmt_num(s.median_run_s, 1),
    );
    let Some(runs) = doc["runs"].as_array().filter(|r| !r.is_empty()) else {
        out.push_str("No runs in the file.\n\n");
        return Ok(out);
    };
    let mut table = Table::new(&[
        "run",
        "end state",
        "exit code",
        "wall s",
        "run s",
        "rounds",
        "tokens",
        "reason",
    ]);
    let mut chart_rows = Vec::new();
    for r in runs {
        let state = r["state"].as_str().unwrap_or("?");
        table.row(vec![
            fmt_num(num(&r["run"]), 0),
            state.to_string(),
            fmt_num(num(&r["exit_code"]), 0),
            fmt_num(num(&r["wall_s"]), 1),
            fmt_num(num(&r["run_s"]), 1),
            fmt_num(num(&r["rounds"]), 0),
            fmt_num(num(&r["tokens"]), 0),
            r["terminal_reason"]
                .as_str()
                .unwrap_or("")
                .replace('|', "\\|"),
        ]);
        chart_rows.push((
            format!("run {} ({state})", fmt_num(num(&r["run"]), 0)),
            vec![num(&r["wall_s"])],
        ));
    }
    out.push_str(&table.render());
    out.push('\n');
    let file = "demo-repeat.svg";
    std::fs::write(
        svg_dir.join(file),
        hbar_chart(
            "make demo: wall time per run",
            "s",
            &["wall s"],
            &chart_rows,
            None,
        ),
    )?;
    let _ = writeln!(out, "![make demo wall time per run]({svg_rel}/{file})\n");
    if !s.failures.is_empty() {
        out.push_str("Runs that did not complete:\n\n");
        for (run, state, reason) in &s.failures {
            let _ = writeln!(out, "- run {run}: {state}: {reason}");
        }
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn run(i: u64, state: &str, rc: i64, wall: f64, reason: Option<&str>) -> Value {
        json!({"run": i, "exit_code": rc, "wall_s": wall, "run_s": wall - 10.0, "state": state,
               "terminal_reason": reason, "rounds": 2, "tokens": 1000, "run_id": "r"})
    }

    fn doc(runs: Vec<Value>, asked: u64) -> Value {
        json!({"model": "0.5b", "cores": 2, "runs_asked": asked, "started_at": "s",
               "finished_at": "f", "load_start": "1.0", "load_end": "2.0", "runs": runs})
    }

    #[test]
    fn summary_counts_completed_runs_and_medians() {
        let cases: &[(Vec<Value>, u64, usize, f64, usize)] = &[
            // asked 3: two completed, one blocked; median of 30, 40, 50 is 40.
            (
                vec![
                    run(1, "completed", 0, 30.0, None),
                    run(2, "blocked", 1, 50.0, Some("max failed rounds")),
                    run(3, "completed", 0, 40.0, None),
                ],
                3,
                2,
                40.0,
                1,
            ),
            // even count: the mean of the middle two; a demo that died before a run is a failure.
            (
                vec![
                    run(1, "completed", 0, 20.0, None),
                    run(2, "no_run", 1, 30.0, None),
                ],
                10,
                1,
                25.0,
                1,
            ),
            (vec![], 10, 0, f64::NAN, 0),
        ];
        for (runs, asked, completed, median_wall, failures) in cases {
            let s = summarize(&doc(runs.clone(), *asked));
            assert_eq!(s.completed, *completed);
            assert_eq!(s.asked, *asked);
            assert!(
                (s.median_wall_s.is_nan() && median_wall.is_nan())
                    || s.median_wall_s == *median_wall,
                "{s:?}"
            );
            assert_eq!(s.failures.len(), *failures);
        }
        let s = summarize(&doc(vec![run(2, "no_run", 1, 30.0, None)], 1));
        assert_eq!(
            s.failures,
            vec![(2, "no_run".into(), "scripts/demo.sh exited non-zero".into())]
        );
    }

    #[test]
    fn section_and_headline_render_failures() {
        let svg = tempfile::tempdir().unwrap();
        let d = doc(
            vec![
                run(1, "completed", 0, 30.0, None),
                run(2, "blocked", 1, 50.0, Some("gate | closed")),
            ],
            3,
        );
        let text = section(&d, svg.path(), "bench").unwrap();
        for want in [
            "**1 of 2 runs completed** (3 asked)",
            "Median wall time 40.0 s",
            "- run 2: blocked: gate | closed",
            "gate \\| closed",
            "![make demo wall time per run](bench/demo-repeat.svg)",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
        assert!(svg.path().join("demo-repeat.svg").is_file());
        assert_eq!(
            headline(&d),
            "- **`make demo`, 3 runs in a row, model 0.5b**: 1 of 2 completed; median 40.0 s per \
             run (the whole scripts/demo.sh) (partial: not every run has finished).\n"
        );
    }
}
