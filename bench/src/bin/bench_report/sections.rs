//! Report sections for the harness, throughput, manager-prompt and snapshot benchmarks.

use std::fmt::Write as _;
use std::path::Path;

use loopgate_bench::Table;
use serde_json::Value;

use crate::svg::{hbar_chart, LineChart};
use crate::{fmt_num, num};

fn ms_row(label: &str, s: &Value) -> Vec<String> {
    vec![
        label.to_string(),
        fmt_num(num(&s["p50"]), 2),
        fmt_num(num(&s["p95"]), 2),
        fmt_num(num(&s["p99"]), 2),
        fmt_num(num(&s["mean"]), 2),
    ]
}

/// Per-round overhead, its parts, the floor and the in-process components.
pub fn harness(doc: &Value, svg_dir: &Path, svg_rel: &str) -> anyhow::Result<String> {
    let mut out = String::new();
    let round = &doc["per_round_ms"];
    let floor = &doc["floor"];
    let comp = &doc["components"];
    let _ = writeln!(
        out,
        "{} rounds measured: {} runs of {} rounds, one run at a time, 1 executor, 1 auditor, 1 manager. \
         A round is timed from one `exec_dispatched` to the next in the run log, so it covers the \
         manager's decision, the executor episode (2 stand-in model calls, one file written), the \
         freeze, the audit (1 check, `true`) and every hop in between. {} of them could not be \
         split into parts (worker log lines missing).\n",
        round["n"], doc["runs"], doc["rounds_per_run"], doc["rounds_without_split"]
    );
    let mut table = Table::new(&["", "p50 ms", "p95 ms", "p99 ms", "mean ms"]);
    table.row(ms_row("**round (dispatch to dispatch)**", round));
    for part in doc["parts"].as_array().cloned().unwrap_or_default() {
        table.row(ms_row(
            &format!(
                "{} — {}",
                part["id"].as_str().unwrap_or("?"),
                part["what"].as_str().unwrap_or("")
            ),
            &part["ms"],
        ));
    }
    out.push_str(&table.render());
    let _ = writeln!(
        out,
        "\nParts come from the manager's run log (`at`, whole milliseconds: `exec_hop` reads up to \
         1 ms high and `report_to_dispatch` as much low) and the workers' JSON logs (microseconds). \
         Percentiles of parts do not add up to the round's percentiles; means do.\n"
    );

    let floor_ms = num(&floor["floor_ms"]);
    let _ = writeln!(
        out,
        "**Floor.** On the critical path of a round there are {} JetStream queue hops (ExecRequest, \
         ExecResult, AuditRequest, AuditReport, DecideRequest) and {} Redis round trips (load + CAS \
         for the exec result, the audit report and the decision, plus the decision's own load). \
         Measured in-process on the same servers: a hop (publish, wait for the stream ack, delivery \
         to a waiting pull consumer, double ack) p50 {} ms, a Redis PING p50 {} ms, so the floor is \
         **{} ms**. The round is **{}x** the floor at p50, {}x at p95 and {}x at p99.\n",
        floor["hops_per_round"],
        floor["redis_rtts_per_round"],
        fmt_num(num(&floor["jetstream_hop_ms"]["p50"]), 3),
        fmt_num(num(&floor["redis_ping_ms"]["p50"]), 3),
        fmt_num(floor_ms, 2),
        fmt_num(num(&floor["ratio_p50"]), 1),
        fmt_num(num(&floor["ratio_p95"]), 1),
        fmt_num(num(&floor["ratio_p99"]), 1),
    );

    let mut parts = Table::new(&[
        "component, measured alone",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "mean ms",
    ]);
    parts.row(ms_row("JetStream queue hop", &floor["jetstream_hop_ms"]));
    parts.row(ms_row("Redis PING", &floor["redis_ping_ms"]));
    parts.row(ms_row(
        &format!(
            "run store load (HMGET), {} B record",
            comp["run_record_bytes"]
        ),
        &comp["redis_load_ms"],
    ));
    parts.row(ms_row(
        "run store compare-and-set (EVALSHA)",
        &comp["redis_cas_ms"],
    ));
    parts.row(ms_row("freeze, 2 files, 1 changed", &comp["freeze_ms"]));
    parts.row(ms_row("materialize, 2 files", &comp["materialize_ms"]));
    parts.row(ms_row(
        "spawn `sh -c true` (no sandbox)",
        &comp["spawn_sh_true_ms"],
    ));
    parts.row(ms_row(
        "stand-in model call (HTTP)",
        &comp["standin_chat_ms"],
    ));
    out.push_str(&parts.render());

    // Attribution of the mean round to the categories.
    let mean = |v: &Value| num(&v["mean"]);
    let part_mean = |id: &str| {
        doc["parts"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["id"] == id))
            .map(|p| mean(&p["ms"]))
            .unwrap_or(f64::NAN)
    };
    let hops = 5.0 * mean(&floor["jetstream_hop_ms"]);
    let redis = 4.0 * mean(&comp["redis_load_ms"]) + 3.0 * mean(&comp["redis_cas_ms"]);
    let freeze = part_mean("exec_freeze");
    let materialize = 2.0 * mean(&comp["materialize_ms"]);
    let check = part_mean("check");
    let model = 3.0 * mean(&comp["standin_chat_ms"]);
    let audit_finish = part_mean("audit_finish");
    let exec_setup = part_mean("exec_materialize_model")
        - mean(&comp["materialize_ms"])
        - 2.0 * mean(&comp["standin_chat_ms"]);
    let total = mean(round);
    let rest =
        total - hops - redis - freeze - materialize - check - model - audit_finish - exec_setup;
    let mut attribution = Table::new(&[
        "where a round's time goes (means; estimates, see below)",
        "ms",
        "share",
    ]);
    for (label, v) in [
        ("queue hops: 5 x a JetStream hop", hops),
        ("Redis: 4 loads + 3 compare-and-sets", redis),
        ("snapshot freeze (executor)", freeze),
        ("snapshot materialize x 2 (executor base, auditor candidate)", materialize),
        ("check execution (`true` in the auditor's sandbox)", check),
        ("stand-in model: 3 calls", model),
        ("auditor after the check: remove its copy, store the output, remove the scratch dir, publish", audit_finish),
        ("executor episode besides materialize and model calls (episode dir, tools, hand-off file)", exec_setup),
        ("the rest: manager decision and bookkeeping, (de)serialization, logging, scheduling", rest),
        ("**round**", total),
    ] {
        attribution.row(vec![
            label.to_string(),
            fmt_num(v, 2),
            format!("{:.0}%", 100.0 * v / total),
        ]);
    }
    out.push('\n');
    out.push_str(&attribution.render());
    out.push_str(
        "\nHops, Redis, materialize and model calls are the in-process measurements above times \
         their count per round; freeze, check and the auditor's tail are the measured parts of the \
         round; the executor line is its measured part minus a materialize and two model calls; \
         the rest is what is left of the mean round.\n",
    );

    let rows: Vec<(String, Vec<f64>)> = std::iter::once(("round".to_string(), round))
        .chain(
            doc["parts"]
                .as_array()
                .map(|ps| {
                    ps.iter()
                        .map(|p| (p["id"].as_str().unwrap_or("?").to_string(), &p["ms"]))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default(),
        )
        .map(|(label, s)| (label, vec![num(&s["p50"]), num(&s["p95"]), num(&s["p99"])]))
        .collect();
    std::fs::write(
        svg_dir.join("round-parts.svg"),
        hbar_chart(
            "Harness time per round and its parts (instant model, no-op check)",
            "ms",
            &["p50", "p95", "p99"],
            &rows,
            None,
        ),
    )?;
    let series = doc["series"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let points = s["dispatch_s"]
                .as_array()
                .map(|d| {
                    d.iter()
                        .enumerate()
                        .map(|(r, t)| (num(t), (r + 1) as f64))
                        .collect()
                })
                .unwrap_or_default();
            (format!("run {}", i + 1), points)
        })
        .collect();
    std::fs::write(
        svg_dir.join("rounds-vs-time.svg"),
        LineChart {
            title: "Rounds vs time, one run at a time (instant model)",
            x_label: "seconds since submit",
            y_label: "rounds dispatched",
            series,
            x_ticks: None,
            y_max: None,
            markers: false,
        }
        .render(),
    )?;
    let _ = writeln!(
        out,
        "\n![round parts]({svg_rel}/round-parts.svg)\n\n![rounds vs time]({svg_rel}/rounds-vs-time.svg)\n"
    );
    Ok(out)
}

/// rounds/s, runs/s and peak RSS per (concurrent runs, executors) cell.
pub fn throughput(
    doc: &Value,
    harness: Option<&Value>,
    svg_dir: &Path,
    svg_rel: &str,
) -> anyhow::Result<String> {
    let mut out = String::new();
    let cells = doc["cells"].as_array().cloned().unwrap_or_default();
    let _ = writeln!(
        out,
        "Each cell starts a fresh stack (1 manager, the given executors, 1 auditor), submits all \
         runs at once (runs of {} rounds, ending `budget_exhausted`) and waits for every one to be \
         terminal. Wall time is first `submitted` to last `terminal` in the run logs. RSS is each \
         process's peak (`VmHWM`) over the cell, startup included.\n",
        doc["rounds_per_run"]
    );
    let mut table = Table::new(&[
        "concurrent runs",
        "executors",
        "rounds",
        "wall s",
        "rounds/s",
        "runs/s",
        "run latency p50 / p99 s",
        "manager MiB",
        "executor MiB (largest / all)",
        "auditor MiB",
        "nats-server MiB",
        "CPU ms per round: manager / executors / auditor / nats / redis (machine)",
    ]);
    let mib = |v: &Value| fmt_num(num(v) / 1024.0, 1);
    for c in &cells {
        let rss = &c["rss_peak_kib"];
        table.row(vec![
            c["concurrent_runs"].to_string(),
            c["executors"].to_string(),
            c["rounds"].to_string(),
            fmt_num(num(&c["wall_s"]), 2),
            fmt_num(num(&c["rounds_per_s"]), 1),
            fmt_num(num(&c["runs_per_s"]), 2),
            format!(
                "{} / {}",
                fmt_num(num(&c["run_latency_ms"]["p50"]) / 1000.0, 2),
                fmt_num(num(&c["run_latency_ms"]["p99"]) / 1000.0, 2)
            ),
            mib(&rss["manager"]),
            format!(
                "{} / {}",
                mib(&rss["executor_max"]),
                mib(&rss["executors_total"])
            ),
            mib(&rss["auditor"]),
            mib(&rss["nats_server"]),
            cpu_per_round(&c["cpu_ms_per_round"]),
        ]);
    }
    out.push_str(&table.render());

    let mut concurrencies: Vec<u64> = cells
        .iter()
        .filter_map(|c| c["concurrent_runs"].as_u64())
        .collect();
    concurrencies.sort_unstable();
    concurrencies.dedup();
    let mut executors: Vec<u64> = cells
        .iter()
        .filter_map(|c| c["executors"].as_u64())
        .collect();
    executors.sort_unstable();
    executors.dedup();
    let position = |c: u64| concurrencies.iter().position(|x| *x == c).unwrap_or(0) as f64;
    let series = executors
        .iter()
        .map(|e| {
            let points = cells
                .iter()
                .filter(|c| c["executors"].as_u64() == Some(*e))
                .filter_map(|c| {
                    Some((
                        position(c["concurrent_runs"].as_u64()?),
                        num(&c["rounds_per_s"]),
                    ))
                })
                .collect();
            (format!("{e} executor(s)"), points)
        })
        .collect();
    std::fs::write(
        svg_dir.join("throughput.svg"),
        LineChart {
            title: "Rounds/s vs concurrent runs (instant model, no-op check)",
            x_label: "concurrent runs",
            y_label: "rounds per second",
            series,
            x_ticks: Some(
                concurrencies
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (i as f64, c.to_string()))
                    .collect(),
            ),
            y_max: None,
            markers: true,
        }
        .render(),
    )?;
    if let Some(h) = harness {
        let audit: f64 = ["audit_materialize", "check", "audit_finish"]
            .iter()
            .map(|id| {
                h["parts"]
                    .as_array()
                    .and_then(|ps| ps.iter().find(|p| p["id"] == *id))
                    .map(|p| num(&p["ms"]["mean"]))
                    .unwrap_or(f64::NAN)
            })
            .sum();
        let _ = writeln!(
            out,
            "\nThere is one auditor and it audits one candidate at a time: at the {} ms an audit \
             takes in the harness section (materialize + check + tail, means), it alone caps the \
             stack near {} rounds/s however many executors there are; and all the processes share \
             the same cores.",
            fmt_num(audit, 1),
            fmt_num(1000.0 / audit, 0)
        );
    }
    let _ = writeln!(out, "\n![throughput]({svg_rel}/throughput.svg)\n");
    Ok(out)
}

/// Manager prompt size over rounds (manager-bench).
pub fn manager(doc: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "One run of {} rounds against the stand-in, with a long manager reply every round and a \
         check that always fails with 400 lines of output (so the history and the failure excerpts \
         really grow); the prompt is what the manager sent the model (system + user, characters). \
         Final state {}.\n",
        doc["rounds"], doc["final_state"]
    );
    let mut table = Table::new(&["round", "manager prompt chars"]);
    for row in doc["prompt_chars"].as_array().cloned().unwrap_or_default() {
        table.row(vec![
            row["round"].to_string(),
            row["prompt_chars"].to_string(),
        ]);
    }
    out.push_str(&table.render());
    let per = &doc["per_round_ms"];
    let _ = writeln!(
        out,
        "\nHarness time per round in that run (failing check with output): p50 {} ms, p99 {} ms, max {} ms over {} rounds.\n",
        fmt_num(num(&per["p50"]), 1),
        fmt_num(num(&per["p99"]), 1),
        fmt_num(num(&per["max"]), 1),
        per["n"]
    );
    out
}

/// Snapshot freeze vs git vs tar (snapshot_bench).
pub fn snapshot(doc: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} files, {} of source-like text; then one file changed (+{} bytes).\n",
        doc["files"],
        loopgate_bench::human_bytes(num(&doc["tree_bytes"]) as u64),
        doc["changed_bytes"]
    );
    for (key, title) in [
        ("second_snapshot", "second snapshot, one file changed"),
        ("first_snapshot", "first snapshot (reference)"),
    ] {
        let mut table = Table::new(&[title, "time ms", "bytes uploaded / written", "files hashed"]);
        for row in doc[key].as_array().cloned().unwrap_or_default() {
            table.row(vec![
                row["label"].as_str().unwrap_or("?").to_string(),
                fmt_num(num(&row["ms"]), 0),
                loopgate_bench::human_bytes(num(&row["bytes"]) as u64),
                row.get("files_hashed")
                    .map(Value::to_string)
                    .unwrap_or_else(|| "-".into()),
            ]);
        }
        out.push_str(&table.render());
        out.push('\n');
    }
    out
}

/// Warm workspaces vs git (workspace-bench): per tree and scenario, loopgate's freeze, warm and
/// cold materialize against `git commit`, `git checkout` and `git worktree add`, and the bytes
/// uploaded against the bytes changed.
pub fn workspace(doc: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "One run, one process, nats-server on loopback; a churning `target/` of {} files in the \
         churn scenarios; load average {} before, {} after. Each cell is loopgate / git, and the \
         ratio.\n",
        doc["churn_files"],
        doc["loadavg_before"].as_str().unwrap_or("?"),
        doc["loadavg_after"].as_str().unwrap_or("?"),
    );
    let mut table = Table::new(&[
        "tree / scenario",
        "freeze / git commit",
        "warm / git checkout",
        "cold / git worktree add",
        "uploaded / changed",
        "files hashed / warm files written, re-hashed",
    ]);
    for r in doc["rows"].as_array().cloned().unwrap_or_default() {
        let pair = |a: &str, b: &str, x: &str| {
            format!(
                "{} / {} ms = {}x",
                fmt_num(num(&r[a]), 1),
                fmt_num(num(&r[b]), 1),
                fmt_num(num(&r[x]), 2)
            )
        };
        table.row(vec![
            format!(
                "{} ({} files): {}",
                r["tree"].as_str().unwrap_or("?"),
                r["files"],
                r["scenario"].as_str().unwrap_or("?")
            ),
            pair("freeze_ms", "git_commit_ms", "freeze_vs_commit"),
            pair("warm_ms", "git_checkout_ms", "warm_vs_checkout"),
            pair("cold_ms", "git_worktree_add_ms", "cold_vs_worktree_add"),
            format!(
                "{} / {} = {}x",
                loopgate_bench::human_bytes(num(&r["bytes_uploaded"]) as u64),
                loopgate_bench::human_bytes(num(&r["bytes_changed"]) as u64),
                fmt_num(num(&r["uploaded_vs_changed"]), 2)
            ),
            format!(
                "{} / {}, {}",
                r["files_hashed"], r["warm_files_written"], r["warm_files_rehashed"]
            ),
        ]);
    }
    out.push_str(&table.render());
    out.push('\n');
    out.push_str(&workspace_overlay(doc));
    out
}

/// The overlay rows of workspace-bench (where it could mount): the same changes on an overlay
/// episode, its freeze from the upper layer and its warm materialize (a mount over the base's
/// held tree brought to the change) against the same `git commit` and `git checkout`.
fn workspace_overlay(doc: &Value) -> String {
    let rows: Vec<Value> = doc["rows"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r["overlay"]["freeze_ms"].is_number())
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "Overlay episodes, the same changes in the same run: the base mounted over the worker's \
         held tree of it, frozen from the upper layer; the warm materialize brings the base's \
         tree to the change by the manifest difference and mounts it.\n\n",
    );
    let mut table = Table::new(&[
        "tree / scenario",
        "overlay freeze / git commit",
        "overlay warm / git checkout",
        "files hashed / warm files written",
    ]);
    for r in rows {
        let o = &r["overlay"];
        let pair = |a: &Value, b: &Value| {
            let (a, b) = (num(a), num(b));
            format!(
                "{} / {} ms = {}x",
                fmt_num(a, 1),
                fmt_num(b, 1),
                fmt_num(a / b.max(1e-9), 2)
            )
        };
        table.row(vec![
            format!(
                "{} ({} files): {}",
                r["tree"].as_str().unwrap_or("?"),
                r["files"],
                r["scenario"].as_str().unwrap_or("?")
            ),
            pair(&o["freeze_ms"], &r["git_commit_ms"]),
            pair(&o["warm_ms"], &r["git_checkout_ms"]),
            format!("{} / {}", o["files_hashed"], o["warm_files_written"]),
        ]);
    }
    out.push_str(&table.render());
    out.push('\n');
    out
}

/// `m / e / a / n / r (machine)` in ms, or `-` for a file written before CPU was counted.
fn cpu_per_round(cpu: &Value) -> String {
    if cpu.is_null() {
        return "-".to_string();
    }
    let ms = |key: &str| fmt_num(num(&cpu[key]), 2);
    format!(
        "{} / {} / {} / {} / {} ({})",
        ms("manager"),
        ms("executors"),
        ms("auditor"),
        ms("nats_server"),
        ms("redis_server"),
        ms("machine")
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn workspace_rows_show_both_sides_and_the_ratio() {
        let doc = json!({"churn_files": 2000, "loadavg_before": "1.8", "loadavg_after": "2.3",
            "rows": [{"tree": "registry", "files": 14412, "scenario": "1-file change",
                "freeze_ms": 95.6, "git_commit_ms": 105.2, "freeze_vs_commit": 0.91,
                "warm_ms": 77.2, "git_checkout_ms": 39.2, "warm_vs_checkout": 1.97,
                "cold_ms": 1983.0, "git_worktree_add_ms": 1559.0, "cold_vs_worktree_add": 1.27,
                "bytes_uploaded": 95_642, "bytes_changed": 8_602, "uploaded_vs_changed": 11.12,
                "files_hashed": 1, "warm_files_written": 1, "warm_files_rehashed": 0}]});
        let text = workspace(&doc);
        assert!(
            text.contains("registry (14412 files): 1-file change"),
            "{text}"
        );
        assert!(text.contains("95.6 / 105.2 ms = 0.91x"), "{text}");
        assert!(text.contains("77.2 / 39.2 ms = 1.97x"), "{text}");
        assert!(text.contains("1983.0 / 1559.0 ms = 1.27x"), "{text}");
        assert!(text.contains("= 11.12x"), "{text}");
        assert!(
            text.contains("load average 1.8 before, 2.3 after"),
            "{text}"
        );
        assert!(!text.contains("Overlay episodes"), "{text}");
        let mut with_overlay = doc.clone();
        with_overlay["rows"][0]["overlay"] = json!({"freeze_ms": 10.52, "files_hashed": 1,
            "warm_ms": 7.84, "warm_files_written": 1});
        let text = workspace(&with_overlay);
        assert!(text.contains("10.5 / 105.2 ms = 0.10x"), "{text}");
        assert!(text.contains("7.8 / 39.2 ms = 0.20x"), "{text}");
    }
}
