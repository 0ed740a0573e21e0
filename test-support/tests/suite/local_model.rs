//! Starts llama-server with the repo's chat template on the real local model (when installed)
//! and checks that a tool call comes back in a usable form. Prints a visible SKIP otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::time::Duration;

use loopgate_test_support::LocalModel;
use serde_json::{json, Value};

/// The tool call from a chat completion: either llama-server parsed it into `tool_calls`, or
/// the content holds the fenced ```json block the template asks for.
fn extract_tool_call(message: &Value) -> Option<(String, Value)> {
    if let Some(call) = message["tool_calls"].get(0) {
        let name = call["function"]["name"].as_str()?.to_string();
        let args = match &call["function"]["arguments"] {
            Value::String(s) => serde_json::from_str(s).ok()?,
            other => other.clone(),
        };
        return Some((name, args));
    }
    let content = message["content"].as_str()?;
    let start = content.find("```json")? + "```json".len();
    let end = start + content[start..].find("```")?;
    let call: Value = serde_json::from_str(content[start..end].trim()).ok()?;
    Some((
        call["name"].as_str()?.to_string(),
        call["arguments"].clone(),
    ))
}

#[tokio::test]
async fn local_model_answers_a_tool_call_through_the_fenced_template() -> anyhow::Result<()> {
    let Some(model) = LocalModel::start("0.5b").await? else {
        eprintln!(
            "SKIP local_model test: {}",
            LocalModel::unavailable_reason("0.5b").unwrap_or_default()
        );
        return Ok(());
    };
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(300))
        .build()?;
    let models: Value = client
        .get(format!("{}/models", model.base_url()))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(models["data"][0]["id"], model.model_name(), "{models}");

    let request = json!({
        "model": model.model_name(),
        "temperature": 0,
        "seed": 7,
        "max_tokens": 200,
        "messages": [
            {"role": "system", "content": "You are a coding agent working in a project directory."},
            {"role": "user", "content": "Create the file hello.txt containing exactly: Hello, loopgate!"}
        ],
        "tools": [{
            "type": "function",
            "function": {
                "name": "write_file",
                "description": "Write a UTF-8 text file in the workspace, replacing it if it exists.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "relative path"},
                        "content": {"type": "string", "description": "full file content"}
                    },
                    "required": ["path", "content"]
                }
            }
        }]
    });
    let reply: Value = client
        .post(format!("{}/chat/completions", model.base_url()))
        .json(&request)
        .send()
        .await?
        .json()
        .await?;
    let message = &reply["choices"][0]["message"];
    let (name, args) = extract_tool_call(message)
        .unwrap_or_else(|| panic!("no tool call in {reply}\nserver log:\n{}", model.log_text()));
    assert_eq!(name, "write_file", "{reply}");
    assert_eq!(args["path"], "hello.txt", "{reply}");
    assert!(
        args["content"]
            .as_str()
            .unwrap_or_default()
            .contains("Hello, loopgate!"),
        "{reply}"
    );
    Ok(())
}
