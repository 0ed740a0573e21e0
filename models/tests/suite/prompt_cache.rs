//! `prompt_cache`: on the real local model (llama-server with the repo's fenced-tools template,
//! when installed; a visible SKIP otherwise), the second turn of a tool conversation reads at
//! least the whole first prompt from llama-server's cache, and the adapter reports it as
//! `cached_prompt_tokens`. (How much of the first reply is read too depends on whether the
//! template renders the call as the model wrote it; see docs/backends.md#prompt-caching.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use anyhow::Result;
use loopgate_models::{
    ChatClient, ChatMessage, ChatRequest, ModelProfileConfig, RetryPolicy, ToolSpec,
};
use loopgate_protocol::usage::Usage;
use loopgate_test_support::LocalModel;
use serde_json::json;

/// llama-server evaluates the last prompt token again to sample from it.
const SLACK_TOKENS: u64 = 1;

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "write_file".into(),
            description: "Write a UTF-8 text file, replacing it if it exists.".into(),
            parameters: json!({"type": "object", "properties": {
                "path": {"type": "string"}, "content": {"type": "string"}
            }, "required": ["path", "content"]}),
        },
        ToolSpec {
            name: "finish".into(),
            description: "Call when the step is done.".into(),
            parameters: json!({"type": "object", "properties": {"summary": {"type": "string"}}}),
        },
    ]
}

/// Up to two turns; each reply's usage.
async fn converse(client: &ChatClient) -> Result<Vec<Usage>> {
    let mut messages = vec![
        ChatMessage::system("You are a coding agent. Use the tools, one call per reply."),
        ChatMessage::user(
            "Write hello.py that prints hello, then write bye.py that prints bye, then finish.",
        ),
    ];
    let mut usages = Vec::new();
    for _ in 0..2 {
        let response = client
            .chat(&ChatRequest::new(messages.clone()).with_tools(tools()))
            .await?;
        usages.push(response.usage);
        if response.tool_calls.is_empty() {
            break;
        }
        messages.push(response.to_assistant_message());
        for call in &response.tool_calls {
            messages.push(ChatMessage::tool_result(&call.id, &call.name, "done"));
        }
    }
    Ok(usages)
}

#[tokio::test]
async fn the_second_turn_reads_the_first_prompt_from_the_cache() -> Result<()> {
    let Some(model) = LocalModel::start("0.5b").await? else {
        eprintln!(
            "SKIP prompt_cache test: {}",
            LocalModel::unavailable_reason("0.5b").unwrap_or_default()
        );
        return Ok(());
    };
    let profile = ModelProfileConfig {
        base_url: model.base_url(),
        model: model.model_name().into(),
        timeout_secs: 300,
        max_tokens: Some(120),
        temperature: Some(0.0),
        ..ModelProfileConfig::default()
    }
    .resolve("executor", &|_| None)?;
    let client = ChatClient::from_profile(&profile)?.with_retry_policy(RetryPolicy::no_retries());
    let usages = converse(&client).await?;
    eprintln!("prompt_cache: per turn (input, output, cached): {usages:?}");
    assert!(usages.len() >= 2, "the model made no tool call: {usages:?}");
    let (first, second) = (usages[0], usages[1]);
    assert!(
        second.cached_prompt_tokens + SLACK_TOKENS >= first.input_tokens,
        "the second turn did not read the first prompt from the cache: {usages:?}\n{}",
        model.log_text()
    );
    assert!(
        second.cached_prompt_tokens < second.input_tokens,
        "{usages:?}"
    );
    Ok(())
}
