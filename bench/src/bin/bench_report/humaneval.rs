//! The HumanEval section: hidden pass rate per arm from `humaneval-<size>.json` (written by
//! `arms-bench --suite humaneval`), with the subset, the anchor and one chart per model size.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use crate::arms::{arm_stats, arms_section, rate, ArmsLabels};

/// What the subset is, in one paragraph.
fn subset_paragraph(subset: &Value) -> String {
    if subset.is_null() {
        return "No subset description in the file.\n\n".into();
    }
    let ids: Vec<&str> = subset["ids"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    format!(
        "Subset: {} of the {} problems, seed {} ({}). Public checks the roles see: {} with the \
         docstring's own doctest examples (copied into a protected `test_examples.txt`), {} with \
         its prose examples (`f(1) ==> 2`) as `f(1) == 2` doctests there, {} with only the \
         import-and-body check, which every problem has. \
         Dataset `{}` sha256 `{}` from {}. Problems, in run order: {}.\n\n",
        subset["size"],
        subset["drawn_from"],
        subset["seed"],
        subset["method"].as_str().unwrap_or("?"),
        subset["with_doctests"],
        subset["with_listed_examples"],
        subset["signature_only"],
        subset["dataset"]["file"].as_str().unwrap_or("?"),
        subset["dataset"]["sha256"].as_str().unwrap_or("?"),
        subset["dataset"]["source"].as_str().unwrap_or("?"),
        ids.join(", "),
    )
}

/// Issue 13's goals read off the results: loopgate's lead in hidden pass rate (goal at least
/// 15 points), its tokens per solved task over single-shot's (goal at most 1.5x) and its false
/// completions (goal 0). Measurements, not assertions.
pub fn goals_line(results: &[Value]) -> String {
    let arms = arm_stats(results);
    let (Some(single), Some(looped)) = (arms.get("single_shot"), arms.get("loopgate")) else {
        return String::new();
    };
    let points = 100.0 * (looped.fraction(looped.solved) - single.fraction(single.solved));
    let tokens = match (looped.tokens_per_solved(), single.tokens_per_solved()) {
        (Some(l), Some(s)) if s > 0.0 => format!("{:.2}x", l / s),
        _ => "n/a (an arm solved nothing)".into(),
    };
    format!(
        "Against the goals: loopgate minus single_shot hidden pass rate {} points (goal: at least \
         +15); loopgate tokens per solved task over single_shot's {tokens} (goal: at most 1.5x); \
         loopgate false completions {} (goal: 0).\n\n",
        if points.is_finite() {
            format!("{points:+.0}")
        } else {
            "n/a".into()
        },
        looped.false_done
    )
}

/// The section for one model (`doc` is one humaneval-<size>.json); writes its chart.
pub fn section(doc: &Value, svg_dir: &Path, svg_rel: &str) -> anyhow::Result<String> {
    let size = doc["model"]["size"].as_str().unwrap_or("?");
    let mut preamble = subset_paragraph(&doc["subset"]);
    if let Some(anchor) = doc["anchor"].as_str() {
        let _ = writeln!(preamble, "Anchor: {anchor}\n");
    }
    let results = doc["results"].as_array().cloned().unwrap_or_default();
    preamble.push_str(&goals_line(&results));
    let labels = ArmsLabels::new(
        ["hidden pass rate", "false completions"],
        "public check",
        "humaneval",
        "HumanEval subset per arm",
        size,
    );
    let heading = format!("HumanEval, model {size}");
    arms_section(doc, &heading, &preamble, &labels, (svg_dir, svg_rel))
}

/// One headline line per HumanEval file.
pub fn headline(doc: &Value) -> String {
    let size = doc["model"]["size"].as_str().unwrap_or("?");
    let results = doc["results"].as_array().cloned().unwrap_or_default();
    let parts: Vec<String> = arm_stats(&results)
        .iter()
        .map(|(arm, s)| {
            format!(
                "`{arm}` {} hidden pass (false completions {})",
                rate(s.solved, s.tasks),
                s.false_done
            )
        })
        .collect();
    if parts.is_empty() {
        return format!("- HumanEval subset, model {size}: no results in the file.\n");
    }
    format!(
        "- **HumanEval subset ({} problems), model {size}**: {}{}.\n",
        doc["subset"]["size"],
        parts.join(", "),
        if doc["finished_at"].is_null() {
            " (partial: the run had not finished)"
        } else {
            ""
        }
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn result(arm: &str, passes: bool, claimed: bool, tokens: u64, wall: f64) -> Value {
        json!({"task": "HumanEval/1", "kind": "doctests", "arm": arm, "passes": passes,
               "claimed_done": claimed, "tokens": tokens, "wall_s": wall, "rounds": 1,
               "terminal_state": "completed", "note": "a | b"})
    }

    fn doc(results: Vec<Value>, finished: Option<&str>) -> Value {
        json!({
            "suite": "humaneval",
            "model": {"size": "0.5b", "file": "m.gguf", "sha256": "abc"},
            "token_budget": 40000,
            "started_at": "2026-01-01T00:00:00Z",
            "finished_at": finished,
            "subset": {"seed": 13, "size": 2, "drawn_from": 164, "method": "shuffle",
                       "ids": ["HumanEval/1", "HumanEval/2"], "with_doctests": 1,
                       "with_listed_examples": 1, "signature_only": 0,
                       "dataset": {"file": "HumanEval.jsonl", "sha256": "def", "source": "pypi"}},
            "anchor": "about 70%",
            "notes": ["note one"],
            "results": results,
        })
    }

    #[test]
    fn section_reports_rates_false_completions_and_tokens_per_solved() {
        let svg = tempfile::tempdir().unwrap();
        let cases: &[(Vec<Value>, &[&str])] = &[
            (
                vec![
                    result("single_shot", true, true, 100, 10.0),
                    result("single_shot", false, true, 300, 30.0),
                    result("loopgate", true, true, 500, 50.0),
                    result("loopgate", true, true, 700, 70.0),
                ],
                &[
                    "| single_shot | 1/2 (50%)        | 1/2 (50%)         | 2/2 (100%)   | 400 ",
                    "| loopgate    | 2/2 (100%)       | 0/2 (0%)          | 2/2 (100%)   | 600 ",
                    "Subset: 2 of the 164 problems, seed 13",
                    "Anchor: about 70%",
                    "- note one",
                    "a \\| b",
                ],
            ),
            (
                vec![result("single_shot", false, false, 50, 5.0)],
                &["n/a (nothing solved)", "| 5.0 "],
            ),
        ];
        for (results, wants) in cases {
            let text = section(&doc(results.clone(), Some("x")), svg.path(), "bench").unwrap();
            for want in *wants {
                assert!(text.contains(want), "missing {want:?} in\n{text}");
            }
            assert!(svg.path().join("humaneval-0.5b.svg").is_file());
        }
        let partial = section(&doc(vec![], None), svg.path(), "bench").unwrap();
        assert!(partial.contains("Partial results"));
        assert!(partial.contains("No results in the file."));
    }

    #[test]
    fn goals_line_compares_the_arms() {
        let cases: &[(Vec<Value>, &str)] = &[
            (
                vec![
                    result("single_shot", true, true, 100, 1.0),
                    result("single_shot", false, true, 100, 1.0),
                    result("loopgate", true, true, 150, 1.0),
                    result("loopgate", true, true, 150, 1.0),
                ],
                "hidden pass rate +50 points (goal: at least +15); loopgate tokens per solved task \
                 over single_shot's 0.75x (goal: at most 1.5x); loopgate false completions 0",
            ),
            (
                vec![
                    result("single_shot", false, true, 100, 1.0),
                    result("loopgate", false, true, 100, 1.0),
                ],
                "rate +0 points (goal: at least +15); loopgate tokens per solved task over \
                 single_shot's n/a (an arm solved nothing) (goal: at most 1.5x); loopgate false \
                 completions 1",
            ),
            (vec![result("loopgate", true, true, 1, 1.0)], ""),
        ];
        for (results, want) in cases {
            let line = goals_line(results);
            assert!(line.contains(want), "{line}");
            assert_eq!(line.is_empty(), want.is_empty());
        }
    }

    #[test]
    fn headline_per_arm() {
        let cases: &[(Vec<Value>, Option<&str>, &str)] = &[
            (
                vec![
                    result("loopgate", true, true, 1, 1.0),
                    result("single_shot", false, true, 1, 1.0),
                ],
                Some("x"),
                "- **HumanEval subset (2 problems), model 0.5b**: `loopgate` 1/1 (100%) hidden pass (false completions 0), `single_shot` 0/1 (0%) hidden pass (false completions 1).\n",
            ),
            (
                vec![result("loopgate", true, true, 1, 1.0)],
                None,
                "(partial: the run had not finished).\n",
            ),
            (vec![], Some("x"), "no results in the file"),
        ];
        for (results, finished, want) in cases {
            let line = headline(&doc(results.clone(), *finished));
            assert!(line.contains(want), "{line}");
        }
    }
}
