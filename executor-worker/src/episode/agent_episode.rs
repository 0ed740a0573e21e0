//! An episode run by an external CLI agent: the increment becomes its prompt, it runs in the
//! materialized workspace under the episode's time budget, and the workspace is frozen. What it
//! printed goes line by line to the episode's [`Observer`] (redacted and bounded there, stored
//! in the evidence bucket as the round's transcript); its raw output is stored nowhere. The
//! summary or error taken from its output is redacted the same way.

use std::path::Path;
use std::time::Duration;

use loopgate_common::redact::redact_text;
use loopgate_protocol::snapshot::Manifest;
use loopgate_protocol::usage::Usage;
use loopgate_protocol::wire::{ExecOutcome, ExecRequest};
use loopgate_workspace_walk::RootDir;

use crate::agents::config::AgentProfile;
use crate::agents::run::{
    run_agent, AgentExit, AgentLimits, AgentRun, DEFAULT_TRANSCRIPT_CAP_BYTES,
};
use crate::agents::templates::agent_prompt;
use crate::episode::env::{EpisodeEnd, EpisodeEnv};
use crate::episode::workspace_dir::{
    episode_dir, freeze_dir, materialize_base, remove_episode_dir,
};
use crate::observe::Observer;
use crate::tool_loop::summary_from_text;

/// State directories agents create in the project; dropped before freezing unless the base
/// snapshot already had them.
const AGENT_STATE_DIRS: [&str; 3] = [".claude", ".codex", ".opencode"];

/// What the run amounts to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AgentVerdict {
    pub summary: String,
    pub claimed_done: bool,
    /// Why it failed, when it did.
    pub failure: Option<String>,
}

/// Judges a finished run: a zero exit without a reported failure is a success; a timeout, a
/// signal, a non-zero exit or a reported failure is not.
pub(crate) fn agent_verdict(agent: &str, run: &AgentRun) -> AgentVerdict {
    let report = &run.report;
    let last_words = report.final_message.as_deref().map(summary_from_text);
    let stderr_line = run
        .stderr_tail
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| l.chars().take(500).collect::<String>());
    let failure = match &run.exit {
        AgentExit::TimedOut(after) => Some(format!(
            "agent {agent} ran past its time budget of {}s; its process group was killed",
            after.as_secs()
        )),
        AgentExit::Signalled => Some(format!("agent {agent} was killed by a signal")),
        AgentExit::Exited(0) if report.success != Some(false) && report.error.is_none() => None,
        AgentExit::Exited(code) => {
            let reason = report
                .error
                .clone()
                .or_else(|| report.warning.clone())
                .or(stderr_line)
                .unwrap_or_else(|| "no error message".to_string());
            Some(format!("agent {agent} failed (exit code {code}): {reason}"))
        }
    };
    match failure {
        None => AgentVerdict {
            summary: last_words
                .filter(|w| !w.is_empty())
                .unwrap_or_else(|| format!("agent {agent} finished without a summary")),
            claimed_done: true,
            failure: None,
        },
        Some(failure) => AgentVerdict {
            summary: match last_words.filter(|w| !w.is_empty()) {
                Some(words) => format!("{failure}. Its last message: {words}"),
                None => failure.clone(),
            },
            claimed_done: false,
            failure: Some(failure),
        },
    }
}

pub(crate) async fn run_agent_episode(
    req: &ExecRequest,
    attempt: u64,
    env: &EpisodeEnv,
    agent: &AgentProfile,
    observer: &Observer,
) -> EpisodeEnd {
    let dir = match episode_dir(req, attempt, env) {
        Ok(dir) => dir,
        Err(end) => return end,
    };
    let home = match tempfile::Builder::new()
        .prefix("agent-home-")
        .tempdir_in(&env.work_dir)
    {
        Ok(home) => home,
        Err(err) => {
            remove_episode_dir(dir);
            return EpisodeEnd::Retry {
                reason: format!("creating the agent's home dir: {err}"),
            };
        }
    };
    let end = agent_in_dir(req, env, agent, dir.path(), home.path(), observer).await;
    remove_episode_dir(dir);
    remove_episode_dir(home);
    end
}

async fn agent_in_dir(
    req: &ExecRequest,
    env: &EpisodeEnv,
    agent: &AgentProfile,
    dir: &Path,
    home: &Path,
    observer: &Observer,
) -> EpisodeEnd {
    let materialized = match materialize_base(env, req, dir).await {
        Ok(materialized) => materialized,
        Err(end) => return end,
    };
    let base = &materialized.base;
    let files: Vec<String> = base.entries.iter().map(|e| e.path.clone()).collect();
    let limits = AgentLimits {
        budget: Duration::from_secs(req.episode_secs.max(1)),
        shell_env: env.tools.shell_env.clone(),
        transcript_cap_bytes: DEFAULT_TRANSCRIPT_CAP_BYTES,
        sandbox: env.agent.sandbox.clone(),
        network: env.agent.network.cli_agents,
    };
    let run = match run_agent(agent, &agent_prompt(req, &files), dir, home, &limits).await {
        Ok(run) => run,
        Err(err) => return EpisodeEnd::failed(err.to_string(), Usage::default()),
    };
    observer.agent_done();
    let usage = run.report.usage.unwrap_or_default();
    // The values passed through to this agent are secrets whatever the observer knows.
    let passed: Vec<&str> = agent.env.iter().map(|(_, value)| value.as_str()).collect();
    for line in String::from_utf8_lossy(&run.transcript).lines() {
        observer.output(&redact_text(line, &passed));
    }
    let verdict = redacted_verdict(agent_verdict(&agent.name, &run), &passed, observer);
    tracing::info!(
        agent = %agent.name,
        kind = agent.kind.as_str(),
        exit = ?run.exit,
        elapsed_ms = u64::try_from(run.elapsed.as_millis()).unwrap_or(u64::MAX),
        turns = run.report.turns,
        tool_calls = run.report.tool_calls,
        input_tokens = usage.input_tokens,
        output_tokens = usage.output_tokens,
        cached_prompt_tokens = usage.cached_prompt_tokens,
        cost_micros = usage.cost_micros,
        failure = verdict.failure.as_deref().unwrap_or(""),
        "agent ended"
    );
    drop_agent_state(dir, base);
    let (candidate, files_changed) =
        match freeze_dir(env, dir, materialized, usage, &req.ignore).await {
            Ok(frozen) => frozen,
            Err(end) => return end,
        };
    match verdict.failure {
        Some(failure) if files_changed == 0 => EpisodeEnd::failed(failure, usage),
        _ => EpisodeEnd::Outcome {
            outcome: ExecOutcome::Frozen {
                candidate,
                summary: verdict.summary,
                claimed_done: verdict.claimed_done,
                steps: run.report.turns,
                tool_calls: run.report.tool_calls,
                files_changed,
                // CLI agents run their own loop and never call loopgate's `finish`.
                self_check_refusals: 0,
            },
            usage,
        },
    }
}

/// `verdict` with the worker's known secrets (the observer's) and the values the agent was
/// passed (`passed`) redacted from its texts, which quote the agent's own output.
fn redacted_verdict(verdict: AgentVerdict, passed: &[&str], observer: &Observer) -> AgentVerdict {
    let redact = |text: &str| observer.redact(&redact_text(text, passed));
    AgentVerdict {
        summary: redact(&verdict.summary),
        claimed_done: verdict.claimed_done,
        failure: verdict.failure.as_deref().map(redact),
    }
}

/// Remove the agents' state directories the base did not have, beneath `dir` following no
/// symlink (one the agent left there is removed itself, its target untouched).
fn drop_agent_state(dir: &Path, base: &Manifest) {
    let Ok(root) = RootDir::open(dir) else {
        return;
    };
    for state_dir in AGENT_STATE_DIRS {
        let prefix = format!("{state_dir}/");
        if base.entries.iter().any(|e| e.path.starts_with(&prefix)) {
            continue;
        }
        let removed = match root.symlink_metadata(state_dir) {
            Ok(meta) if meta.is_dir() => root.remove_dir_all(state_dir),
            // A link to a directory: the link goes, what it points to stays.
            Ok(meta) if meta.file_type().is_symlink() && dir.join(state_dir).is_dir() => {
                root.remove_file(state_dir)
            }
            _ => continue,
        };
        if let Err(err) = removed {
            tracing::warn!(error = %err, dir = state_dir, "removing agent state failed");
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::agents::transcript::AgentReport;

    fn run(
        exit: AgentExit,
        final_message: Option<&str>,
        success: Option<bool>,
        error: Option<&str>,
        stderr: &str,
    ) -> AgentRun {
        AgentRun {
            exit,
            report: AgentReport {
                final_message: final_message.map(str::to_string),
                success,
                error: error.map(str::to_string),
                ..AgentReport::default()
            },
            transcript: Vec::new(),
            stderr_tail: stderr.to_string(),
            elapsed: Duration::from_secs(1),
        }
    }

    #[test]
    fn verdict_table() {
        let cases: Vec<(AgentRun, &str, bool, Option<&str>)> = vec![
            (run(AgentExit::Exited(0), Some("Wrote hello.py"), Some(true), None, ""), "Wrote hello.py", true, None),
            (run(AgentExit::Exited(0), None, None, None, ""), "agent cx finished without a summary", true, None),
            (
                run(AgentExit::Exited(0), Some("hm"), Some(false), Some("max turns"), ""),
                "agent cx failed (exit code 0): max turns. Its last message: hm",
                false,
                Some("agent cx failed (exit code 0): max turns"),
            ),
            (
                run(AgentExit::Exited(2), None, None, None, "warn\nError: 401 Unauthorized\n\n"),
                "agent cx failed (exit code 2): Error: 401 Unauthorized",
                false,
                Some("agent cx failed (exit code 2): Error: 401 Unauthorized"),
            ),
            (
                run(AgentExit::TimedOut(Duration::from_secs(30)), Some("still going"), None, None, ""),
                "agent cx ran past its time budget of 30s; its process group was killed. Its last message: still going",
                false,
                Some("agent cx ran past its time budget of 30s; its process group was killed"),
            ),
            (
                run(AgentExit::Signalled, None, None, None, ""),
                "agent cx was killed by a signal",
                false,
                Some("agent cx was killed by a signal"),
            ),
        ];
        for (run, summary, done, failure) in cases {
            let verdict = agent_verdict("cx", &run);
            assert_eq!(verdict.summary, summary, "{run:?}");
            assert_eq!(verdict.claimed_done, done, "{run:?}");
            assert_eq!(verdict.failure.as_deref(), failure, "{run:?}");
        }
    }
}
