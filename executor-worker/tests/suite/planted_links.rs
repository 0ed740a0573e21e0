//! Worker-side writes never follow a path the agent planted: through the executor's real
//! start-up (sandbox probed), the real OpenAI adapter against a stand-in model and a real
//! nats-server, the agent's `shell` replaces the base snapshot's `progress.md` with a symlink to
//! a file outside the workspace, then ends the episode. The handoff file is put back as the base
//! had it before the freeze (what every tool-loop episode does): the outside file stays
//! untouched, and the candidate holds the base's `progress.md` as a regular file. Run with the
//! sandbox as the host allows (bubblewrap here) and with `sandbox = "off"`, which runs
//! everywhere.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use anyhow::Context;
use loopgate_executor::{prepare, run_episode, EpisodeEnd};
use loopgate_executor::{ExecutorFile, ExternalInputs};
use loopgate_protocol::wire::ExecOutcome;
use loopgate_test_support::{NatsServer, Reply, Script, StandInModel};
use loopgate_transport::{Bus, BusOptions};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const MODEL: &str = "standin-planted";
const BASE_NOTES: &str = "## Done\nnothing yet\n";
const OUTSIDE: &str = "the worker must never write here\n";

fn script(outside: &str, end: Reply) -> Script {
    let plant = format!("ln -sfn {outside} progress.md && ls -l progress.md");
    Script::new().replies(
        MODEL,
        [Reply::tool_call("shell", json!({ "command": plant })), end],
    )
}

/// One episode whose agent plants the link; the candidate and the outside file's content.
async fn planted_episode(sandbox_line: &str, end: Reply, max_steps: u32) -> anyhow::Result<()> {
    let nats = NatsServer::start().await?;
    let scratch = tempfile::tempdir()?;
    let outside = scratch.path().join("outside.txt");
    std::fs::write(&outside, OUTSIDE)?;
    let model = StandInModel::start(script(&outside.display().to_string(), end)).await?;
    Bus::connect(&nats.url(), "loopgate", BusOptions::default())
        .await?
        .ensure_topology()
        .await?;
    let text = format!(
        "[nats]\nurl = \"{}\"\n[executor]\nwork_dir = \"{}\"\n{sandbox_line}\n\
         [models.standin]\nbase_url = \"{}\"\nmodel = \"{MODEL}\"\ntimeout_secs = 10\n",
        nats.url(),
        scratch.path().join("work").display(),
        model.base_url()
    );
    let settings = ExecutorFile::parse(&text, "test")?.resolve(&ExternalInputs {
        pid: 1,
        temp_dir: std::env::temp_dir(),
        ..ExternalInputs::default()
    })?;
    let ctx = prepare(&settings, &CancellationToken::new())
        .await?
        .context("start-up was cancelled")?;
    let store = ctx.episode.store.clone();
    let base = support::freeze_text_files(&store, &[("progress.md", BASE_NOTES)]).await?;
    let mut req = support::request("run-planted", &base, "standin", 60);
    req.max_steps = max_steps;
    let end = run_episode(&req, 1, &ctx.episode).await;
    let case = format!("[{sandbox_line}] max_steps {max_steps}");
    // The link was planted: the shell's answer shows it.
    let told = model.requests(MODEL)[1].to_string();
    assert!(told.contains("progress.md ->"), "{case}: {told}");
    assert_eq!(
        std::fs::read_to_string(&outside)?,
        OUTSIDE,
        "{case}: the worker wrote through the agent's symlink"
    );
    let EpisodeEnd::Outcome { outcome, .. } = end else {
        anyhow::bail!("{case}: no outcome: {end:?}");
    };
    let ExecOutcome::Frozen { candidate, .. } = outcome else {
        anyhow::bail!("{case}: episode failed: {outcome:?}");
    };
    assert_eq!(
        support::file_in(&store, &candidate, "progress.md")
            .await?
            .as_deref(),
        Some(BASE_NOTES),
        "{case}: the handoff file is put back as the base had it"
    );
    Ok(())
}

#[tokio::test]
async fn a_planted_progress_md_symlink_leaves_the_outside_file_untouched() -> anyhow::Result<()> {
    let finish = || Reply::tool_call("finish", json!({"summary": "planted"}));
    for sandbox in ["", "sandbox = \"off\""] {
        planted_episode(sandbox, finish(), 8).await?;
        // Ended without `finish`: a plain reply on the last step.
        planted_episode(sandbox, Reply::content("still working"), 2).await?;
    }
    Ok(())
}
