//! The manager's routes and exits over the real stack: ask/answer, gui with no gui worker,
//! cancel of an in-flight episode, resume as a new generation, bearer tokens, OpenAPI.

use std::time::Duration;

use loopgate_test_support::{Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions};
use serde_json::json;

const TASK: &str = r#"
goal = "Create hello.py that prints exactly: hello, loopgate"
[[acceptance]]
id = "prints-greeting"
check = "test \"$(python3 hello.py)\" = 'hello, loopgate'"
[roles]
manager = "mgr"
executor = "exec"
[budget]
max_rounds = 5
start_secs = 2
"#;

/// [`TASK`] with the manager's reply as the first step (not the goal's one clause).
fn manager_first() -> String {
    TASK.replace("[budget]\n", "[budget]\nclause_steps = false\n")
}

fn profiles(model: &StandInModel) -> Vec<Profile> {
    vec![
        Profile::new("mgr", &model.base_url(), "standin-manager"),
        Profile::new("exec", &model.base_url(), "standin-executor"),
    ]
}

fn good_executor() -> [Reply; 2] {
    [
        Reply::tool_call(
            "write_file",
            json!({"path": "hello.py", "content": "print('hello, loopgate')\n"}),
        ),
        Reply::tool_call("finish", json!({"summary": "done"})),
    ]
}

async fn wait_state(stack: &Stack, id: &str, state: &str) -> anyhow::Result<serde_json::Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let v = stack.run(id).await?;
        if v["state"] == state {
            return Ok(v);
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "run never reached {state}: {v}\n{}",
            stack.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_waits_for_a_human_and_the_answer_reaches_the_manager() -> anyhow::Result<()> {
    let model = StandInModel::start(
        Script::new()
            .replies(
                "standin-manager",
                [
                    Reply::content("Next: ask\nTask: Should the greeting end with a newline?"),
                    Reply::content("Next: cli\nTask: write hello.py"),
                ],
            )
            .replies("standin-executor", good_executor()),
    )
    .await?;
    let stack = Stack::start(StackOptions::new(profiles(&model), 1)).await?;
    let id = stack.submit(&manager_first(), &[]).await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let waiting = wait_state(&stack, &id, "waiting_for_input").await?;
    assert_eq!(
        waiting["question"],
        "Should the greeting end with a newline?"
    );
    let (status, v) = stack
        .post_raw(
            &format!("/v1/runs/{id}/answer"),
            &json!({"text": "yes, print adds it"}),
        )
        .await?;
    assert_eq!(status, 200, "{v}");
    let done = stack.wait_terminal(&id, Duration::from_secs(60)).await?;
    assert_eq!(done["state"], "completed");
    let prompts = model.requests("standin-manager");
    assert!(prompts[1].to_string().contains("yes, print adds it"));
    // Answering a run that is not waiting is a clear conflict.
    let (status, v) = stack
        .post_raw(&format!("/v1/runs/{id}/answer"), &json!({"text": "late"}))
        .await?;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (409, Some("not_waiting_for_input"))
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gui_step_with_no_gui_worker_is_replanned_not_hung() -> anyhow::Result<()> {
    let model = StandInModel::start(
        Script::new()
            .replies(
                "standin-manager",
                [
                    Reply::content("Next: gui\nTask: open the editor and type the program"),
                    Reply::content("Next: cli\nTask: write hello.py"),
                ],
            )
            .replies("standin-executor", good_executor()),
    )
    .await?;
    let stack = Stack::start(StackOptions::new(profiles(&model), 1)).await?;
    let id = stack.submit(&manager_first(), &[]).await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let done = stack.wait_terminal(&id, Duration::from_secs(60)).await?;
    assert_eq!(done["state"], "completed", "{done}");
    // No live worker announces `gui`, so the route is not offered: the reply is refused at once
    // (nothing is dispatched to a queue nobody serves) and the manager is asked again.
    let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
    let refused = log["entries"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .find(|e| e["type"] == "invalid_output")
        .cloned()
        .unwrap_or_default();
    assert!(
        refused["error"].as_str().unwrap_or("").contains("`gui`"),
        "{log}"
    );
    let second = model.requests("standin-manager")[1].to_string();
    assert!(!second.contains("cli|gui|done"), "gui offered: {second}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_the_run_and_resume_starts_a_new_generation() -> anyhow::Result<()> {
    let model = StandInModel::start(
        Script::new()
            .fallback(
                "standin-manager",
                Reply::content("Next: cli\nTask: write hello.py"),
            )
            .replies(
                "standin-executor",
                [
                    // generation 1: a slow episode, cancelled while it runs
                    Reply::tool_call("shell", json!({"command": "sleep 30"})),
                    Reply::tool_call("finish", json!({"summary": "too late"})),
                ],
            ),
    )
    .await?;
    let stack = Stack::start(StackOptions::new(profiles(&model), 1)).await?;
    let id = stack.submit(TASK, &[]).await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // wait until the executor is inside the slow shell call
    model
        .wait_for_requests("standin-executor", 1, Duration::from_secs(30))
        .await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, v) = stack
        .post_raw(&format!("/v1/runs/{id}/cancel"), &json!({}))
        .await?;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["state"], "cancelled");
    // cancelling again is a conflict, not a second transition
    let (status, _) = stack
        .post_raw(&format!("/v1/runs/{id}/cancel"), &json!({}))
        .await?;
    assert_eq!(status, 409);
    // resume with a new budget: generation 2 runs to completion
    for r in good_executor() {
        model.push("standin-executor", r);
    }
    let (status, v) = stack
        .post_raw(
            &format!("/v1/runs/{id}/resume"),
            &json!({"budget": {"max_rounds": 3}}),
        )
        .await?;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["generation"], 2);
    let done = stack.wait_terminal(&id, Duration::from_secs(60)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    assert_eq!(done["generation"], 2);
    let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
    let entries = log["entries"].as_array().cloned().unwrap_or_default();
    // generation 1's episode never produced an accepted result
    assert!(
        !entries
            .iter()
            .any(|e| e["generation"] == 1 && e["type"] == "exec_result"),
        "{log}"
    );
    assert!(entries.iter().any(|e| e["type"] == "resumed"));
    // a completed run cannot be resumed; a bad budget is refused by field
    let (status, v) = stack
        .post_raw(&format!("/v1/runs/{id}/resume"), &json!({}))
        .await?;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (409, Some("not_resumable"))
    );
    let (status, v) = stack
        .post_raw(
            &format!("/v1/runs/{id}/resume"),
            &json!({"budget": {"max_rounds": 0}}),
        )
        .await?;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (400, Some("invalid_budget"))
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_lists_every_route_and_runs_can_be_listed() -> anyhow::Result<()> {
    let model = StandInModel::start(Script::new()).await?;
    let stack = Stack::start(StackOptions::new(profiles(&model), 1)).await?;
    let doc = stack.get("/openapi.json").await?;
    for path in [
        "/v1/runs",
        "/v1/runs/{id}",
        "/v1/runs/{id}/log",
        "/v1/runs/{id}/evidence",
        "/v1/runs/{id}/events",
        "/v1/runs/{id}/answer",
        "/v1/runs/{id}/cancel",
        "/v1/runs/{id}/resume",
        "/v1/runs/{id}/rounds",
    ] {
        assert!(
            doc["paths"][path].is_object(),
            "{path} missing from openapi.json"
        );
    }
    let listed = stack.get("/v1/runs?state=queued&limit=5").await?;
    assert!(listed["runs"].is_array());
    Ok(())
}

/// Acceptance test files are protected by default: an executor that edits the test instead of
/// the code gets its candidate rejected as an integrity violation, and the check output is
/// downloadable by its digest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_the_acceptance_test_is_an_integrity_violation() -> anyhow::Result<()> {
    let model = StandInModel::start(
        Script::new()
            .fallback(
                "standin-manager",
                Reply::content("Next: cli\nTask: make the test pass"),
            )
            .replies(
                "standin-executor",
                [
                    // the shortcut: rewrite the test so it passes (through the shell:
                    // `write_file` refuses a protected path)
                    Reply::tool_call(
                        "shell",
                        json!({"command": "echo 'exit 0' > tests/check.sh"}),
                    ),
                    Reply::tool_call("finish", json!({"summary": "test passes"})),
                    // the honest fix
                    Reply::tool_call(
                        "write_file",
                        json!({"path": "hello.py", "content": "print('hello, loopgate')\n"}),
                    ),
                    Reply::tool_call("finish", json!({"summary": "wrote hello.py"})),
                ],
            ),
    )
    .await?;
    let stack = Stack::start(StackOptions::new(profiles(&model), 1)).await?;
    let task = r#"
goal = "Make tests/check.sh pass"
[[acceptance]]
id = "check"
check = "sh tests/check.sh"
[roles]
manager = "mgr"
executor = "exec"
"#;
    let check = "test \"$(python3 hello.py)\" = 'hello, loopgate'\n";
    let run = stack.submit(task, &[("tests/check.sh", check)]).await?;
    let id = run["id"].as_str().unwrap_or_default().to_string();
    let done = stack.wait_terminal(&id, Duration::from_secs(60)).await?;
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(done["round"], 2, "the shortcut round did not count as done");
    let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
    let entries = log["entries"].as_array().cloned().unwrap_or_default();
    let rejected = entries
        .iter()
        .find(|e| e["type"] == "candidate_rejected")
        .cloned()
        .unwrap_or_default();
    assert!(
        rejected["reason"]
            .as_str()
            .unwrap_or("")
            .contains("tests/check.sh"),
        "{log}"
    );
    // The final snapshot still has the original test, and the evidence's output is retrievable.
    let out = tempfile::tempdir()?;
    stack
        .checkout(done["snapshot"].as_str().unwrap_or_default(), out.path())
        .await?;
    assert_eq!(
        std::fs::read_to_string(out.path().join("tests/check.sh"))?,
        check
    );
    let digest = done["evidence"][0]["log_digest"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!digest.is_empty(), "{done}");
    let blob = reqwest::get(format!("{}/v1/blobs/{digest}", stack.http)).await?;
    assert_eq!(blob.status().as_u16(), 200);
    Ok(())
}

/// Unreferenced blobs are collected; everything a live run references survives (its
/// snapshots, and its episodes' transcripts in the evidence bucket).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_collection_keeps_what_live_runs_reference() -> anyhow::Result<()> {
    use loopgate_snapshot::SnapshotStore;
    use loopgate_transport::{Bus, BusOptions};
    let model = StandInModel::start(
        Script::new()
            .fallback(
                "standin-manager",
                Reply::content("Next: cli\nTask: write hello.py"),
            )
            .replies("standin-executor", good_executor()),
    )
    .await?;
    let mut opts = StackOptions::new(profiles(&model), 1);
    opts.manager_extra = "gc_interval_secs = 1\ngc_grace_secs = 0".into();
    let stack = Stack::start(opts).await?;
    let id = stack.submit(TASK, &[("notes.txt", "keep me\n")]).await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let done = stack.wait_terminal(&id, Duration::from_secs(60)).await?;
    assert_eq!(done["state"], "completed");
    let bus = Bus::connect(&stack.nats.url(), "loopgate", BusOptions::default()).await?;
    let store = SnapshotStore::from_jetstream(bus.jetstream(), bus.request_timeout()).await?;
    let orphan = store.put_bytes(b"nobody references this").await?;
    assert!(store.has_blob(&orphan).await?);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while store.has_blob(&orphan).await? {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "the orphan blob was never collected\n{}",
            stack.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The evidence bucket too: an orphan goes, the run's episode transcript stays.
    let evidence =
        SnapshotStore::evidence_from_jetstream(bus.jetstream(), bus.request_timeout()).await?;
    let orphan = evidence.put_bytes(b"no run names this").await?;
    while evidence.has_blob(&orphan).await? {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "the orphan evidence was never collected\n{}",
            stack.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let transcript = stack
        .get(&format!("/v1/runs/{id}/rounds/1/transcript"))
        .await?;
    assert!(
        transcript["entries"]
            .as_array()
            .is_some_and(|e| !e.is_empty()),
        "{transcript}"
    );
    // The run's snapshots (base and final) are intact after collections.
    let out = tempfile::tempdir()?;
    stack
        .checkout(done["snapshot"].as_str().unwrap_or_default(), out.path())
        .await?;
    assert_eq!(
        std::fs::read_to_string(out.path().join("notes.txt"))?,
        "keep me\n"
    );
    let base = tempfile::tempdir()?;
    stack
        .checkout(
            done["base_snapshot"].as_str().unwrap_or_default(),
            base.path(),
        )
        .await?;
    Ok(())
}

/// A task's ignore patterns keep build output out of every snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_ignore_patterns_keep_build_output_out_of_snapshots() -> anyhow::Result<()> {
    let model = StandInModel::start(
        Script::new()
            .fallback("standin-manager", Reply::content("Next: cli\nTask: build and write hello.py"))
            .replies(
                "standin-executor",
                [
                    Reply::tool_call("shell", json!({"command": "mkdir -p build && head -c 4096 /dev/zero > build/out.bin"})),
                    Reply::tool_call("write_file", json!({"path": "hello.py", "content": "print('hello, loopgate')\n"})),
                    Reply::tool_call("finish", json!({"summary": "done"})),
                ],
            ),
    )
    .await?;
    let stack = Stack::start(StackOptions::new(profiles(&model), 1)).await?;
    let task = format!("ignore = [\"build/\"]\n{TASK}");
    let id = stack.submit(&task, &[]).await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let done = stack.wait_terminal(&id, Duration::from_secs(60)).await?;
    assert_eq!(done["state"], "completed", "{done}");
    let manifest = stack
        .get(&format!(
            "/v1/snapshots/{}",
            done["snapshot"].as_str().unwrap_or_default()
        ))
        .await?;
    let paths: Vec<&str> = manifest["entries"]
        .as_array()
        .map(|es| es.iter().filter_map(|e| e["path"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(paths, vec!["hello.py"], "build/ is ignored");
    Ok(())
}
