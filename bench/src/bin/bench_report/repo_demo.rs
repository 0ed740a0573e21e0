//! The repository-flow section from `repo-demo.json` (scripts/repo-demo.sh): a real project
//! (more-itertools from PyPI's sources) in a fresh git repository, run with the local model
//! through `submit --repo`, `apply`, and the package's own tests on the branch apply wrote.

use loopgate_bench::Table;
use serde_json::Value;

fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub fn section(doc: &Value) -> String {
    let mut table = Table::new(&[
        "model",
        "end state",
        "rounds",
        "tokens",
        "wall (s)",
        "branch written by apply",
        "package tests + new check on the branch",
    ]);
    table.row(vec![
        cell(&doc["model"]),
        cell(&doc["state"]),
        cell(&doc["rounds"]),
        cell(&doc["total_tokens"]),
        cell(&doc["wall_s"]),
        cell(&doc["branch"]),
        cell(&doc["branch_tests"]),
    ]);
    let mut out = table.render();
    if let Some(reason) = doc["terminal_reason"].as_str().filter(|r| !r.is_empty()) {
        out.push_str(&format!("\nEnd reason: {reason}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_completed_run_and_one_that_stopped_short() {
        let done = json!({"model": "1.5b", "state": "completed", "rounds": 2, "total_tokens": 9000,
            "wall_s": 300, "branch": "loopgate/01a247bf", "branch_tests": "pass"});
        let text = section(&done);
        assert!(
            text.contains("| 1.5b ") && text.contains("loopgate/01a247bf") && text.contains("pass"),
            "{text}"
        );
        assert!(!text.contains("End reason"), "{text}");
        let short = json!({"model": "1.5b", "state": "failed", "terminal_reason": "round budget spent",
            "branch": null, "branch_tests": "not_run"});
        let text = section(&short);
        assert!(
            text.contains("| failed ") && text.contains("not_run"),
            "{text}"
        );
        assert!(text.contains("End reason: round budget spent"), "{text}");
    }
}
