//! One episode: materialize the base snapshot into a fresh directory, run the tool loop with the
//! requested model profile, freeze the workspace, and turn it all into an `ExecOutcome`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use loopgate_common::prompts::executor;
use loopgate_common::snapshot::{diff_manifests, Manifest};
use loopgate_common::usage::Usage;
use loopgate_common::wire::{ExecOutcome, ExecRequest};
use loopgate_models::{ChatClient, ChatMessage, ModelProfile};
use loopgate_transport::{FreezeRules, SnapshotError, SnapshotStore};

use crate::settings::ToolLimits;
use crate::tool_dispatch::EpisodeTools;
use crate::tool_loop::{run_tool_loop, ChatModel, LoopEnd, LoopLimits, LoopReport};
use crate::workspace_tools::Workspace;

/// What an episode needs from the worker besides the request.
#[derive(Debug, Clone)]
pub struct EpisodeEnv {
    pub store: SnapshotStore,
    pub work_dir: PathBuf,
    pub tools: ToolLimits,
    pub models: BTreeMap<String, ModelProfile>,
}

/// How an episode ended, from the worker loop's point of view.
#[derive(Debug)]
pub enum EpisodeEnd {
    /// Publish this result.
    Outcome { outcome: ExecOutcome, usage: Usage },
    /// Infrastructure trouble (object store unreachable, local disk): let JetStream redeliver.
    Retry { reason: String },
}

impl EpisodeEnd {
    fn failed(error: impl Into<String>) -> Self {
        EpisodeEnd::Outcome {
            outcome: ExecOutcome::Failed {
                error: error.into(),
            },
            usage: Usage::default(),
        }
    }
}

/// Store errors worth a redelivery rather than a failed round.
fn is_transient(err: &SnapshotError) -> bool {
    matches!(
        err,
        SnapshotError::Store { .. } | SnapshotError::Timeout { .. } | SnapshotError::Io { .. }
    )
}

/// `<run>-r<round>-a<attempt>-`: the episode directory's prefix (a random suffix follows).
pub fn episode_dir_prefix(req: &ExecRequest, attempt: u64) -> String {
    let run: String = req
        .run_id
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{run}-r{}-a{attempt}-", req.round)
}

/// Run one episode with the model named by the request's `executor_profile`.
pub async fn run_episode(req: &ExecRequest, attempt: u64, env: &EpisodeEnv) -> EpisodeEnd {
    let Some(profile) = env.models.get(&req.executor_profile) else {
        let known: Vec<&str> = env.models.keys().map(String::as_str).collect();
        return EpisodeEnd::failed(format!(
            "unknown executor profile '{}'; this worker has: {}",
            req.executor_profile,
            if known.is_empty() {
                "(none)".to_string()
            } else {
                known.join(", ")
            }
        ));
    };
    let client = match ChatClient::from_profile(profile) {
        Ok(client) => client,
        Err(err) => {
            return EpisodeEnd::failed(format!("model profile '{}': {err}", req.executor_profile))
        }
    };
    run_episode_with(req, attempt, env, &client).await
}

/// Same as [`run_episode`] with a given model.
pub async fn run_episode_with<M: ChatModel>(
    req: &ExecRequest,
    attempt: u64,
    env: &EpisodeEnv,
    model: &M,
) -> EpisodeEnd {
    let dir = match tempfile::Builder::new()
        .prefix(&episode_dir_prefix(req, attempt))
        .tempdir_in(&env.work_dir)
    {
        Ok(dir) => dir,
        Err(err) => {
            return EpisodeEnd::Retry {
                reason: format!(
                    "creating an episode dir under {}: {err}",
                    env.work_dir.display()
                ),
            }
        }
    };
    let end = episode_in_dir(req, env, model, dir.path()).await;
    if let Err(err) = dir.close() {
        tracing::warn!(error = %err, "removing the episode dir failed");
    }
    end
}

async fn episode_in_dir<M: ChatModel>(
    req: &ExecRequest,
    env: &EpisodeEnv,
    model: &M,
    dir: &Path,
) -> EpisodeEnd {
    let base = match env.store.materialize(&req.base_snapshot, dir).await {
        Ok(manifest) => manifest,
        Err(err) if is_transient(&err) => {
            return EpisodeEnd::Retry {
                reason: format!("materializing base snapshot: {err}"),
            }
        }
        Err(err) => {
            return EpisodeEnd::failed(format!("base snapshot {}: {err}", req.base_snapshot))
        }
    };
    let workspace = match Workspace::new(dir) {
        Ok(ws) => ws,
        Err(err) => {
            return EpisodeEnd::Retry {
                reason: err.to_string(),
            }
        }
    };
    let files: Vec<String> = base.entries.iter().map(|e| e.path.clone()).collect();
    let prompt = vec![
        ChatMessage::system(executor::SYSTEM),
        ChatMessage::user(executor::task_prompt(req, &files)),
    ];
    let limits = LoopLimits {
        max_steps: req.max_steps,
        episode: Duration::from_secs(req.episode_secs.max(1)),
    };
    let tools = EpisodeTools::new(workspace, env.tools.clone());
    let report = run_tool_loop(model, &tools, prompt, limits).await;
    tracing::info!(
        steps = report.steps,
        tool_calls = report.tool_calls,
        input_tokens = report.usage.input_tokens,
        output_tokens = report.usage.output_tokens,
        end = end_label(&report.end),
        "tool loop ended"
    );
    let usage = report.usage;
    let Some((summary, claimed_done)) = summarize(&report) else {
        let error = match report.end {
            LoopEnd::ModelFailed(err) => format!("model call failed before any tool ran: {err}"),
            _ => "episode produced nothing".to_string(),
        };
        return EpisodeEnd::Outcome {
            outcome: ExecOutcome::Failed { error },
            usage,
        };
    };
    freeze(env, dir, &base, summary, claimed_done, &report).await
}

async fn freeze(
    env: &EpisodeEnv,
    dir: &Path,
    base: &Manifest,
    summary: String,
    claimed_done: bool,
    report: &LoopReport,
) -> EpisodeEnd {
    match env.store.freeze(dir, &FreezeRules::default()).await {
        Ok(frozen) => {
            let files_changed = diff_manifests(base, &frozen.manifest).len();
            tracing::info!(
                candidate = %frozen.id,
                files = frozen.files,
                files_changed,
                bytes_uploaded = frozen.bytes_uploaded,
                "workspace frozen"
            );
            EpisodeEnd::Outcome {
                outcome: ExecOutcome::Frozen {
                    candidate: frozen.id,
                    summary,
                    claimed_done,
                    steps: report.steps,
                    tool_calls: report.tool_calls,
                    files_changed: u32::try_from(files_changed).unwrap_or(u32::MAX),
                },
                usage: report.usage,
            }
        }
        Err(err) if is_transient(&err) => EpisodeEnd::Retry {
            reason: format!("freezing the workspace: {err}"),
        },
        Err(err) => EpisodeEnd::Outcome {
            outcome: ExecOutcome::Failed {
                error: format!("cannot freeze the workspace: {err}"),
            },
            usage: report.usage,
        },
    }
}

/// The summary and `claimed_done` to freeze with, or None when there is nothing to freeze (the
/// model failed before any tool ran).
pub fn summarize(report: &LoopReport) -> Option<(String, bool)> {
    let or_default = |s: &str, default: &str| {
        if s.is_empty() {
            default.to_string()
        } else {
            s.to_string()
        }
    };
    match &report.end {
        LoopEnd::Finished { summary } => Some((or_default(summary, "finished"), true)),
        LoopEnd::Replied { summary } => Some((
            or_default(summary, "the model ended without a summary"),
            false,
        )),
        LoopEnd::StepCap => Some(("step cap reached".to_string(), false)),
        LoopEnd::TimedOut(after) => Some((
            format!(
                "episode time limit of {}s reached; ended early",
                after.as_secs()
            ),
            false,
        )),
        LoopEnd::ModelFailed(_) if report.tool_calls == 0 => None,
        LoopEnd::ModelFailed(err) => Some((
            format!(
                "episode ended early after {} tool calls: model call failed: {err}",
                report.tool_calls
            ),
            false,
        )),
    }
}

fn end_label(end: &LoopEnd) -> &'static str {
    match end {
        LoopEnd::Finished { .. } => "finished",
        LoopEnd::Replied { .. } => "replied",
        LoopEnd::StepCap => "step_cap",
        LoopEnd::TimedOut(_) => "timed_out",
        LoopEnd::ModelFailed(_) => "model_failed",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use loopgate_models::ModelError;

    fn report(end: LoopEnd, tool_calls: u32) -> LoopReport {
        LoopReport {
            end,
            steps: 1,
            tool_calls,
            usage: Usage::default(),
        }
    }

    #[test]
    fn summarize_table() {
        let failed = || {
            LoopEnd::ModelFailed(ModelError::Timeout {
                timeout: Duration::from_secs(1),
            })
        };
        let cases: Vec<(LoopReport, Option<(&str, bool)>)> = vec![
            (
                report(
                    LoopEnd::Finished {
                        summary: "did it".into(),
                    },
                    2,
                ),
                Some(("did it", true)),
            ),
            (
                report(
                    LoopEnd::Finished {
                        summary: String::new(),
                    },
                    1,
                ),
                Some(("finished", true)),
            ),
            (
                report(
                    LoopEnd::Replied {
                        summary: "hm".into(),
                    },
                    0,
                ),
                Some(("hm", false)),
            ),
            (
                report(LoopEnd::StepCap, 9),
                Some(("step cap reached", false)),
            ),
            (report(failed(), 0), None),
        ];
        for (r, expected) in cases {
            let got = summarize(&r);
            assert_eq!(
                got.as_ref().map(|(s, d)| (s.as_str(), *d)),
                expected,
                "{r:?}"
            );
        }
        let (text, done) = summarize(&report(failed(), 3)).unwrap();
        assert!(text.starts_with("episode ended early after 3 tool calls"));
        assert!(!done);
    }

    #[test]
    fn dir_prefix_is_filename_safe() {
        let req: ExecRequest = serde_json::from_value(serde_json::json!({
            "run_id": "run/../x y", "generation": 1, "round": 4, "capability": "cli",
            "contract": {"goal": "g", "criteria": [], "protected_paths": [], "spec_hash": "h"},
            "increment": {"objective": "o"}, "base_snapshot": "b", "executor_profile": "p",
            "episode_secs": 5, "max_steps": 3
        }))
        .unwrap();
        assert_eq!(episode_dir_prefix(&req, 2), "run____x_y-r4-a2-");
    }
}
