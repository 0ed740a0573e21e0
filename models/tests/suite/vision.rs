//! `vision`: a tool result's image (a browser screenshot) reaches a vision profile as the
//! provider's image part (OpenAI `image_url` data URL in a user turn, Anthropic `image` block
//! in the `tool_result`), checked and decoded by the stand-in; a text-only profile sends the
//! same conversation without it, and the tool result's text either way.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use anyhow::Result;
use loopgate_models::{
    ChatClient, ChatMessage, ChatRequest, ImagePart, ModelProfileConfig, Provider, RetryPolicy,
    ToolCall,
};
use loopgate_test_support::{last_message_content, last_tool_result, Reply, Script, StandInModel};
use serde_json::json;

const MODEL: &str = "standin-executor";
/// A 1x1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

fn conversation() -> ChatRequest {
    ChatRequest::new(vec![
        ChatMessage::system("You drive a browser."),
        ChatMessage::user("Look at the page."),
        ChatMessage::Assistant {
            content: None,
            tool_calls: vec![ToolCall::new(
                "call_1",
                "browser_screenshot",
                json!({"path": "shots/page.png"}),
            )],
        },
        ChatMessage::tool_result_with_images(
            "call_1",
            "browser_screenshot",
            "saved a 70-byte PNG to shots/page.png",
            vec![ImagePart::png(PNG)],
        ),
    ])
}

async fn send(server: &StandInModel, provider: Provider, vision: bool, stream: bool) -> Result<()> {
    let profile = ModelProfileConfig {
        provider,
        base_url: server.base_url(),
        model: MODEL.into(),
        timeout_secs: 10,
        stream,
        vision,
        ..ModelProfileConfig::default()
    }
    .resolve("executor", &|_| None)?;
    ChatClient::from_profile(&profile)?
        .with_retry_policy(RetryPolicy::no_retries())
        .chat(&conversation())
        .await?;
    Ok(())
}

#[tokio::test]
async fn screenshots_reach_vision_profiles_and_not_text_profiles() -> Result<()> {
    let server =
        StandInModel::start(Script::new().fallback(MODEL, Reply::content("I see it."))).await?;
    let cases = [
        (Provider::OpenAi, false, false),
        (Provider::OpenAi, true, false),
        (Provider::OpenAi, true, true),
        (Provider::Anthropic, false, false),
        (Provider::Anthropic, true, false),
        (Provider::Anthropic, true, true),
    ];
    for (i, (provider, vision, stream)) in cases.into_iter().enumerate() {
        send(&server, provider, vision, stream).await?;
        let case = format!("{provider} vision={vision} stream={stream}");
        let images = &server.images(MODEL)[i];
        let body = &server.requests(MODEL)[i];
        if vision {
            assert_eq!(images.len(), 1, "{case}: {body}");
            assert_eq!(images[0].media_type, "image/png", "{case}");
            assert_eq!(images[0].bytes, PNG, "{case}");
            let role = if provider == Provider::OpenAi {
                "user"
            } else {
                "tool"
            };
            assert_eq!(images[0].role, role, "{case}");
        } else {
            assert!(images.is_empty(), "{case}: {body}");
            assert!(!body.to_string().contains("base64"), "{case}: {body}");
        }
        let text = match provider {
            Provider::OpenAi => last_message_content(body, "tool"),
            Provider::Anthropic => last_tool_result(body),
        };
        assert_eq!(
            text.as_deref(),
            Some("saved a 70-byte PNG to shots/page.png"),
            "{case}: {body}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_malformed_image_part_is_refused_like_the_providers_do() -> Result<()> {
    let server = StandInModel::start(Script::new().fallback(MODEL, Reply::content("ok"))).await?;
    let mut request = conversation();
    if let Some(ChatMessage::Tool { images, .. }) = request.messages.last_mut() {
        images[0].data_base64 = "not base64!".into();
    }
    let profile = ModelProfileConfig {
        base_url: server.base_url(),
        model: MODEL.into(),
        timeout_secs: 10,
        vision: true,
        ..ModelProfileConfig::default()
    }
    .resolve("executor", &|_| None)?;
    let error = ChatClient::from_profile(&profile)?
        .with_retry_policy(RetryPolicy::no_retries())
        .chat(&request)
        .await
        .expect_err("a 400 from the stand-in");
    assert_eq!(error.kind(), loopgate_models::ModelErrorKind::BadRequest);
    Ok(())
}
