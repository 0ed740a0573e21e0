//! OpenAiClient / ChatClient against the in-process OpenAI stand-in server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use anyhow::Result;
use loopgate_models::{
    ChatClient, ChatMessage, ChatRequest, ModelError, ModelErrorKind, ModelProfile,
    ModelProfileConfig, OpenAiClient, Provider, RetryPolicy, ToolSpec,
};
use loopgate_test_support::{last_message_content, Reply, Script, StandInModel};
use serde_json::{json, Value};

const EXECUTOR: &str = "standin-executor";

fn profile_for(server: &StandInModel, model: &str, key: Option<&str>) -> Result<ModelProfile> {
    let config = ModelProfileConfig {
        provider: Provider::OpenAi,
        base_url: server.base_url(),
        model: model.to_string(),
        api_key_env: key.map(|_| "STANDIN_KEY".to_string()),
        api_key_file: None,
        timeout_secs: 10,
        max_tokens: Some(256),
        temperature: Some(0.0),
        context_window: Some(4096),
        ..ModelProfileConfig::default()
    };
    let key = key.map(str::to_string);
    Ok(config.resolve("test", &move |name| {
        (name == "STANDIN_KEY").then(|| key.clone()).flatten()
    })?)
}

fn fast_retries() -> RetryPolicy {
    RetryPolicy {
        max_retries: 2,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(20),
        max_retry_after: Duration::from_secs(5),
    }
}

fn client(profile: ModelProfile) -> Result<OpenAiClient> {
    Ok(OpenAiClient::new(profile)?.with_retry_policy(fast_retries()))
}

fn shell_tool() -> ToolSpec {
    ToolSpec {
        name: "shell".into(),
        description: "Run a shell command in the workspace".into(),
        parameters: json!({
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"]
        }),
    }
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest::new(vec![
        ChatMessage::system("You are a coding agent."),
        ChatMessage::user(text),
    ])
    .with_tools(vec![shell_tool()])
}

#[tokio::test]
async fn plain_content_reply() -> Result<()> {
    let server =
        StandInModel::start(Script::new().reply(EXECUTOR, Reply::content("All done."))).await?;
    let client = client(profile_for(&server, EXECUTOR, None)?)?;
    let response = client.chat(&ask("say done")).await?;
    assert_eq!(response.content.as_deref(), Some("All done."));
    assert!(response.tool_calls.is_empty());
    assert!(!response.tool_calls_from_content);
    assert_eq!(response.finish_reason.as_deref(), Some("stop"));
    assert_eq!(response.model, EXECUTOR);
    assert!(response.usage.input_tokens > 0);
    assert_eq!(response.usage.output_tokens, 3); // "All done." = 9 chars

    let requests = server.requests(EXECUTOR);
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent["model"], EXECUTOR);
    assert_eq!(sent["max_tokens"], 256);
    assert_eq!(sent["stream"], false);
    assert_eq!(
        sent["messages"][1],
        json!({"role": "user", "content": "say done"})
    );
    assert_eq!(sent["tools"][0]["function"]["name"], "shell");
    Ok(())
}

#[tokio::test]
async fn structured_tool_calls() -> Result<()> {
    let script = Script::new().reply(
        EXECUTOR,
        Reply::ToolCalls(vec![
            ("shell".into(), json!({"command": "ls -la"})),
            ("shell".into(), Value::String("{\"command\": ls".into())),
        ]),
    );
    let server = StandInModel::start(script).await?;
    let response = client(profile_for(&server, EXECUTOR, None)?)?
        .chat(&ask("list"))
        .await?;
    assert!(!response.tool_calls_from_content);
    assert_eq!(response.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(response.tool_calls.len(), 2);
    assert_eq!(response.tool_calls[0].name, "shell");
    assert_eq!(
        response.tool_calls[0].arguments,
        json!({"command": "ls -la"})
    );
    assert!(response.tool_calls[0].id.starts_with("call_standin_"));
    // Arguments that are not JSON survive as a string for the caller to report.
    assert_eq!(
        response.tool_calls[1].arguments,
        Value::String("{\"command\": ls".into())
    );
    Ok(())
}

#[tokio::test]
async fn fenced_json_in_content_becomes_a_tool_call() -> Result<()> {
    let content = "I'll list the files first.\n```json\n{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}}\n```";
    let server =
        StandInModel::start(Script::new().reply(EXECUTOR, Reply::content(content))).await?;
    let response = client(profile_for(&server, EXECUTOR, None)?)?
        .chat(&ask("list"))
        .await?;
    assert!(response.tool_calls_from_content);
    assert_eq!(response.content.as_deref(), Some(content));
    assert_eq!(response.tool_calls.len(), 1);
    assert_eq!(response.tool_calls[0].id, "call_fallback_0");
    assert_eq!(response.tool_calls[0].name, "shell");
    assert_eq!(response.tool_calls[0].arguments, json!({"command": "ls"}));
    Ok(())
}

#[tokio::test]
async fn tool_loop_with_dynamic_reply() -> Result<()> {
    let script = Script::new()
        .reply(
            EXECUTOR,
            Reply::tool_call("shell", json!({"command": "cat VERSION"})),
        )
        .fallback(
            EXECUTOR,
            Reply::dynamic(|request| match last_message_content(request, "tool") {
                Some(result) => Reply::content(format!("version is {}", result.trim())),
                None => Reply::error(400, "expected a tool result"),
            }),
        );
    let server = StandInModel::start(script).await?;
    let client = ChatClient::from_profile(&profile_for(&server, EXECUTOR, None)?)?
        .with_retry_policy(fast_retries());
    let mut request = ask("what version?");
    let first = client.chat(&request).await?;
    assert_eq!(first.tool_calls.len(), 1);
    request.messages.push(first.to_assistant_message());
    request.messages.push(ChatMessage::tool_result(
        first.tool_calls[0].id.clone(),
        "shell",
        "1.2.3\n",
    ));
    let second = client.chat(&request).await?;
    assert_eq!(second.content.as_deref(), Some("version is 1.2.3"));

    let sent = server.requests(EXECUTOR);
    assert_eq!(sent.len(), 2);
    let history = sent[1]["messages"].as_array().unwrap();
    assert_eq!(history[2]["role"], "assistant");
    assert_eq!(
        history[2]["tool_calls"][0]["function"]["arguments"],
        "{\"command\":\"cat VERSION\"}"
    );
    assert_eq!(history[3]["role"], "tool");
    assert_eq!(history[3]["tool_call_id"], first.tool_calls[0].id);
    Ok(())
}

#[tokio::test]
async fn http_errors_are_classified_and_transient_ones_retried() -> Result<()> {
    let cases: Vec<(Reply, ModelErrorKind, usize)> = vec![
        (Reply::error(500, "boom"), ModelErrorKind::Server, 3),
        (Reply::error(503, "loading"), ModelErrorKind::Server, 3),
        (
            Reply::error(429, "rate limited"),
            ModelErrorKind::RateLimit,
            3,
        ),
        (Reply::error(401, "bad key"), ModelErrorKind::Auth, 1),
        (
            Reply::error(400, "unknown field"),
            ModelErrorKind::BadRequest,
            1,
        ),
        (
            Reply::error(
                400,
                "the request exceeds the available context size, try increasing it",
            ),
            ModelErrorKind::ContextLength,
            1,
        ),
        // llama.cpp's server when the model's output ends inside a call: the same request
        // would run away the same way, so it is not retried.
        (
            Reply::error(
                500,
                "{\"error\":{\"code\":500,\"message\":\"Failed to parse tool call arguments as JSON: \
                 [json.exception.parse_error.101] parse error at line 1, column 1812\",\
                 \"type\":\"server_error\"}}",
            ),
            ModelErrorKind::CutToolCall,
            1,
        ),
    ];
    for (reply, kind, attempts) in cases {
        let label = format!("{reply:?}");
        let server = StandInModel::start(Script::new().fallback(EXECUTOR, reply)).await?;
        let error = client(profile_for(&server, EXECUTOR, None)?)?
            .chat(&ask("hi"))
            .await
            .expect_err(&label);
        assert_eq!(error.kind(), kind, "{label}");
        assert!(matches!(error, ModelError::Status { .. }), "{label}");
        assert_eq!(server.request_count(EXECUTOR), attempts, "{label}");
    }
    Ok(())
}

#[tokio::test]
async fn transient_error_then_success() -> Result<()> {
    let script = Script::new().replies(
        EXECUTOR,
        [
            Reply::error(502, "bad gateway"),
            Reply::content("recovered"),
        ],
    );
    let server = StandInModel::start(script).await?;
    let response = client(profile_for(&server, EXECUTOR, None)?)?
        .chat(&ask("hi"))
        .await?;
    assert_eq!(response.content.as_deref(), Some("recovered"));
    assert_eq!(server.request_count(EXECUTOR), 2);
    Ok(())
}

#[tokio::test]
async fn empty_script_answers_500() -> Result<()> {
    let server = StandInModel::start(Script::new()).await?;
    let error = OpenAiClient::new(profile_for(&server, "nobody", None)?)?
        .with_retry_policy(RetryPolicy::no_retries())
        .chat(&ask("hi"))
        .await
        .expect_err("no reply scripted");
    assert_eq!(error.kind(), ModelErrorKind::Server);
    assert_eq!(error.status_code(), Some(500));
    Ok(())
}

#[tokio::test]
async fn malformed_bodies() -> Result<()> {
    let replies = vec![
        Reply::http(200, "this is not json"),
        Reply::dynamic(|_| Reply::http(200, "{\"choices\": [")),
        Reply::http(200, "{\"object\": \"chat.completion\", \"choices\": []}"),
        Reply::http(200, "{\"error\": {\"message\": \"model not loaded\"}}"),
    ];
    for reply in replies {
        let label = format!("{reply:?}");
        let server = StandInModel::start(Script::new().reply(EXECUTOR, reply)).await?;
        let error = client(profile_for(&server, EXECUTOR, None)?)?
            .chat(&ask("hi"))
            .await
            .expect_err(&label);
        assert_eq!(error.kind(), ModelErrorKind::MalformedResponse, "{label}");
        assert_eq!(server.request_count(EXECUTOR), 1, "not retried: {label}");
    }
    Ok(())
}

#[tokio::test]
async fn bearer_header_only_when_a_key_is_set() -> Result<()> {
    let server = StandInModel::start(
        Script::new()
            .fallback("with-key", Reply::content("ok"))
            .fallback("without-key", Reply::content("ok")),
    )
    .await?;
    client(profile_for(&server, "with-key", Some("sk-standin-123"))?)?
        .chat(&ask("hi"))
        .await?;
    client(profile_for(&server, "without-key", None)?)?
        .chat(&ask("hi"))
        .await?;
    assert_eq!(
        server.authorization_headers("with-key"),
        vec![Some("Bearer sk-standin-123".to_string())]
    );
    assert_eq!(server.authorization_headers("without-key"), vec![None]);
    Ok(())
}

#[tokio::test]
async fn whole_request_timeout_is_not_retried() -> Result<()> {
    let script = Script::new().fallback(
        EXECUTOR,
        Reply::delayed(Duration::from_secs(5), Reply::content("too late")),
    );
    let server = StandInModel::start(script).await?;
    let mut profile = profile_for(&server, EXECUTOR, None)?;
    profile.timeout = Duration::from_millis(300);
    let started = std::time::Instant::now();
    let error = client(profile)?
        .chat(&ask("hi"))
        .await
        .expect_err("timeout");
    assert_eq!(error.kind(), ModelErrorKind::Timeout);
    assert!(error.is_transient());
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(server.request_count(EXECUTOR), 1);
    Ok(())
}

#[tokio::test]
async fn connection_refused_is_a_transport_error() -> Result<()> {
    let server = StandInModel::start(Script::new()).await?;
    let profile = profile_for(&server, EXECUTOR, None)?;
    drop(server);
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let closed_port = listener.local_addr()?.port();
    drop(listener);
    let profile = ModelProfile {
        base_url: format!("http://127.0.0.1:{closed_port}/v1"),
        ..profile
    };
    let error = OpenAiClient::new(profile)?
        .with_retry_policy(RetryPolicy::no_retries())
        .chat(&ask("hi"))
        .await
        .expect_err("nothing listens");
    assert_eq!(error.kind(), ModelErrorKind::Transport);
    assert!(error.is_transient());
    Ok(())
}

#[tokio::test]
async fn provider_clients_refuse_other_providers_profiles() -> Result<()> {
    let server = StandInModel::start(Script::new()).await?;
    let profile = ModelProfile {
        provider: Provider::Anthropic,
        ..profile_for(&server, EXECUTOR, None)?
    };
    let error = OpenAiClient::new(profile.clone()).expect_err("wrong provider");
    assert_eq!(error.kind(), ModelErrorKind::Config);
    assert!(matches!(
        ChatClient::from_profile(&profile)?,
        ChatClient::Anthropic(_)
    ));
    Ok(())
}

#[tokio::test]
async fn standin_lists_models_and_waits_for_requests() -> Result<()> {
    let server = StandInModel::start(
        Script::new()
            .fallback("standin-manager", Reply::content("Next: done"))
            .reply(EXECUTOR, Reply::content("x")),
    )
    .await?;
    server.push(EXECUTOR, Reply::content("y"));
    assert_eq!(server.pending_replies(EXECUTOR), 2);
    let client = client(profile_for(&server, EXECUTOR, None)?)?;
    let waiter = server.wait_for_requests(EXECUTOR, 2, Duration::from_secs(5));
    let calls = async {
        let a = client.chat(&ask("1")).await?;
        let b = client.chat(&ask("2")).await?;
        Ok::<_, ModelError>((a, b))
    };
    let (waited, answers) = tokio::join!(waiter, calls);
    waited?;
    let (a, b) = answers?;
    assert_eq!(
        (a.content.as_deref(), b.content.as_deref()),
        (Some("x"), Some("y"))
    );
    assert!(server
        .wait_for_requests("standin-manager", 1, Duration::from_millis(50))
        .await
        .is_err());

    let url = format!("{}/models", server.base_url());
    let listed: Value = reqwest_get_json(&url).await?;
    let ids: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert_eq!(ids, vec!["standin-executor", "standin-manager"]);
    Ok(())
}

async fn reqwest_get_json(url: &str) -> Result<Value> {
    let response = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()?
        .get(url)
        .send()
        .await?;
    anyhow::ensure!(
        response.status().is_success(),
        "GET {url}: {}",
        response.status()
    );
    Ok(serde_json::from_str(&response.text().await?)?)
}

#[path = "suite/mod.rs"]
mod suite;
