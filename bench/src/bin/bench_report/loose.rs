//! The loose-checks section (issue 14): `loose-<size>.json` from `loose-bench`, per arm the
//! false completions (completed, hidden strict check fails), solves (hidden check passes) and
//! how often a clause judgment caught the gap; then every run.

use std::fmt::Write as _;

use loopgate_bench::Table;
use serde_json::Value;

pub fn section(doc: &Value) -> String {
    let mut out = String::new();
    let size = doc["model"]["size"].as_str().unwrap_or("?");
    let _ = writeln!(
        out,
        "### Model {size} (`{}`), token budget {}, wall cap {} s per run\n",
        doc["model"]["file"].as_str().unwrap_or("?"),
        doc["token_budget"],
        doc["wall_secs"]
    );
    let _ = writeln!(
        out,
        "Started {}, finished {}.\n",
        doc["started_at"].as_str().unwrap_or("?"),
        doc["finished_at"]
            .as_str()
            .unwrap_or("not finished (cut short)")
    );
    let mut table = Table::new(&[
        "arm",
        "runs",
        "completed",
        "false completions",
        "solved (hidden check)",
        "a judgment caught the gap",
        "tokens",
    ]);
    if let Some(summary) = doc["summary"].as_object() {
        for (arm, s) in summary {
            table.row(vec![
                format!("`{arm}`"),
                s["runs"].to_string(),
                s["completed"].to_string(),
                s["false_completions"].to_string(),
                s["solved"].to_string(),
                s["caught_gap"].to_string(),
                s["tokens"].to_string(),
            ]);
        }
    }
    out.push_str(&table.render());
    let mut runs = Table::new(&[
        "task", "arm", "state", "public", "hidden", "criteria", "caught", "rounds", "tokens",
        "wall s", "note",
    ]);
    let yes = |v: &Value| {
        if v == &Value::Bool(true) {
            "pass"
        } else {
            "fail"
        }
    };
    for r in doc["results"].as_array().cloned().unwrap_or_default() {
        runs.row(vec![
            r["task"].as_str().unwrap_or("?").to_string(),
            r["arm"].as_str().unwrap_or("?").to_string(),
            r["terminal_state"].as_str().unwrap_or("?").to_string(),
            yes(&r["public_passes"]).to_string(),
            yes(&r["hidden_passes"]).to_string(),
            r["criteria"].to_string(),
            r["caught"].to_string(),
            r["rounds"].to_string(),
            r["tokens"].to_string(),
            r["wall_s"].to_string(),
            r["note"]
                .as_str()
                .unwrap_or("")
                .chars()
                .take(160)
                .collect::<String>()
                .replace('|', "/"),
        ]);
    }
    out.push('\n');
    out.push_str(&runs.render());
    if let Some(notes) = doc["notes"].as_array() {
        out.push('\n');
        for n in notes {
            let _ = writeln!(out, "- {}", n.as_str().unwrap_or(""));
        }
    }
    out.push('\n');
    out
}
