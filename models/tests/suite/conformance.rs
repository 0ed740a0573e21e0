//! Conformance suite: the same cases run against the stand-in server speaking each provider's
//! real wire format over HTTP (OpenAI chat completions and Anthropic Messages), each whole and
//! streamed: text, tool calls (streamed in pieces), usage and cost, 429 with Retry-After,
//! 5xx, malformed JSON, cut streams, context-length, auth and quota errors.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use anyhow::Result;
use loopgate_models::{
    ChatClient, ChatMessage, ChatRequest, ChatResponse, ModelError, ModelErrorKind,
    ModelProfileConfig, Provider, RetryPolicy, ToolSpec,
};
use loopgate_test_support::{Fault, Reply, Script, StandInModel};
use serde_json::json;

const MODEL: &str = "conformance-model";

#[derive(Debug, Clone, Copy)]
struct Variant {
    provider: Provider,
    stream: bool,
}

const VARIANTS: [Variant; 4] = [
    Variant {
        provider: Provider::OpenAi,
        stream: false,
    },
    Variant {
        provider: Provider::OpenAi,
        stream: true,
    },
    Variant {
        provider: Provider::Anthropic,
        stream: false,
    },
    Variant {
        provider: Provider::Anthropic,
        stream: true,
    },
];

fn client(server: &StandInModel, variant: Variant) -> Result<ChatClient> {
    let config = ModelProfileConfig {
        provider: variant.provider,
        base_url: server.base_url(),
        model: MODEL.into(),
        api_key_env: Some("CONFORMANCE_KEY".into()),
        timeout_secs: 10,
        stream: variant.stream,
        input_usd_per_mtok: Some(3.0),
        output_usd_per_mtok: Some(15.0),
        ..ModelProfileConfig::default()
    };
    let profile = config.resolve("conformance", &|_| Some("sk-conformance".into()))?;
    Ok(
        ChatClient::from_profile(&profile)?.with_retry_policy(RetryPolicy {
            max_retries: 2,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(40),
            max_retry_after: Duration::from_secs(5),
        }),
    )
}

fn request() -> ChatRequest {
    ChatRequest::new(vec![
        ChatMessage::system("You are a coding agent."),
        ChatMessage::user("list the files"),
    ])
    .with_tools(vec![ToolSpec {
        name: "shell".into(),
        description: "Run a command".into(),
        parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
    }])
}

/// Runs `replies` for every variant (concurrently), handing each variant's outcome, request
/// count and elapsed time to `check`.
async fn for_each_variant(
    replies: Vec<Reply>,
    check: impl Fn(Variant, Result<ChatResponse, ModelError>, usize, Duration)
        + Send
        + Sync
        + Copy
        + 'static,
) -> Result<()> {
    let mut tasks = Vec::new();
    for variant in VARIANTS {
        let replies = replies.clone();
        tasks.push(tokio::spawn(async move {
            let server = StandInModel::start(Script::new().replies(MODEL, replies)).await?;
            let client = client(&server, variant)?;
            let started = Instant::now();
            let outcome = client.chat(&request()).await;
            let elapsed = started.elapsed();
            let requests = server.requests(MODEL);
            for sent in &requests {
                assert_eq!(sent["stream"], variant.stream, "{variant:?}");
            }
            check(variant, outcome, requests.len(), elapsed);
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(())
}

fn error_kind(outcome: &Result<ChatResponse, ModelError>) -> Option<ModelErrorKind> {
    outcome.as_ref().err().map(ModelError::kind)
}

#[tokio::test]
async fn text_reply_with_usage_and_cost() -> Result<()> {
    let reply = Reply::with_usage(1000, 100, Reply::content("Here are the files."));
    for_each_variant(vec![reply], |variant, outcome, requests, _| {
        let response = outcome.unwrap_or_else(|e| panic!("{variant:?}: {e}"));
        assert_eq!(
            response.content.as_deref(),
            Some("Here are the files."),
            "{variant:?}"
        );
        assert!(response.tool_calls.is_empty());
        assert_eq!(
            response.finish_reason.as_deref(),
            Some("stop"),
            "{variant:?}"
        );
        assert_eq!(response.model, MODEL);
        assert_eq!(response.usage.input_tokens, 1000, "{variant:?}");
        assert_eq!(response.usage.output_tokens, 100, "{variant:?}");
        // $3 / $15 per million tokens.
        assert_eq!(response.usage.cost_micros, 4500, "{variant:?}");
        assert_eq!(requests, 1);
    })
    .await
}

#[tokio::test]
async fn tool_calls_arrive_whole_or_in_pieces() -> Result<()> {
    let reply = Reply::ToolCalls(vec![
        (
            "shell".into(),
            json!({"command": "ls -la && echo 'done, really'"}),
        ),
        ("read_file".into(), json!({"path": "src/main.rs"})),
    ]);
    for_each_variant(vec![reply], |variant, outcome, _, _| {
        let response = outcome.unwrap_or_else(|e| panic!("{variant:?}: {e}"));
        assert_eq!(
            response.finish_reason.as_deref(),
            Some("tool_calls"),
            "{variant:?}"
        );
        let calls: Vec<_> = response
            .tool_calls
            .iter()
            .map(|c| (c.name.as_str(), c.arguments.clone()))
            .collect();
        assert_eq!(
            calls,
            vec![
                ("shell", json!({"command": "ls -la && echo 'done, really'"})),
                ("read_file", json!({"path": "src/main.rs"})),
            ],
            "{variant:?}"
        );
        assert!(
            response.tool_calls.iter().all(|c| c.id.contains("standin")),
            "{variant:?}"
        );
        assert_ne!(response.tool_calls[0].id, response.tool_calls[1].id);
        assert!(!response.tool_calls_from_content);
    })
    .await
}

#[tokio::test]
async fn rate_limit_waits_for_retry_after_then_succeeds() -> Result<()> {
    let replies = vec![
        Reply::fault(Fault::RateLimited {
            retry_after_secs: 1,
        }),
        Reply::content("ok"),
    ];
    for_each_variant(replies, |variant, outcome, requests, elapsed| {
        assert_eq!(
            outcome
                .unwrap_or_else(|e| panic!("{variant:?}: {e}"))
                .content
                .as_deref(),
            Some("ok")
        );
        assert_eq!(requests, 2, "{variant:?}");
        assert!(
            elapsed >= Duration::from_secs(1),
            "{variant:?}: retried after {elapsed:?}"
        );
    })
    .await
}

#[tokio::test]
async fn rate_limit_asking_too_long_is_returned_with_its_delay() -> Result<()> {
    let replies = vec![Reply::fault(Fault::RateLimited {
        retry_after_secs: 3600,
    })];
    for_each_variant(replies, |variant, outcome, requests, _| {
        let error = outcome.expect_err("rate limited");
        assert_eq!(error.kind(), ModelErrorKind::RateLimit, "{variant:?}");
        assert_eq!(
            error.retry_after(),
            Some(Duration::from_secs(3600)),
            "{variant:?}"
        );
        assert!(!error.ends_episode());
        assert_eq!(requests, 1, "{variant:?}");
    })
    .await
}

#[tokio::test]
async fn server_errors_are_retried_then_reported() -> Result<()> {
    let replies = vec![Reply::fault(Fault::ServerError); 3];
    for_each_variant(replies, |variant, outcome, requests, _| {
        assert_eq!(
            error_kind(&outcome),
            Some(ModelErrorKind::Server),
            "{variant:?}"
        );
        assert_eq!(requests, 3, "{variant:?}: one call and two retries");
    })
    .await?;
    let replies = vec![
        Reply::fault(Fault::ServerError),
        Reply::content("recovered"),
    ];
    for_each_variant(replies, |variant, outcome, requests, _| {
        assert!(outcome.is_ok(), "{variant:?}");
        assert_eq!(requests, 2);
    })
    .await
}

#[tokio::test]
async fn cut_streams_and_truncated_bodies() -> Result<()> {
    let replies = vec![Reply::fault(Fault::StreamCut), Reply::content("second try")];
    for_each_variant(replies, |variant, outcome, requests, _| {
        if variant.stream {
            // A cut stream is a transport failure: retried.
            assert_eq!(
                outcome.unwrap().content.as_deref(),
                Some("second try"),
                "{variant:?}"
            );
            assert_eq!(requests, 2, "{variant:?}");
        } else {
            assert_eq!(
                error_kind(&outcome),
                Some(ModelErrorKind::MalformedResponse),
                "{variant:?}"
            );
            assert_eq!(requests, 1, "{variant:?}");
        }
    })
    .await
}

#[tokio::test]
async fn malformed_json_is_not_retried() -> Result<()> {
    for_each_variant(
        vec![Reply::fault(Fault::MalformedJson)],
        |variant, outcome, requests, _| {
            assert_eq!(
                error_kind(&outcome),
                Some(ModelErrorKind::MalformedResponse),
                "{variant:?}"
            );
            assert_eq!(requests, 1, "{variant:?}");
        },
    )
    .await
}

#[tokio::test]
async fn fatal_errors_table() -> Result<()> {
    let cases = [
        (Fault::ContextLength, ModelErrorKind::ContextLength, false),
        (Fault::AuthFailed, ModelErrorKind::Auth, true),
        (Fault::QuotaExhausted, ModelErrorKind::Quota, true),
    ];
    for (fault, kind, ends_episode) in cases {
        for_each_variant(
            vec![Reply::fault(fault)],
            move |variant, outcome, requests, _| {
                let error = outcome.expect_err("fatal");
                assert_eq!(error.kind(), kind, "{variant:?} {fault:?}");
                assert_eq!(error.ends_episode(), ends_episode, "{variant:?} {fault:?}");
                assert_eq!(requests, 1, "{variant:?} {fault:?}: not retried");
            },
        )
        .await?;
    }
    Ok(())
}

#[tokio::test]
async fn keys_travel_in_each_providers_header() -> Result<()> {
    for variant in VARIANTS {
        let server = StandInModel::start(Script::new().reply(MODEL, Reply::content("hi"))).await?;
        client(&server, variant)?.chat(&request()).await?;
        let expected = match variant.provider {
            Provider::OpenAi => "Bearer sk-conformance",
            Provider::Anthropic => "sk-conformance",
        };
        assert_eq!(
            server.authorization_headers(MODEL),
            vec![Some(expected.to_string())]
        );
    }
    Ok(())
}
