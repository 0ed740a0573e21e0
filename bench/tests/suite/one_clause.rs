//! The calibration's one-clause tasks (`examples/long/lib/one_clause.py`): every clause of
//! `textkit-lib` and of `ledger-cli` built from the real task files, each staged workspace
//! passing the earlier clauses' public checks and failing its own (the script checks both
//! before it writes a task), the clauses it cannot stage reported with why, and every task it
//! writes loading as a long task whose hidden script prints its own clause's line only.

use std::path::Path;
use std::process::Command;

use anyhow::Context;
use loopgate_bench::long::{load_long_suite, long_suite_dir};

fn build(out: &Path, tasks: &[&str]) -> anyhow::Result<Vec<String>> {
    let script = long_suite_dir().join("lib").join("one_clause.py");
    let done = Command::new("python3")
        .arg(&script)
        .arg(out)
        .args(["--clauses", "all"])
        .args(tasks)
        .output()
        .context("running python3 one_clause.py")?;
    anyhow::ensure!(
        done.status.success(),
        "one_clause.py failed: {}",
        String::from_utf8_lossy(&done.stderr)
    );
    Ok(String::from_utf8(done.stdout)?
        .lines()
        .map(str::to_string)
        .collect())
}

#[test]
fn every_stageable_clause_becomes_a_one_clause_task_that_fails_only_its_own_check(
) -> anyhow::Result<()> {
    let out = tempfile::tempdir()?;
    let lines = build(out.path(), &["textkit-lib", "ledger-cli"])?;
    let built = |task: &str, k: usize| format!("{task} clause {k} ");
    for k in 1..=10 {
        let line = lines
            .iter()
            .find(|l| l.starts_with(&built("textkit-lib", k)))
            .with_context(|| format!("no line for textkit-lib clause {k}: {lines:?}"))?;
        assert!(line.contains(": built textkit-lib-c"), "{line}");
    }
    let ledger = |k: usize| {
        lines
            .iter()
            .find(|l| l.starts_with(&built("ledger-cli", k)))
            .cloned()
            .unwrap_or_default()
    };
    // Clause 2 (amounts as ints) is staged on clause 1's `load` as that clause leaves it
    // (the rows as read), not on the reference's, which already makes them ints.
    assert!(
        ledger(2)
            .contains("built ledger-cli-c2 (staged from reference: ledger.py: load (partial))"),
        "{}",
        ledger(2)
    );
    // Clause 4's reference `cmd_total` already takes a category: clause 5 cannot be staged.
    assert!(
        ledger(5).contains("not stageable (staged workspace already passes it)"),
        "{}",
        ledger(5)
    );
    for k in 10..=13 {
        assert!(
            ledger(k).contains("not stageable (its clauses are not functions)"),
            "{}",
            ledger(k)
        );
    }
    let names: Vec<String> = (1..=10).map(|k| format!("textkit-lib-c{k}")).collect();
    let tasks = load_long_suite(out.path(), &names)?;
    for (k, task) in tasks.iter().enumerate() {
        assert_eq!(task.file.acceptance.len(), 1, "{}", task.name);
        assert_eq!(task.criterion_ids().len(), 1);
        if k == 0 {
            continue;
        }
        // The staged workspace holds the earlier clauses' functions from the reference.
        let source = task
            .workspace
            .iter()
            .find(|f| f.path == "textkit.py")
            .context("no textkit.py")?;
        assert!(String::from_utf8_lossy(&source.bytes).contains("def strip_accents("));
    }
    // The hidden wrapper keeps only its clause's line (here failing: the starting workspace).
    let c3 = out.path().join("textkit-lib-c3");
    let hidden = Command::new("sh")
        .arg(c3.join("hidden").join("check.sh"))
        .current_dir(c3.join("workspace"))
        .output()?;
    assert_eq!(String::from_utf8_lossy(&hidden.stdout), "FAIL words\n");
    assert!(!hidden.status.success());
    Ok(())
}
