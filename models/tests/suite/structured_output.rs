//! `structured_output`: the OpenAI adapter sends the request's reply schema as
//! `response_format` exactly when the profile says `"json_schema"`, whole and streamed, and the
//! request is otherwise the same; Anthropic profiles refuse the key at config load.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use anyhow::Result;
use loopgate_common::next_step::{next_step_schema, parse_next_step, Route, NEXT_STEP_SCHEMA_NAME};
use loopgate_models::{
    ChatClient, ChatMessage, ChatRequest, ModelConfigError, ModelProfileConfig, Provider,
    RetryPolicy, StructuredOutput,
};
use loopgate_test_support::{Reply, Script, StandInModel};
use serde_json::{json, Value};

const MODEL: &str = "standin-manager";
const REPLY: &str =
    r#"{"current_task_state": "nothing yet", "next": "cli", "task": "create hello.py"}"#;

fn client(
    server: &StandInModel,
    structured_output: StructuredOutput,
    stream: bool,
) -> Result<ChatClient> {
    let profile = ModelProfileConfig {
        base_url: server.base_url(),
        model: MODEL.into(),
        timeout_secs: 10,
        stream,
        structured_output,
        ..ModelProfileConfig::default()
    }
    .resolve("manager", &|_| None)?;
    Ok(ChatClient::from_profile(&profile)?.with_retry_policy(RetryPolicy::no_retries()))
}

fn decision(with_schema: bool) -> ChatRequest {
    let request = ChatRequest::new(vec![
        ChatMessage::system("You are the manager."),
        ChatMessage::user("What next?"),
    ]);
    if with_schema {
        request.with_reply_schema(NEXT_STEP_SCHEMA_NAME, next_step_schema(false))
    } else {
        request
    }
}

fn without_response_format(body: &Value) -> Value {
    let mut body = body.clone();
    if let Some(map) = body.as_object_mut() {
        map.remove("response_format");
    }
    body
}

#[tokio::test]
async fn response_format_is_sent_only_when_the_profile_asks_and_the_request_has_a_schema(
) -> Result<()> {
    let server = StandInModel::start(Script::new().fallback(MODEL, Reply::content(REPLY))).await?;
    let schema = next_step_schema(false);
    assert_eq!(
        schema["properties"]["next"]["enum"],
        json!(["cli", "done", "blocked", "ask"])
    );
    let expected = json!({
        "type": "json_schema",
        "json_schema": {"name": "next_step", "strict": true, "schema": schema}
    });
    let cases: &[(&str, StructuredOutput, bool, bool)] = &[
        (
            "json_schema + schema",
            StructuredOutput::JsonSchema,
            true,
            true,
        ),
        (
            "json_schema, no schema",
            StructuredOutput::JsonSchema,
            false,
            false,
        ),
        ("off + schema", StructuredOutput::Off, true, false),
        ("off, no schema", StructuredOutput::Off, false, false),
    ];
    for stream in [false, true] {
        let mut plain_bodies = Vec::new();
        for (label, structured_output, with_schema, sent) in cases {
            let before = server.request_count(MODEL);
            let response = client(&server, *structured_output, stream)?
                .chat(&decision(*with_schema))
                .await?;
            // The reply goes through the manager's parser as any other.
            let step = parse_next_step(response.content.as_deref().unwrap_or_default())?;
            assert_eq!(step.route, Route::Cli, "{label}");
            let requests = server.requests(MODEL);
            assert_eq!(requests.len(), before + 1, "{label}");
            let body = &requests[before];
            let want = sent.then(|| expected.clone());
            assert_eq!(
                body.get("response_format").cloned(),
                want,
                "{label} (stream {stream})"
            );
            plain_bodies.push(without_response_format(body));
        }
        // Apart from `response_format` the four requests are the same.
        assert!(
            plain_bodies.windows(2).all(|w| w[0] == w[1]),
            "{plain_bodies:#?}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn anthropic_profiles_refuse_structured_output() -> Result<()> {
    let server = StandInModel::start(Script::new().fallback(MODEL, Reply::content(REPLY))).await?;
    let config = ModelProfileConfig {
        provider: Provider::Anthropic,
        base_url: server.base_url(),
        model: MODEL.into(),
        structured_output: StructuredOutput::JsonSchema,
        ..ModelProfileConfig::default()
    };
    let error = config.resolve("claude", &|_| None).expect_err("refused");
    assert!(
        matches!(
            error,
            ModelConfigError::InvalidField {
                field: "structured_output",
                ..
            }
        ),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .contains("only supported for provider = \"openai\""),
        "{error}"
    );
    // A profile resolved by hand with the key set is refused by the client too.
    let off = ModelProfileConfig {
        structured_output: StructuredOutput::Off,
        ..config
    }
    .resolve("claude", &|_| None)?;
    let forced = loopgate_models::ModelProfile {
        structured_output: StructuredOutput::JsonSchema,
        ..off.clone()
    };
    assert!(ChatClient::from_profile(&forced).is_err());
    // Off, a request's schema is not sent to the Messages API.
    let response = ChatClient::from_profile(&off)?
        .with_retry_policy(RetryPolicy::no_retries())
        .chat(&decision(true))
        .await?;
    assert!(response.content.is_some());
    let body = &server.requests(MODEL)[0];
    for key in ["response_format", "output_format", "output_config"] {
        assert!(body.get(key).is_none(), "{key}: {body}");
    }
    Ok(())
}
