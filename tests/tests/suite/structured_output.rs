//! `structured_output = "json_schema"` on the manager's profile, through the whole stack: every
//! decision request carries the reply's JSON schema as `response_format` (routes limited to what
//! the workers serve: no `gui` here), a structured reply that is still malformed is re-asked as
//! any other, a conforming one completes the run, and the executor's requests (same key on its
//! profile, but no schema declared) carry no `response_format`.

use std::time::Duration;

use loopgate_common::next_step::next_step_schema;
use loopgate_test_support::{Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions};
use serde_json::json;

use crate::{finish, manager_first, write_hello};

const MANAGER: &str = "standin-manager";
const EXECUTOR: &str = "standin-executor";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manager_sends_its_schema_and_completes_with_a_structured_reply() -> anyhow::Result<()> {
    let model = StandInModel::start(
        Script::new()
            .replies(
                MANAGER,
                [
                    // Cut off at the token limit: no JSON object, no line, so it is re-asked.
                    Reply::content(r#"{"current_task_state": "nothing yet", "next": "cli", "task": "create hel"#),
                    Reply::content(
                        r#"{"current_task_state": "hello.py does not exist yet", "next": "cli", "task": "create hello.py that prints exactly: hello, loopgate"}"#,
                    ),
                ],
            )
            .replies(
                EXECUTOR,
                [write_hello("print('hello, loopgate')\n"), finish()],
            ),
    )
    .await?;
    let profiles = vec![
        Profile::new("mgr", &model.base_url(), MANAGER).with_structured_output("json_schema"),
        Profile::new("exec", &model.base_url(), EXECUTOR).with_structured_output("json_schema"),
    ];
    let mut options = StackOptions::new(profiles, 1);
    options.manager_extra = "capabilities = [\"cli\"]".into();
    let stack = Stack::start(options).await?;
    let run = stack.submit(&manager_first(), &[]).await?;
    let id = run["id"].as_str().unwrap_or_default().to_string();
    let done = stack.wait_terminal(&id, Duration::from_secs(90)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    assert_eq!(done["round"], 1, "{done}");

    let expected = json!({
        "type": "json_schema",
        "json_schema": {"name": "next_step", "strict": true, "schema": next_step_schema(false)}
    });
    let decisions = model.requests(MANAGER);
    assert_eq!(decisions.len(), 2, "{decisions:#?}");
    for request in &decisions {
        assert_eq!(request["response_format"], expected, "{request}");
        assert_eq!(
            request["response_format"]["json_schema"]["schema"]["properties"]["next"]["enum"],
            json!(["cli", "done", "blocked", "ask"])
        );
    }
    let steps = model.requests(EXECUTOR);
    assert!(!steps.is_empty());
    for request in &steps {
        assert!(request.get("response_format").is_none(), "{request}");
    }

    let types = stack.log_types(&id).await?;
    let invalid = types.iter().position(|t| t == "invalid_output");
    let decision = types.iter().position(|t| t == "decision");
    assert!(
        matches!((invalid, decision), (Some(i), Some(d)) if i < d),
        "{types:?}"
    );
    let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
    let decided = log["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["type"] == "decision")
        .cloned()
        .unwrap_or_default();
    assert_eq!(decided["route"], "cli", "{decided}");
    assert_eq!(
        decided["task"], "create hello.py that prints exactly: hello, loopgate",
        "{decided}"
    );
    Ok(())
}
