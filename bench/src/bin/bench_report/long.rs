//! The long-task section (issue 39): `long-<size>.json` from `arms-bench --suite long`. Per arm
//! the hidden criteria at the end summed over the suite, false completions, runs that ended
//! below the best snapshot they held, tokens by role and wall time; the curves (one chart per
//! task, every arm on it); then every run.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use loopgate_bench::long::LongRecord;
use loopgate_bench::role_tokens::RoleTokens;
use loopgate_bench::Table;
use serde_json::Value;

use crate::arms::table_cell;
use crate::fmt_num;
use crate::svg::LineChart;

/// One arm's sums over its tasks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LongArmTotals {
    pub tasks: usize,
    /// Hidden criteria passing at the end, and of how many.
    pub passed: u32,
    pub criteria: u32,
    pub claimed: usize,
    pub false_completions: usize,
    /// Runs that ended below the best snapshot they held.
    pub below_best: usize,
    pub tokens: u64,
    pub by_role: RoleTokens,
    /// Of `tokens`, prompt tokens read from the model server's prompt cache.
    pub cached_prompt_tokens: u64,
    pub wall_s: f64,
}

impl LongArmTotals {
    /// Tokens per hidden criterion passing at the end (None when none passes).
    pub fn tokens_per_criterion(&self) -> Option<f64> {
        (self.passed > 0).then(|| self.tokens as f64 / f64::from(self.passed))
    }
}

/// The records of a file (entries that are not records are left out).
pub fn records(doc: &Value) -> Vec<LongRecord> {
    doc["results"]
        .as_array()
        .map(|rs| {
            rs.iter()
                .filter_map(|r| serde_json::from_value(r.clone()).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Per arm, in the order the arms first appear.
pub fn arm_totals(records: &[LongRecord]) -> Vec<(String, LongArmTotals)> {
    let mut out: Vec<(String, LongArmTotals)> = Vec::new();
    for r in records {
        let at = match out.iter().position(|(arm, _)| *arm == r.arm) {
            Some(i) => i,
            None => {
                out.push((r.arm.clone(), LongArmTotals::default()));
                out.len() - 1
            }
        };
        let t = &mut out[at].1;
        t.tasks += 1;
        t.passed += r.hidden_passed;
        t.criteria += r.criteria;
        t.claimed += usize::from(r.claimed_done);
        t.false_completions += usize::from(r.false_completion);
        t.below_best += usize::from(!r.summary.final_is_best);
        t.tokens += r.tokens;
        t.by_role.add(r.tokens_by_role);
        t.cached_prompt_tokens += r.cached_prompt_tokens;
        t.wall_s += r.wall_s;
    }
    out
}

/// `loopgate` against `continuation` on the tasks both ran: hidden criteria at the end and
/// tokens, as ratios (issue 39's goal: at least 1.3x the criteria at no more tokens).
pub fn loopgate_vs_continuation(records: &[LongRecord]) -> Option<String> {
    let of = |arm: &str, task: &str| records.iter().find(|r| r.arm == arm && r.task == task);
    let mut both = Vec::new();
    for r in records.iter().filter(|r| r.arm == "loopgate") {
        if let Some(c) = of("continuation", &r.task) {
            both.push((r, c));
        }
    }
    if both.is_empty() {
        return None;
    }
    let (lk, ck): (u32, u32) = both.iter().fold((0, 0), |(a, b), (l, c)| {
        (a + l.hidden_passed, b + c.hidden_passed)
    });
    let (lt, ct): (u64, u64) = both
        .iter()
        .fold((0, 0), |(a, b), (l, c)| (a + l.tokens, b + c.tokens));
    let ratio = |a: f64, b: f64| {
        if b > 0.0 {
            format!("{:.2}x", a / b)
        } else {
            "n/a".to_string()
        }
    };
    Some(format!(
        "`loopgate` against `continuation` on the {} task(s) both ran: hidden criteria at the end \
         {lk} against {ck} ({}), tokens {lt} against {ct} ({}). Issue 39's goal: at least 1.3x \
         the criteria at no more tokens.",
        both.len(),
        ratio(f64::from(lk), f64::from(ck)),
        ratio(lt as f64, ct as f64),
    ))
}

/// One arm's curve on a chart: its name and its (round, hidden criteria held) points.
pub type ArmCurve = (String, Vec<(f64, f64)>);

/// Per task, each arm's curve: the hidden criteria the kept snapshot passes after each round.
pub fn curves(records: &[LongRecord]) -> BTreeMap<String, Vec<ArmCurve>> {
    let mut out: BTreeMap<String, Vec<ArmCurve>> = BTreeMap::new();
    for r in records.iter().filter(|r| !r.curve.is_empty()) {
        let points = r
            .curve
            .iter()
            .map(|p| (f64::from(p.round), f64::from(p.kept_passed)))
            .collect();
        out.entry(r.task.clone())
            .or_default()
            .push((r.arm.clone(), points));
    }
    out
}

/// The chart file of one task's curves.
pub fn chart_file(size: &str, task: &str) -> String {
    format!("long-{size}-{task}.svg")
}

pub fn headline(doc: &Value) -> String {
    let size = doc["model"]["size"].as_str().unwrap_or("?");
    let recs = records(doc);
    let parts: Vec<String> = arm_totals(&recs)
        .iter()
        .map(|(arm, t)| {
            format!(
                "`{arm}` {}/{} (false completions {}, ended below its best {})",
                t.passed, t.criteria, t.false_completions, t.below_best
            )
        })
        .collect();
    if parts.is_empty() {
        return format!("- Long tasks, model {size}: no results in the file.\n");
    }
    format!(
        "- **Long tasks (`examples/long`), model {size}**, hidden criteria at the end: {}{}.\n",
        parts.join(", "),
        if doc["finished_at"].is_null() {
            " (partial: the run had not finished)"
        } else {
            ""
        }
    )
}

pub fn section(doc: &Value, svg_dir: &Path, svg_rel: &str) -> anyhow::Result<String> {
    let size = doc["model"]["size"].as_str().unwrap_or("?");
    let caps = &doc["caps"];
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### Model {size} (`{}`), token budget {} per task and arm\n",
        doc["model"]["file"].as_str().unwrap_or("?"),
        doc["token_budget"]
    );
    let _ = writeln!(
        out,
        "Started {}, finished {}. Caps: executor episode {} s, single_shot wall {} s, loop runs \
         and the whole continuation {} s; hidden scripts {} s each.\n",
        doc["started_at"].as_str().unwrap_or("?"),
        doc["finished_at"]
            .as_str()
            .unwrap_or("not finished (cut short)"),
        caps["episode_secs"],
        caps["single_wall_secs"],
        caps["loop_wall_secs"],
        caps["hidden_secs"],
    );
    let recs = records(doc);
    let mut table = Table::new(&[
        "arm",
        "tasks",
        "hidden criteria at the end",
        "claimed done",
        "false completions",
        "ended below their best",
        "tokens",
        "manager / executor / auditor",
        "from the prompt cache",
        "tokens per criterion",
        "wall s",
    ]);
    for (arm, t) in arm_totals(&recs) {
        table.row(vec![
            format!("`{arm}`"),
            t.tasks.to_string(),
            format!(
                "{}/{} ({})",
                t.passed,
                t.criteria,
                if t.criteria == 0 {
                    "n/a".to_string()
                } else {
                    format!(
                        "{:.0}%",
                        100.0 * f64::from(t.passed) / f64::from(t.criteria)
                    )
                }
            ),
            t.claimed.to_string(),
            t.false_completions.to_string(),
            t.below_best.to_string(),
            t.tokens.to_string(),
            format!(
                "{} / {} / {}",
                t.by_role.manager, t.by_role.executor, t.by_role.auditor
            ),
            t.cached_prompt_tokens.to_string(),
            t.tokens_per_criterion()
                .map_or_else(|| "n/a".into(), |v| fmt_num(v, 0)),
            fmt_num(t.wall_s, 0),
        ]);
    }
    out.push_str(&table.render());
    if let Some(line) = loopgate_vs_continuation(&recs) {
        let _ = writeln!(out, "\n{line}");
    }
    out.push_str(
        "\nOne chart per task, every arm on it: the hidden criteria the snapshot a run held \
         passed after each round (round 0 is the starting workspace; a continuation's rounds \
         are its episodes). Per task rather than per arm because the tasks have 9 to 12 \
         criteria and a chart answers which arm keeps more ground on the same task; per arm, \
         tasks of different sizes would share one axis.\n\n",
    );
    let criteria_of = |task: &str| {
        recs.iter()
            .find(|r| r.task == task)
            .map_or(0.0, |r| f64::from(r.criteria))
    };
    for (task, series) in curves(&recs) {
        let file = chart_file(size, &task);
        let title = format!("{task}: hidden criteria held after each round (model {size})");
        std::fs::write(
            svg_dir.join(&file),
            LineChart {
                title: &title,
                x_label: "round",
                y_label: "hidden criteria passing",
                series,
                x_ticks: None,
                y_max: Some(criteria_of(&task)),
                markers: true,
            }
            .render(),
        )?;
        let _ = writeln!(out, "![{task}, model {size}]({svg_rel}/{file})\n");
    }
    out.push_str(&per_run_details(&recs));
    if let Some(notes) = doc["notes"].as_array().filter(|n| !n.is_empty()) {
        out.push_str("Notes from the run:\n\n");
        for note in notes {
            let _ = writeln!(out, "- {}", note.as_str().unwrap_or(""));
        }
        out.push('\n');
    }
    Ok(out)
}

fn per_run_details(recs: &[LongRecord]) -> String {
    let mut table = Table::new(&[
        "task",
        "arm",
        "hidden at the end",
        "best held (after round)",
        "lost ground after rounds",
        "claimed done",
        "false completion",
        "public",
        "tokens",
        "m / e / a",
        "from the prompt cache",
        "rounds",
        "wall s",
        "end",
        "note",
    ]);
    for r in recs {
        let yes = |b: bool| if b { "yes" } else { "no" }.to_string();
        table.row(vec![
            r.task.clone(),
            r.arm.clone(),
            format!("{}/{}", r.hidden_passed, r.criteria),
            format!(
                "{} ({}){}",
                r.summary.best_held,
                r.summary.best_held_round,
                if r.summary.final_is_best {
                    ""
                } else {
                    ", ended below"
                }
            ),
            r.summary
                .lost_ground
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            yes(r.claimed_done),
            yes(r.false_completion),
            r.public_passed
                .map_or_else(|| "-".into(), |p| format!("{p}/{}", r.criteria)),
            r.tokens.to_string(),
            format!(
                "{} / {} / {}",
                r.tokens_by_role.manager, r.tokens_by_role.executor, r.tokens_by_role.auditor
            ),
            r.cached_prompt_tokens.to_string(),
            r.rounds.to_string(),
            fmt_num(r.wall_s, 0),
            match &r.stop_reason {
                Some(stop) => format!("{} (stopped: {stop})", r.terminal_state),
                None => r.terminal_state.clone(),
            },
            table_cell(&r.note.chars().take(240).collect::<String>()),
        ]);
    }
    let mut out = String::from("<details><summary>Per task and arm</summary>\n\n");
    out.push_str(&table.render());
    out.push_str("\n</details>\n\n");
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use loopgate_bench::long::{CurvePoint, CurveSummary};
    use serde_json::json;

    fn record(task: &str, arm: &str, curve: &[u32], claimed: bool, tokens: u64) -> LongRecord {
        let mut r = LongRecord::bench_error(task, "kind", arm, 10, "");
        r.terminal_state = "budget_exhausted".into();
        r.curve = curve
            .iter()
            .enumerate()
            .map(|(i, k)| CurvePoint {
                round: i as u32,
                candidate: None,
                candidate_passed: None,
                kept: format!("s{i}"),
                kept_passed: *k,
            })
            .collect();
        let best = curve.iter().copied().max().unwrap_or(0);
        let last = curve.last().copied().unwrap_or(0);
        r.summary = CurveSummary {
            final_passed: last,
            best_held: best,
            best_held_round: 0,
            final_is_best: last >= best,
            best_candidate: None,
            lost_ground: Vec::new(),
        };
        r.hidden_passed = last;
        r.claimed_done = claimed;
        r.false_completion = claimed && last < 10;
        r.tokens = tokens;
        r.tokens_by_role = RoleTokens {
            manager: tokens / 4,
            executor: tokens - tokens / 4,
            auditor: 0,
        };
        r.wall_s = 100.0;
        r
    }

    fn doc(records: &[LongRecord]) -> Value {
        json!({
            "model": {"size": "1.5b", "file": "m.gguf"},
            "token_budget": 300000,
            "caps": {"episode_secs": 300, "single_wall_secs": 420, "loop_wall_secs": 2400, "hidden_secs": 300},
            "started_at": "2026-01-01T00:00:00Z",
            "finished_at": "2026-01-01T05:00:00Z",
            "notes": ["a note"],
            "results": serde_json::to_value(records).unwrap(),
        })
    }

    fn sample() -> Vec<LongRecord> {
        vec![
            record("a", "continuation", &[0, 2, 4], false, 1000),
            record("a", "loopgate", &[0, 3, 6, 5], false, 900),
            record("b", "continuation", &[0, 10], true, 500),
            record("b", "loopgate", &[0, 1, 8], true, 600),
        ]
    }

    #[test]
    fn totals_per_arm_and_the_comparison() {
        let recs = sample();
        let totals = arm_totals(&recs);
        let names: Vec<&str> = totals.iter().map(|(a, _)| a.as_str()).collect();
        assert_eq!(names, ["continuation", "loopgate"]);
        let (_, c) = &totals[0];
        assert_eq!(
            (c.passed, c.criteria, c.claimed, c.false_completions),
            (14, 20, 1, 0)
        );
        let (_, l) = &totals[1];
        assert_eq!(
            (l.passed, l.claimed, l.false_completions, l.below_best),
            (13, 1, 1, 1)
        );
        assert_eq!(l.tokens, 1500);
        assert_eq!(l.by_role.manager + l.by_role.executor, 1500);
        assert_eq!(l.tokens_per_criterion().map(|v| v.round()), Some(115.0));
        let line = loopgate_vs_continuation(&recs).unwrap();
        assert!(
            line.contains("on the 2 task(s)") && line.contains("13 against 14 (0.93x)"),
            "{line}"
        );
        assert!(line.contains("tokens 1500 against 1500 (1.00x)"), "{line}");
        assert_eq!(loopgate_vs_continuation(&recs[..1]), None);
        let curves = curves(&recs);
        assert_eq!(curves["a"].len(), 2);
        assert_eq!(curves["a"][1].1.last(), Some(&(3.0, 5.0)));
    }

    #[test]
    fn the_section_draws_one_chart_per_task_and_lists_every_run() {
        let svg = tempfile::tempdir().unwrap();
        let text = section(&doc(&sample()), svg.path(), "bench").unwrap();
        for task in ["a", "b"] {
            let file = chart_file("1.5b", task);
            assert!(svg.path().join(&file).is_file(), "{file}");
            assert!(text.contains(&format!("(bench/{file})")), "{text}");
        }
        let chart = std::fs::read_to_string(svg.path().join(chart_file("1.5b", "a"))).unwrap();
        assert!(
            chart.contains("continuation") && chart.contains(">10<"),
            "y axis to n"
        );
        assert!(text.starts_with("### Model 1.5b (`m.gguf`), token budget 300000"));
        assert!(text.contains("| `loopgate`"), "{text}");
        assert!(text.contains("<details><summary>Per task and arm</summary>"));
        assert!(text.contains("| 6 (0), ended below"), "{text}");
        assert!(text.contains("- a note"));
        let headline = headline(&doc(&sample()));
        assert!(
            headline.contains("`continuation` 14/20 (false completions 0, ended below its best 0)"),
            "{headline}"
        );
        let empty = section(&doc(&[]), svg.path(), "bench").unwrap();
        assert!(empty.contains("| arm"), "{empty}");
    }
}
