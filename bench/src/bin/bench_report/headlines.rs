//! The few numbers at the top of the report.

use std::fmt::Write as _;

use serde_json::Value;

use crate::{fmt_num, num};

/// The headline list; `more` are lines of other sections (HumanEval, the demo repeat), each a
/// complete `- ...\n` item.
pub fn headlines(
    harness: Option<&Value>,
    throughput: Option<&Value>,
    arms: &[Value],
    more: &[String],
) -> String {
    let mut out = String::from("## Headlines\n\n");
    match harness {
        Some(h) => {
            let r = &h["per_round_ms"];
            let _ = writeln!(
                out,
                "- **Harness overhead per round** (instant stand-in model, no-op check, {} rounds): \
                 p50 **{} ms**, p95 {} ms, p99 {} ms. Loopback floor (5 queue hops + 7 Redis round \
                 trips) {} ms: the round is **{}x** the floor at p50 ({}x at p99).",
                r["n"],
                fmt_num(num(&r["p50"]), 1),
                fmt_num(num(&r["p95"]), 1),
                fmt_num(num(&r["p99"]), 1),
                fmt_num(num(&h["floor"]["floor_ms"]), 2),
                fmt_num(num(&h["floor"]["ratio_p50"]), 1),
                fmt_num(num(&h["floor"]["ratio_p99"]), 1),
            );
            if let Some(biggest) = h["parts"].as_array().and_then(|ps| {
                ps.iter()
                    .max_by(|a, b| num(&a["ms"]["mean"]).total_cmp(&num(&b["ms"]["mean"])))
            }) {
                let _ = writeln!(
                    out,
                    "- Largest part of a round: `{}` ({}), mean {} ms of {} ms.",
                    biggest["id"].as_str().unwrap_or("?"),
                    biggest["what"].as_str().unwrap_or(""),
                    fmt_num(num(&biggest["ms"]["mean"]), 1),
                    fmt_num(num(&r["mean"]), 1),
                );
            }
        }
        None => out.push_str("- Harness overhead: not run.\n"),
    }
    match throughput.and_then(|t| t["cells"].as_array()) {
        Some(cells) if !cells.is_empty() => {
            let best = cells
                .iter()
                .max_by(|a, b| num(&a["rounds_per_s"]).total_cmp(&num(&b["rounds_per_s"])));
            if let Some(b) = best {
                let peak = |key: &str| {
                    cells
                        .iter()
                        .map(|c| num(&c["rss_peak_kib"][key]))
                        .fold(0.0, f64::max)
                        / 1024.0
                };
                let _ = writeln!(
                    out,
                    "- **Throughput**: up to **{} rounds/s** ({} runs/s) with {} concurrent runs and {} \
                     executor(s), one auditor. Peak RSS over all cells: manager {} MiB, executor {} MiB, \
                     auditor {} MiB.",
                    fmt_num(num(&b["rounds_per_s"]), 1),
                    fmt_num(num(&b["runs_per_s"]), 2),
                    b["concurrent_runs"],
                    b["executors"],
                    fmt_num(peak("manager"), 1),
                    fmt_num(peak("executor_max"), 1),
                    fmt_num(peak("auditor"), 1),
                );
            }
        }
        _ => out.push_str("- Throughput: not run.\n"),
    }
    if arms.is_empty() {
        out.push_str(
            "- Verified results (real model, solve rate per arm): not run in this report.\n",
        );
    }
    for doc in arms {
        let results = doc["results"].as_array().cloned().unwrap_or_default();
        let mut arm_names: Vec<&str> = results.iter().filter_map(|r| r["arm"].as_str()).collect();
        arm_names.sort_unstable();
        arm_names.dedup();
        let parts: Vec<String> = arm_names
            .iter()
            .map(|arm| {
                let of_arm: Vec<&Value> = results.iter().filter(|r| r["arm"] == *arm).collect();
                let solved = of_arm.iter().filter(|r| r["passes"] == true).count();
                let false_done = of_arm
                    .iter()
                    .filter(|r| r["claimed_done"] == true && r["passes"] != true)
                    .count();
                format!(
                    "`{arm}` solved {solved}/{} (false completions {false_done})",
                    of_arm.len()
                )
            })
            .collect();
        let size = doc["model"]["size"].as_str().unwrap_or("?");
        if parts.is_empty() {
            let _ = writeln!(out, "- Solve rate, model {size}: no results in the file.");
        } else {
            let _ = writeln!(
                out,
                "- **Solve rate, model {size}**: {}{}.",
                parts.join(", "),
                if doc["finished_at"].is_null() {
                    " (partial: the arms run had not finished)"
                } else {
                    ""
                }
            );
        }
    }
    for line in more {
        out.push_str(line);
    }
    out.push('\n');
    out
}
