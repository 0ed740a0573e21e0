//! Context-health resets end to end through the real HTTP adapters: a stand-in model (OpenAI and
//! Anthropic wire formats, whole and streamed) reports an inflating context; the loop asks for
//! `progress.md`, drops the agent, and a fresh one continues from the handoff.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use loopgate_executor::EpisodeTools;
use loopgate_executor::HealthPolicy;
use loopgate_executor::ToolLimits;
use loopgate_executor::Workspace;
use loopgate_executor::{run_tool_loop, LoopEnd, LoopLimits};
use loopgate_models::{ChatClient, ChatMessage, ModelProfileConfig, Provider, RetryPolicy};
use loopgate_test_support::{Reply, Script, StandInModel};
use serde_json::json;

const MODEL: &str = "standin-inflating";
const NOTES: &str = "## Done\na.txt and b.txt\n## Next steps\nfinish";

fn script() -> Script {
    let write = |path: &str, content: &str| {
        Reply::tool_call("write_file", json!({"path": path, "content": content}))
    };
    Script::new()
        .replies(
            MODEL,
            [
                Reply::with_usage(300, 10, write("a.txt", "A")),
                // 860 of a 1000-token window: below the health threshold.
                Reply::with_usage(850, 10, write("b.txt", "B")),
                Reply::with_usage(900, 10, write("progress.md", NOTES)),
            ],
        )
        .fallback(
            MODEL,
            Reply::dynamic(|request| {
                let text = request.to_string();
                let fresh = text.contains("Context reset 1")
                    && text.contains("a.txt and b.txt")
                    && !text.contains("write the file progress.md");
                if fresh {
                    Reply::with_usage(
                        200,
                        5,
                        Reply::tool_call("finish", json!({"summary": "continued"})),
                    )
                } else {
                    Reply::content("the old context came back")
                }
            }),
        )
}

#[tokio::test]
async fn inflating_context_resets_through_every_adapter() -> anyhow::Result<()> {
    for (provider, stream) in [
        (Provider::OpenAi, false),
        (Provider::OpenAi, true),
        (Provider::Anthropic, false),
        (Provider::Anthropic, true),
    ] {
        let server = StandInModel::start(script()).await?;
        let profile = ModelProfileConfig {
            provider,
            base_url: server.base_url(),
            model: MODEL.into(),
            timeout_secs: 10,
            stream,
            context_window: Some(1000),
            ..ModelProfileConfig::default()
        }
        .resolve("inflating", &|_| None)?;
        let client =
            ChatClient::from_profile(&profile)?.with_retry_policy(RetryPolicy::no_retries());
        let dir = tempfile::tempdir()?;
        let tools = EpisodeTools::new(Workspace::new(dir.path())?, ToolLimits::default());
        let limits = LoopLimits {
            attempt: 1,
            max_steps: 10,
            episode: Duration::from_secs(30),
            health: HealthPolicy::for_window(profile.context_window),
            retrying: false,
            max_tokens: None,
        };
        let prompt = vec![
            ChatMessage::system("You are a coding agent."),
            ChatMessage::user("Write a, b, c."),
        ];
        let report = run_tool_loop(&client, &tools, prompt, limits).await;
        let case = format!("{provider:?} stream={stream}");
        assert!(
            matches!(&report.end, LoopEnd::Finished { summary } if summary == "continued"),
            "{case}: {report:?}"
        );
        assert_eq!((report.resets, report.steps), (1, 4), "{case}");
        assert_eq!(report.usage.input_tokens, 300 + 850 + 900 + 200, "{case}");
        let progress = std::fs::read_to_string(dir.path().join("progress.md"))?;
        assert!(
            progress.starts_with("## Done\na.txt and b.txt"),
            "{case}: {progress}"
        );
        assert_eq!(server.request_count(MODEL), 4, "{case}");
    }
    Ok(())
}
