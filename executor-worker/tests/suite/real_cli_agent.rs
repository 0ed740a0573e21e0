//! One episode with a REAL CLI agent, only when asked for: `LOOPGATE_REAL_AGENT=opencode|codex|
//! claude` (never when `CI` is set). The agent runs against an OpenAI-compatible server at
//! `LOOPGATE_REAL_AGENT_MODEL_URL` (default `http://127.0.0.1:8080/v1`, e.g. the local
//! llama-server from scripts/model-server.sh) with model `LOOPGATE_REAL_AGENT_MODEL`
//! (default `qwen2.5-coder-0.5b-instruct`); Claude Code uses its own login / ANTHROPIC_API_KEY.
//! Budget `LOOPGATE_REAL_AGENT_SECS` (default 600). The executable comes from
//! `LOOPGATE_REAL_AGENT_COMMAND` or `~/.cache/loopgate/bin` (scripts/install-cli-agent.sh).
//! The outcome, usage and the transcript's path are printed; the test only asserts that the
//! episode ended with a result and a transcript (whether a small model manages the task
//! is the agent's business).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use crate::support;
use std::collections::BTreeMap;
use std::time::Instant;

use loopgate_executor::AgentProfileConfig;
use loopgate_executor::ToolLimits;
use loopgate_executor::{
    run_episode_transcribed, AgentIsolationEnv, EpisodeEnd, EpisodeEnv, SelfCheckEnv,
};
use loopgate_protocol::wire::ExecOutcome;
use loopgate_snapshot::SnapshotStore;
use loopgate_test_support::{cache_dir, NatsServer};
use loopgate_transport::{Bus, BusOptions};
use support::request;

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The `[agents.real]` table for the agent under test, as an operator would write it.
fn agent_toml(kind: &str, command: &str, url: &str, model: &str) -> String {
    let xdg = cache_dir().join("agents").join("xdg-cache");
    match kind {
        "opencode" => {
            let config = serde_json::json!({
                "$schema": "https://opencode.ai/config.json",
                "autoupdate": false,
                "share": "disabled",
                "model": format!("local/{model}"),
                "permission": {"edit": "allow", "bash": "allow"},
                "provider": {"local": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "local",
                    "options": {"baseURL": url},
                    "models": {model: {"name": model, "tool_call": true}}
                }}
            });
            format!(
                "kind = \"opencode\"\ncommand = {command:?}\n[set_env]\nXDG_CACHE_HOME = {:?}\nOPENCODE_CONFIG_CONTENT = {:?}\n",
                xdg.display().to_string(),
                config.to_string()
            )
        }
        "codex" => format!(
            "kind = \"codex\"\ncommand = {command:?}\nmodel = {model:?}\nargs = [\"-c\", \"model_provider=\\\"local\\\"\", \
             \"-c\", \"model_providers.local.name=\\\"local\\\"\", \"-c\", \"model_providers.local.base_url=\\\"{url}\\\"\", \
             \"-c\", \"model_providers.local.wire_api=\\\"responses\\\"\"]\n"
        ),
        _ => format!(
            "kind = \"claude_code\"\ncommand = {command:?}\nenv = [\"ANTHROPIC_API_KEY\"]\nargs = [\"--permission-mode\", \"bypassPermissions\"]\n"
        ),
    }
}

#[tokio::test]
async fn real_cli_agent_episode() -> anyhow::Result<()> {
    let Some(kind) = var("LOOPGATE_REAL_AGENT") else {
        return Ok(());
    };
    if var("CI").is_some() {
        return Ok(());
    }
    let binary = match kind.as_str() {
        "claude" | "claude_code" => "claude",
        other => other,
    };
    let command = var("LOOPGATE_REAL_AGENT_COMMAND")
        .unwrap_or_else(|| cache_dir().join("bin").join(binary).display().to_string());
    let url =
        var("LOOPGATE_REAL_AGENT_MODEL_URL").unwrap_or_else(|| "http://127.0.0.1:8080/v1".into());
    let model =
        var("LOOPGATE_REAL_AGENT_MODEL").unwrap_or_else(|| "qwen2.5-coder-0.5b-instruct".into());
    let secs: u64 = var("LOOPGATE_REAL_AGENT_SECS")
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);

    let config: AgentProfileConfig = toml::from_str(&agent_toml(binary, &command, &url, &model))?;
    let profile = config.resolve("real", &|name| std::env::var(name).ok())?;
    let nats = NatsServer::start().await?;
    let bus = Bus::connect(&nats.url(), "loopgate", BusOptions::default()).await?;
    bus.ensure_topology().await?;
    let store = SnapshotStore::from_jetstream(bus.jetstream(), bus.request_timeout()).await?;
    let scratch = tempfile::tempdir()?;
    let env = EpisodeEnv {
        store: store.clone(),
        work_dir: scratch.path().to_path_buf(),
        tools: ToolLimits::default(),
        models: BTreeMap::new(),
        agents: BTreeMap::from([("real".to_string(), profile)]),
        self_check: SelfCheckEnv::unisolated("test"),
        agent: AgentIsolationEnv::unsandboxed("test"),
        workspaces: None,
        overlays: false,
    };
    let base = store
        .freeze_files(vec![(
            "README.md".to_string(),
            0o644,
            b"# hello project\n".to_vec(),
        )])
        .await?
        .id;
    let mut req = request("real-agent", &base, "real", secs);
    req.contract.goal = "A Python script hello.py that prints hello".into();
    req.increment.objective = "Create hello.py containing exactly: print('hello')".into();

    let started = Instant::now();
    let (end, transcript) = run_episode_transcribed(&req, 1, &env, Vec::new()).await;
    eprintln!(
        "real agent {binary} ({model} at {url}) ended after {:?}",
        started.elapsed()
    );
    let EpisodeEnd::Outcome { outcome, usage } = end else {
        panic!("no result: {end:?}")
    };
    eprintln!("usage: {usage:?}");
    match &outcome {
        ExecOutcome::Frozen {
            candidate,
            summary,
            claimed_done,
            steps,
            tool_calls,
            files_changed,
            ..
        } => {
            eprintln!(
                "frozen {candidate}: claimed_done={claimed_done} steps={steps} tool_calls={tool_calls} \
                 files_changed={files_changed}\nsummary: {summary}"
            );
            if let Some(entry) = store.manifest(candidate).await?.get("hello.py") {
                eprintln!(
                    "hello.py: {:?}",
                    String::from_utf8_lossy(&store.blob(&entry.sha256).await?)
                );
            }
        }
        ExecOutcome::Failed { error } => eprintln!("failed: {error}"),
    }
    let transcript = serde_json::to_vec_pretty(&transcript.expect("a transcript"))?;
    let saved =
        std::env::temp_dir().join(format!("loopgate-real-{binary}-{secs}s-transcript.json"));
    std::fs::write(&saved, &transcript)?;
    eprintln!(
        "transcript ({} bytes): {}",
        transcript.len(),
        saved.display()
    );
    Ok(())
}
