//! The adapters against the real providers, only when asked for and a key is present:
//! `LOOPGATE_LIVE_TESTS=1` plus `OPENAI_API_KEY` and/or `ANTHROPIC_API_KEY` (models from
//! `LOOPGATE_LIVE_OPENAI_MODEL` / `LOOPGATE_LIVE_ANTHROPIC_MODEL`). Never runs when `CI` is
//! set. Otherwise each test passes without a network call.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use anyhow::Result;
use loopgate_models::{
    ChatClient, ChatMessage, ChatRequest, ModelProfileConfig, Provider, ToolSpec,
};
use serde_json::json;

fn live_profile(provider: Provider) -> Option<ModelProfileConfig> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if var("LOOPGATE_LIVE_TESTS").as_deref() != Some("1") || var("CI").is_some() {
        return None;
    }
    let (key_env, base_url, model_env, default_model) = match provider {
        Provider::OpenAi => (
            "OPENAI_API_KEY",
            "https://api.openai.com/v1",
            "LOOPGATE_LIVE_OPENAI_MODEL",
            "gpt-4o-mini",
        ),
        Provider::Anthropic => (
            "ANTHROPIC_API_KEY",
            "https://api.anthropic.com/v1",
            "LOOPGATE_LIVE_ANTHROPIC_MODEL",
            "claude-3-5-haiku-latest",
        ),
    };
    var(key_env)?;
    Some(ModelProfileConfig {
        provider,
        base_url: base_url.into(),
        model: var(model_env).unwrap_or_else(|| default_model.into()),
        api_key_env: Some(key_env.into()),
        timeout_secs: 60,
        max_tokens: Some(256),
        ..ModelProfileConfig::default()
    })
}

async fn tool_call_round(provider: Provider, stream: bool) -> Result<()> {
    let Some(config) = live_profile(provider) else {
        return Ok(());
    };
    let config = ModelProfileConfig { stream, ..config };
    let profile = config.resolve("live", &loopgate_models::process_env)?;
    let client = ChatClient::from_profile(&profile)?;
    let request = ChatRequest::new(vec![ChatMessage::user(
        "Call the shell tool with the command `ls`. Do not answer in text.",
    )])
    .with_tools(vec![ToolSpec {
        name: "shell".into(),
        description: "Run a shell command".into(),
        parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
    }]);
    let response = client.chat(&request).await?;
    assert_eq!(response.tool_calls.len(), 1, "{response:?}");
    assert_eq!(response.tool_calls[0].name, "shell");
    assert!(response.usage.input_tokens > 0 && response.usage.output_tokens > 0);
    Ok(())
}

#[tokio::test]
async fn live_openai() -> Result<()> {
    tool_call_round(Provider::OpenAi, false).await?;
    tool_call_round(Provider::OpenAi, true).await
}

#[tokio::test]
async fn live_anthropic() -> Result<()> {
    tool_call_round(Provider::Anthropic, false).await?;
    tool_call_round(Provider::Anthropic, true).await
}
