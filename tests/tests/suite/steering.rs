//! Steering a live run over the real stack: an operator instruction reaches the manager's
//! next prompt (and no executor's), pause holds a run across a manager restart and unpause
//! continues it, and a completed run continues with a new goal as a new generation.

use std::time::Duration;

use loopgate_test_support::{Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions};
use serde_json::{json, Value};

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
# The manager decides every step here, the first one too: steering reaches it.
clause_steps = false
"#;

const NOTE: &str = "OPERATOR-NOTE-7f3: keep hello.py to a single print call";

fn profiles(model: &StandInModel) -> Vec<Profile> {
    vec![
        Profile::new("mgr", &model.base_url(), "standin-manager"),
        Profile::new("exec", &model.base_url(), "standin-executor"),
    ]
}

fn write(path: &str, content: &str) -> [Reply; 2] {
    [
        Reply::tool_call("write_file", json!({"path": path, "content": content})),
        Reply::tool_call("finish", json!({"summary": format!("wrote {path}")})),
    ]
}

fn good_executor() -> [Reply; 2] {
    write("hello.py", "print('hello, loopgate')\n")
}

async fn wait_for(
    stack: &Stack,
    id: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> anyhow::Result<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let v = stack.run(id).await?;
        if done(&v) {
            return Ok(v);
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "run never got {what}: {v}\n{}",
            stack.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn code(answer: &(u16, Value)) -> (u16, Option<&str>) {
    (answer.0, answer.1["error"]["code"].as_str())
}

async fn submit(stack: &Stack) -> anyhow::Result<String> {
    Ok(stack.submit(TASK, &[]).await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instruction_reaches_the_managers_next_prompt_and_no_executor() -> anyhow::Result<()> {
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
    let id = submit(&stack).await?;
    wait_for(&stack, &id, "waiting_for_input", |v| {
        v["state"] == "waiting_for_input"
    })
    .await?;
    let instructions = format!("/v1/runs/{id}/instructions");
    // Bad instructions are refused by kind before anything changes.
    let too_long = "x".repeat(4001);
    for body in [
        json!({"text": "  "}),
        json!({"text": too_long}),
        json!({"text": "a", "extra": 1}),
        json!({}),
    ] {
        let answer = stack.post_raw(&instructions, &body).await?;
        assert_eq!(answer.0, 400, "{body}: {}", answer.1);
        let want = if body.get("text").is_some_and(|t| t.as_str() != Some("a")) {
            "invalid_instruction"
        } else {
            "invalid_request"
        };
        assert_eq!(code(&answer), (400, Some(want)), "{body}");
    }
    let unknown = stack
        .post_raw(
            "/v1/runs/00000000-0000-7000-8000-000000000000/instructions",
            &json!({"text": "x"}),
        )
        .await?;
    assert_eq!(code(&unknown), (404, Some("not_found")));
    let (status, view) = stack
        .post_raw(&instructions, &json!({"text": NOTE}))
        .await?;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["state"], "waiting_for_input", "nothing is interrupted");
    assert_eq!(view["instructions"][0]["text"], NOTE);
    let (status, v) = stack
        .post_raw(
            &format!("/v1/runs/{id}/answer"),
            &json!({"text": "yes, print adds it"}),
        )
        .await?;
    assert_eq!(status, 200, "{v}");
    let done = stack.wait_terminal(&id, Duration::from_secs(60)).await?;
    assert_eq!(done["state"], "completed", "{done}");
    let prompts = model.requests("standin-manager");
    assert_eq!(prompts.len(), 2);
    assert!(!prompts[0].to_string().contains(NOTE));
    let next = prompts[1].to_string();
    assert!(next.contains(NOTE), "{next}");
    assert!(next.contains("# Operator instructions"), "{next}");
    let executor = model.requests("standin-executor");
    assert!(!executor.is_empty());
    for request in executor {
        assert!(
            !request.to_string().contains("OPERATOR-NOTE-7f3"),
            "{request}"
        );
    }
    let logged = stack.log_entries(&id, "instructed").await?;
    assert_eq!(logged.len(), 1);
    assert_eq!(logged[0]["text"], NOTE);
    // An ended run takes no instructions.
    let late = stack
        .post_raw(&instructions, &json!({"text": "more"}))
        .await?;
    assert_eq!(code(&late), (409, Some("not_instructable")));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_holds_the_run_across_a_restart_and_unpause_continues_it() -> anyhow::Result<()> {
    let model = StandInModel::start(
        Script::new()
            .replies(
                "standin-manager",
                // Slow enough that the pause lands while this decision is in flight.
                [Reply::delayed(
                    Duration::from_secs(2),
                    Reply::content("Next: cli\nTask: write hello.py"),
                )],
            )
            .replies("standin-executor", good_executor()),
    )
    .await?;
    let mut stack = Stack::start(StackOptions::new(profiles(&model), 1)).await?;
    let id = submit(&stack).await?;
    model
        .wait_for_requests("standin-manager", 1, Duration::from_secs(30))
        .await?;
    let (status, view) = stack
        .post_raw(&format!("/v1/runs/{id}/pause"), &json!({}))
        .await?;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["state"], "paused");
    assert_eq!(view["phase"], "deciding", "the decision in flight finishes");
    assert!(view["paused_at"].is_i64(), "{view}");
    let again = stack
        .post_raw(&format!("/v1/runs/{id}/pause"), &json!({}))
        .await?;
    assert_eq!(code(&again), (409, Some("not_pausable")));
    // The decision is recorded; the round it chose is held, not dispatched.
    let held = wait_for(&stack, &id, "its next step held", |v| {
        v["phase"] == "paused"
    })
    .await?;
    assert_eq!(held["state"], "paused");
    assert_eq!(held["round"], 0);
    // The pause is in Redis: a restarted manager keeps holding the run.
    stack.kill_manager(0);
    stack.spawn_manager().await?;
    let after = stack.run(&id).await?;
    assert_eq!(
        (after["state"].as_str(), after["phase"].as_str()),
        (Some("paused"), Some("paused"))
    );
    let types = stack.log_types(&id).await?;
    let paused_at = types.iter().position(|t| t == "paused").unwrap();
    assert!(
        types[paused_at..].contains(&"decision".to_string()),
        "{types:?}"
    );
    assert!(
        types[paused_at..].contains(&"held".to_string()),
        "{types:?}"
    );
    assert!(!types.contains(&"exec_dispatched".to_string()), "{types:?}");
    assert_eq!(model.request_count("standin-executor"), 0);
    assert_eq!(model.request_count("standin-manager"), 1);
    let (status, view) = stack
        .post_raw(&format!("/v1/runs/{id}/unpause"), &json!({}))
        .await?;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["state"], "running");
    assert_eq!(view["phase"], "executing", "the held round is dispatched");
    let done = stack.wait_terminal(&id, Duration::from_secs(60)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    assert_eq!(done["round"], 1);
    assert!(stack
        .log_types(&id)
        .await?
        .contains(&"unpaused".to_string()));
    for (route, want) in [("pause", "not_pausable"), ("unpause", "not_paused")] {
        let answer = stack
            .post_raw(&format!("/v1/runs/{id}/{route}"), &json!({}))
            .await?;
        assert_eq!(code(&answer), (409, Some(want)), "{route}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_run_continues_with_a_new_goal_as_a_new_generation() -> anyhow::Result<()> {
    let model = StandInModel::start(
        Script::new()
            .replies(
                "standin-manager",
                [
                    Reply::content("Next: cli\nTask: write hello.py"),
                    Reply::content("Next: cli\nTask: write bye.py"),
                ],
            )
            .replies("standin-executor", good_executor()),
    )
    .await?;
    let stack = Stack::start(StackOptions::new(profiles(&model), 1)).await?;
    let id = submit(&stack).await?;
    let first = stack.wait_terminal(&id, Duration::from_secs(60)).await?;
    assert_eq!(first["state"], "completed", "{first}");
    let first_snapshot = first["snapshot"].as_str().unwrap_or_default().to_string();
    let continue_path = format!("/v1/runs/{id}/continue");
    let empty = stack.post_raw(&continue_path, &json!({})).await?;
    assert_eq!(code(&empty), (400, Some("invalid_request")));
    let blank = stack
        .post_raw(&continue_path, &json!({"goal": " "}))
        .await?;
    assert_eq!(code(&blank), (400, Some("invalid_task")));
    for r in write("bye.py", "print('bye')\n") {
        model.push("standin-executor", r);
    }
    let body = json!({
        "goal": "Create bye.py that prints exactly: bye",
        "task": {
            "goal": "replaced by the goal above",
            "acceptance": [{"id": "prints-bye", "check": "test \"$(python3 bye.py)\" = 'bye'"}],
            "roles": {"manager": "mgr", "executor": "exec"},
            "budget": {"max_rounds": 3}
        }
    });
    let (status, view) = stack.post_raw(&continue_path, &body).await?;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["generation"], 2);
    assert_eq!(view["state"], "running");
    assert_eq!(view["goal"], "Create bye.py that prints exactly: bye");
    assert_eq!(view["base_snapshot"], first_snapshot.as_str());
    assert_ne!(view["spec_hash"], first["spec_hash"]);
    let done = stack.wait_terminal(&id, Duration::from_secs(60)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    assert_eq!(done["generation"], 2);
    // The same lineage: the new generation built on the completed snapshot.
    let manifest = stack
        .get(&format!(
            "/v1/snapshots/{}",
            done["snapshot"].as_str().unwrap_or("")
        ))
        .await?
        .to_string();
    assert!(
        manifest.contains("hello.py") && manifest.contains("bye.py"),
        "{manifest}"
    );
    // The earlier rounds stay in the history.
    let rounds = stack.get(&format!("/v1/runs/{id}/rounds")).await?;
    let rounds = rounds["rounds"].as_array().cloned().unwrap_or_default();
    let generations: Vec<_> = rounds.iter().map(|r| r["generation"].clone()).collect();
    assert_eq!(generations, vec![json!(1), json!(2)], "{rounds:?}");
    assert_eq!(rounds[1]["base_snapshot"], first_snapshot.as_str());
    assert_eq!(stack.log_entries(&id, "continued").await?.len(), 1);
    let evidence = stack
        .get(&format!("/v1/runs/{id}/evidence"))
        .await?
        .to_string();
    assert!(
        evidence.contains("prints-greeting") && evidence.contains("prints-bye"),
        "{evidence}"
    );
    // Only a completed run continues.
    let other = submit(&stack).await?;
    let cancel = stack
        .post_raw(&format!("/v1/runs/{other}/cancel"), &json!({}))
        .await?;
    assert_eq!(cancel.0, 200, "{}", cancel.1);
    let refused = stack
        .post_raw(
            &format!("/v1/runs/{other}/continue"),
            &json!({"goal": "anything"}),
        )
        .await?;
    assert_eq!(code(&refused), (409, Some("not_continuable")));
    Ok(())
}
