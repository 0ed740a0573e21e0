//! A scored rubric through the whole stack: the auditor's judge (a stand-in speaking the OpenAI
//! wire format) says PIVOT with a perfect score, the run rolls back to its starting snapshot
//! and the manager hears why; the next approach scores above the threshold and the gate, which
//! requires the rubric's evidence, lets the run complete.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use loopgate_test_support::{Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions};
use serde_json::{json, Value};

const TASK: &str = r#"
goal = "Write NOTES.md explaining the project to a newcomer"
rubric_threshold = 8
[[acceptance]]
id = "notes-exist"
description = "NOTES.md is not empty"
check = "test -s NOTES.md"
[[rubric]]
name = "clarity"
description = "a newcomer understands the project"
[roles]
manager = "mgr"
executor = "exec"
auditor = "judge"
[budget]
max_rounds = 4
max_failed_rounds = 4
"#;

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

fn tool_results(req: &Value) -> usize {
    req["messages"]
        .as_array()
        .map(|m| m.iter().filter(|m| m["role"] == "tool").count())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pivot_rolls_back_then_a_passing_rubric_completes_the_run() -> anyhow::Result<()> {
    let drafts = Arc::new(AtomicUsize::new(0));
    let scored = Arc::new(AtomicUsize::new(0));
    let executor = {
        let drafts = drafts.clone();
        Reply::dynamic(move |req: &Value| {
            if tool_results(req) > 0 {
                return Reply::tool_call("finish", json!({"summary": "wrote NOTES.md"}));
            }
            let n = drafts.fetch_add(1, Ordering::SeqCst) + 1;
            Reply::tool_call(
                "write_file",
                json!({"path": "NOTES.md", "content": format!("draft {n}\nWhat this project does, and how to run it.\n")}),
            )
        })
    };
    let judge = {
        let scored = scored.clone();
        Reply::dynamic(move |req: &Value| {
            // The goal's clause, judged on its own (issue 14).
            if user_text(req).contains("## Requirement (quoted from the goal)") {
                return Reply::content(
                    "met - `What this project does, and how to run it.` explains the project",
                );
            }
            if !user_text(req).contains("## Rubric") {
                return Reply::content(
                    "Status: complete\nIntegrity: clean\nContract audit: aligned\n\
                     Acceptance-constraint backcheck:\nnotes-exist: met - the file exists",
                );
            }
            let body = match scored.fetch_add(1, Ordering::SeqCst) {
                0 => json!({"scores": {"clarity": 10}, "strategy": "PIVOT",
                            "reason": "written for the wrong audience; start over"}),
                _ => json!({"scores": {"clarity": 9}, "strategy": "FINISH", "reason": "clear"}),
            };
            Reply::content(format!("```json\n{body}\n```"))
        })
    };
    let model = StandInModel::start(
        Script::new()
            .fallback(
                "standin-manager",
                Reply::content("Current task state: notes needed\nNext: cli\nTask: write NOTES.md for a newcomer"),
            )
            .fallback("standin-executor", executor)
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
    let run = stack.submit(TASK, &[]).await?;
    let id = run["id"].as_str().unwrap().to_string();
    let done = stack.wait_terminal(&id, Duration::from_secs(120)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    assert_eq!(done["round"], 2);

    // Round 1 passed its check but the judge said PIVOT: rolled back to the base.
    let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
    let entries = log["entries"].as_array().unwrap();
    let pivot = entries
        .iter()
        .find(|e| e["type"] == "pivot")
        .expect("a pivot entry");
    assert_eq!(pivot["to"], done["base_snapshot"]);
    let rounds = stack.get(&format!("/v1/runs/{id}/rounds")).await?;
    let rounds = rounds["rounds"].as_array().unwrap();
    assert_eq!(rounds[1]["base_snapshot"], done["base_snapshot"]);
    // The manager was told why.
    let manager_prompts: Vec<String> = model
        .requests("standin-manager")
        .iter()
        .map(user_text)
        .collect();
    assert!(manager_prompts.last().unwrap().contains("PIVOT"));

    // The rubric's pass is evidence on the final snapshot, next to the check's.
    let evidence = done["evidence"].as_array().unwrap();
    let rubric = evidence
        .iter()
        .find(|e| e["check_id"] == "rubric")
        .expect("rubric evidence");
    assert_eq!(rubric["verdict"], "pass");
    assert_eq!(rubric["artifact_version"], done["snapshot"]);
    assert_eq!(done["rubric"]["average"], 9.0);
    let progress = done["progress"].as_str().unwrap();
    assert!(
        progress.starts_with("acceptance 1/1 passing on snapshot")
            && progress.ends_with("rubric 9.0/8"),
        "{progress}"
    );
    let out = tempfile::tempdir()?;
    stack
        .checkout(done["snapshot"].as_str().unwrap(), out.path())
        .await?;
    assert_eq!(
        std::fs::read_to_string(out.path().join("NOTES.md"))?,
        "draft 2\nWhat this project does, and how to run it.\n"
    );
    Ok(())
}
