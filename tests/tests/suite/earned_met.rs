//! A judge's `met` is earned, end to end on the real stack, on the issue's task: a one-sentence
//! goal asking for a CSV file with a header and its rows sorted by a column, whose public check
//! only counts the rows. The sentence is split at its requirements (goal-1a..goal-1d), the
//! header and the order get value checks, and the rest is judged: a judge that answers `met`
//! without quoting what it was shown counts as `unknown`, so the run never completes, on the
//! unsorted file or on the sorted one; a judge that quotes the file completes it on the sorted
//! file. `judge_quotes = false` takes a bare `met` again.

use std::time::Duration;

use loopgate_test_support::{wait_until, Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(120);

const TASK: &str = r#"
goal = "Write people.csv from people.txt with a header name,age and one row per person, sorted by age."
EXTRA
[[acceptance]]
id = "rows"
description = "a header and three rows"
check = "test \"$(wc -l < people.csv)\" -eq 4"
[roles]
manager = "mgr"
executor = "exec"
auditor = "judge"
[budget]
max_rounds = 2
max_failed_rounds = 2
self_checks = 0
step_retries = 0
"#;

const PEOPLE: &str = "ada 19\nbob 7\ncyd 42\n";
const UNSORTED: &str = "name,age\nada,19\nbob,7\ncyd,42\n";
const SORTED: &str = "name,age\nbob,7\nada,19\ncyd,42\n";

const CLAUSE_QUESTION: &str = "## Requirement (quoted from the goal)";
const UNQUOTED: &str = "met without a quote found in the evidence";

fn user_text(req: &Value) -> String {
    req["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "user")
                .filter_map(|m| m["content"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// A judge that answers every clause question with `clause` and is complacent overall.
fn judge(clause: &'static str) -> Reply {
    Reply::dynamic(move |req: &Value| {
        if user_text(req).contains(CLAUSE_QUESTION) {
            Reply::content(clause)
        } else {
            Reply::content("Status: complete\nIntegrity: clean\nContract audit: aligned")
        }
    })
}

fn write(content: &str) -> Reply {
    Reply::tool_call(
        "write_file",
        json!({"path": "people.csv", "content": content}),
    )
}

fn finish() -> Reply {
    Reply::tool_call("finish", json!({"summary": "done"}))
}

/// Run the task (with `extra` task keys) with these executor replies and this judge; the
/// stack, the run's id and its terminal view.
async fn run(
    extra: &str,
    executor: Vec<Reply>,
    judge: Reply,
) -> anyhow::Result<(StandInModel, Stack, String, Value)> {
    let model = StandInModel::start(
        Script::new()
            .fallback(
                "standin-manager",
                Reply::content("Current task state: no csv\nNext: cli\nTask: write people.csv"),
            )
            .replies("standin-executor", executor)
            .fallback("standin-judge", judge),
    )
    .await?;
    let stack = Stack::start(StackOptions::new(
        vec![
            Profile::new("mgr", &model.base_url(), "standin-manager"),
            Profile::new("exec", &model.base_url(), "standin-executor"),
            Profile::new("judge", &model.base_url(), "standin-judge"),
        ],
        1,
    ))
    .await?;
    let task = TASK.replace("EXTRA", extra);
    let submitted = stack.submit(&task, &[("people.txt", PEOPLE)]).await?;
    let id = submitted["id"].as_str().unwrap_or_default().to_string();
    // A run whose gate stays closed asks a person after its failed rounds: it stops there.
    let stopped = |v: &Value| {
        let state = v["state"].as_str().unwrap_or_default();
        !matches!(state, "queued" | "running" | "paused" | "")
    };
    let waited = wait_until(WAIT, || async {
        stack.run(&id).await.is_ok_and(|v| stopped(&v))
    })
    .await;
    let done = stack.run(&id).await?;
    anyhow::ensure!(
        waited.is_ok(),
        "run {id} still {}\n{}",
        done["state"],
        stack.logs()
    );
    Ok((model, stack, id, done))
}

/// Every gap line of every audit report of the run, in order, one list per report.
async fn report_gaps(stack: &Stack, id: &str) -> anyhow::Result<Vec<Vec<String>>> {
    Ok(stack
        .log_entries(id, "audit_report")
        .await?
        .iter()
        .map(|r| {
            r["gaps"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .collect())
}

fn has(gaps: &[String], needle: &str) -> bool {
    gaps.iter().any(|g| g.contains(needle))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_met_without_a_quote_is_unknown_and_the_unsorted_file_does_not_complete(
) -> anyhow::Result<()> {
    let (model, stack, id, done) = run(
        "",
        vec![write(UNSORTED), finish(), write(SORTED), finish()],
        judge("met"),
    )
    .await?;
    assert_eq!(
        done["state"],
        "waiting_for_input",
        "{done}\n{}",
        stack.logs()
    );

    // The sentence is four criteria; the header and the order are checked by value checks.
    let contract = stack.get(&format!("/v1/runs/{id}/contract")).await?;
    let criteria: Vec<(String, bool)> = contract["contract"]["criteria"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["source"] == "goal")
        .map(|c| {
            (
                c["id"].as_str().unwrap_or_default().to_string(),
                c["check"].is_string(),
            )
        })
        .collect();
    let want: Vec<(String, bool)> = [
        ("goal-1a", false),
        ("goal-1b", true),
        ("goal-1c", false),
        ("goal-1d", true),
    ]
    .iter()
    .map(|(id, checked)| (id.to_string(), *checked))
    .collect();
    assert_eq!(criteria, want, "{contract}");

    let reports = report_gaps(&stack, &id).await?;
    assert_eq!(reports.len(), 2, "{reports:#?}");
    // Round 1: the order fails its value check, and each bare `met` is read as unknown.
    let first = &reports[0];
    assert!(has(first, "check 'goal-1d' fails"), "{first:#?}");
    for clause in ["goal-1a", "goal-1c"] {
        let line = format!("goal clause '{clause}' judged unknown: {UNQUOTED}");
        assert!(has(first, &line), "missing {line}: {first:#?}");
    }
    // Round 2: the sorted file passes every check, and still a bare `met` does not pass.
    let second = &reports[1];
    assert!(!has(second, "fails"), "{second:#?}");
    assert!(has(second, UNQUOTED), "{second:#?}");
    let gates = stack.log_entries(&id, "gate").await?;
    assert!(
        gates.iter().all(|g| g["passed"] == false),
        "a gate passed: {gates:#?}"
    );
    let asked = model
        .requests("standin-judge")
        .iter()
        .filter(|r| user_text(r).contains(CLAUSE_QUESTION))
        .count();
    assert!(asked >= 4, "the judge was asked {asked} clause questions");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_judge_that_quotes_the_file_completes_the_sorted_one() -> anyhow::Result<()> {
    let (_model, stack, id, done) = run(
        "",
        vec![write(SORTED), finish()],
        judge("met - `name,age` heads people.csv\nEvidence: bob,7 ada,19 cyd,42"),
    )
    .await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    assert_eq!(done["round"], 1, "{done}");
    let reports = report_gaps(&stack, &id).await?;
    assert!(reports.iter().all(|r| !has(r, UNQUOTED)), "{reports:#?}");
    let evidence = done["evidence"].as_array().cloned().unwrap_or_default();
    for clause in ["goal-1a", "goal-1b", "goal-1c", "goal-1d"] {
        let e = evidence
            .iter()
            .find(|e| e["check_id"] == clause && e["artifact_version"] == done["snapshot"])
            .unwrap_or_else(|| panic!("no evidence for {clause}: {evidence:#?}"));
        assert_eq!(e["verdict"], "pass", "{e}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_judge_quotes_off_a_bare_met_passes_as_before() -> anyhow::Result<()> {
    let (_model, stack, id, done) = run(
        "judge_quotes = false",
        vec![write(SORTED), finish()],
        judge("met"),
    )
    .await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    assert_eq!(done["round"], 1, "{done}");
    let reports = report_gaps(&stack, &id).await?;
    assert!(reports.iter().all(|r| !has(r, UNQUOTED)), "{reports:#?}");
    Ok(())
}
