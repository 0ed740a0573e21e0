//! One episode: materialize the base snapshot into a fresh directory, run the agent the request
//! names (the built-in tool loop with a model profile, or an external CLI agent profile), freeze
//! the workspace, and turn it all into an `ExecOutcome`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use loopgate_common::prompts::executor;
use loopgate_common::snapshot::{diff_manifests, Manifest, SnapshotId};
use loopgate_common::usage::Usage;
use loopgate_common::wire::{ExecOutcome, ExecRequest};
use loopgate_models::{ChatClient, ChatMessage, ModelProfile};
use loopgate_snapshot::{FreezeRules, SnapshotError, SnapshotStore};

use crate::agent_config::AgentProfile;
use crate::agent_episode::run_agent_episode;
use crate::context_health::HealthPolicy;
use crate::context_reset::HANDOFF_FILE;
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
    /// Model profiles (the built-in tool loop) by name.
    pub models: BTreeMap<String, ModelProfile>,
    /// CLI agent profiles by name.
    pub agents: BTreeMap<String, AgentProfile>,
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
    pub(crate) fn failed(error: impl Into<String>, usage: Usage) -> Self {
        EpisodeEnd::Outcome {
            outcome: ExecOutcome::Failed {
                error: error.into(),
            },
            usage,
        }
    }
}

/// Store errors worth a redelivery rather than a failed round.
pub(crate) fn is_transient(err: &SnapshotError) -> bool {
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

/// Run one episode with the agent or model named by the request's `executor_profile`.
pub async fn run_episode(req: &ExecRequest, attempt: u64, env: &EpisodeEnv) -> EpisodeEnd {
    if let Some(agent) = env.agents.get(&req.executor_profile) {
        return run_agent_episode(req, attempt, env, agent).await;
    }
    let Some(profile) = env.models.get(&req.executor_profile) else {
        let known: Vec<&str> = env
            .models
            .keys()
            .chain(env.agents.keys())
            .map(String::as_str)
            .collect();
        return EpisodeEnd::failed(
            format!(
                "unknown executor profile '{}'; this worker has: {}",
                req.executor_profile,
                if known.is_empty() {
                    "(none)".to_string()
                } else {
                    known.join(", ")
                }
            ),
            Usage::default(),
        );
    };
    let client = match ChatClient::from_profile(profile) {
        Ok(client) => client,
        Err(err) => {
            return EpisodeEnd::failed(
                format!("model profile '{}': {err}", req.executor_profile),
                Usage::default(),
            )
        }
    };
    run_episode_with(req, attempt, env, &client).await
}

/// A fresh directory for the episode under the work dir (removed when dropped).
pub(crate) fn episode_dir(
    req: &ExecRequest,
    attempt: u64,
    env: &EpisodeEnv,
) -> Result<tempfile::TempDir, EpisodeEnd> {
    tempfile::Builder::new()
        .prefix(&episode_dir_prefix(req, attempt))
        .tempdir_in(&env.work_dir)
        .map_err(|err| EpisodeEnd::Retry {
            reason: format!(
                "creating an episode dir under {}: {err}",
                env.work_dir.display()
            ),
        })
}

pub(crate) fn remove_episode_dir(dir: tempfile::TempDir) {
    if let Err(err) = dir.close() {
        tracing::warn!(error = %err, "removing the episode dir failed");
    }
}

/// The base snapshot, materialized into `dir`.
pub(crate) async fn materialize_base(
    env: &EpisodeEnv,
    req: &ExecRequest,
    dir: &Path,
) -> Result<Manifest, EpisodeEnd> {
    match env.store.materialize(&req.base_snapshot, dir).await {
        Ok(manifest) => Ok(manifest),
        Err(err) if is_transient(&err) => Err(EpisodeEnd::Retry {
            reason: format!("materializing base snapshot: {err}"),
        }),
        Err(err) => Err(EpisodeEnd::failed(
            format!("base snapshot {}: {err}", req.base_snapshot),
            Usage::default(),
        )),
    }
}

/// Freezes `dir`; the candidate and how many paths differ from `base`.
pub(crate) async fn freeze_dir(
    env: &EpisodeEnv,
    dir: &Path,
    base: &Manifest,
    usage: Usage,
    ignore: &[String],
) -> Result<(SnapshotId, u32), EpisodeEnd> {
    match env
        .store
        .freeze(dir, &FreezeRules::with_ignores(ignore))
        .await
    {
        Ok(frozen) => {
            let files_changed = diff_manifests(base, &frozen.manifest).len();
            tracing::info!(
                candidate = %frozen.id,
                files = frozen.files,
                files_changed,
                bytes_uploaded = frozen.bytes_uploaded,
                "workspace frozen"
            );
            loopgate_telemetry::metrics::Metrics::new()
                .snapshot_uploaded_bytes
                .add(frozen.bytes_uploaded + frozen.manifest_bytes_uploaded, &[]);
            Ok((frozen.id, u32::try_from(files_changed).unwrap_or(u32::MAX)))
        }
        Err(err) if is_transient(&err) => Err(EpisodeEnd::Retry {
            reason: format!("freezing the workspace: {err}"),
        }),
        Err(err) => Err(EpisodeEnd::failed(
            format!("cannot freeze the workspace: {err}"),
            usage,
        )),
    }
}

/// Same as [`run_episode`] with a given model (the built-in tool loop).
pub async fn run_episode_with<M: ChatModel>(
    req: &ExecRequest,
    attempt: u64,
    env: &EpisodeEnv,
    model: &M,
) -> EpisodeEnd {
    let dir = match episode_dir(req, attempt, env) {
        Ok(dir) => dir,
        Err(end) => return end,
    };
    let end = episode_in_dir(req, env, model, dir.path()).await;
    remove_episode_dir(dir);
    end
}

async fn episode_in_dir<M: ChatModel>(
    req: &ExecRequest,
    env: &EpisodeEnv,
    model: &M,
    dir: &Path,
) -> EpisodeEnd {
    let base = match materialize_base(env, req, dir).await {
        Ok(manifest) => manifest,
        Err(end) => return end,
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
        health: HealthPolicy::for_window(model.context_window()),
    };
    let tools = EpisodeTools::new(workspace, env.tools.clone())
        .with_write_scope(req.increment.write_scope.clone());
    let handoff = HandoffFile::capture(dir);
    let report = run_tool_loop(model, &tools, prompt, limits).await;
    if let Err(err) = handoff.restore() {
        return EpisodeEnd::Retry {
            reason: format!("restoring {HANDOFF_FILE} before freezing: {err}"),
        };
    }
    tracing::info!(
        steps = report.steps,
        tool_calls = report.tool_calls,
        input_tokens = report.usage.input_tokens,
        output_tokens = report.usage.output_tokens,
        cost_micros = report.usage.cost_micros,
        resets = report.resets,
        compactions = report.compactions,
        end = end_label(&report.end),
        "tool loop ended"
    );
    let usage = report.usage;
    let Some((mut summary, claimed_done)) = summarize(&report) else {
        let error = match report.end {
            LoopEnd::ModelFailed(err) => format!(
                "model call failed after {} tool calls: {}: {err}",
                report.tool_calls,
                err.kind().describe()
            ),
            _ => "episode produced nothing".to_string(),
        };
        return EpisodeEnd::failed(error, usage);
    };
    if report.resets > 0 {
        summary.push_str(&format!(
            " (context resets: {}; handoffs via {HANDOFF_FILE})",
            report.resets
        ));
    }
    match freeze_dir(env, dir, &base, usage, &req.ignore).await {
        Ok((candidate, files_changed)) => EpisodeEnd::Outcome {
            outcome: ExecOutcome::Frozen {
                candidate,
                summary,
                claimed_done,
                steps: report.steps,
                tool_calls: report.tool_calls,
                files_changed,
            },
            usage,
        },
        Err(end) => end,
    }
}

/// Keeps the handoff file out of the frozen snapshot: removed when the base had none, put
/// back as it was when the base had one.
struct HandoffFile {
    path: PathBuf,
    original: Option<Vec<u8>>,
}

impl HandoffFile {
    fn capture(dir: &Path) -> Self {
        let path = dir.join(HANDOFF_FILE);
        let original = std::fs::read(&path).ok();
        HandoffFile { path, original }
    }

    fn restore(self) -> std::io::Result<()> {
        match &self.original {
            Some(bytes) => std::fs::write(&self.path, bytes),
            None => match std::fs::remove_file(&self.path) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err),
                _ => Ok(()),
            },
        }
    }
}

/// The summary and `claimed_done` to freeze with, or None when the round fails instead: the
/// model failed before any tool ran, or with an error that ends the episode (auth, quota), so
/// the manager sees the reason rather than a candidate to audit.
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
        LoopEnd::ModelFailed(err) if report.tool_calls == 0 || err.ends_episode() => None,
        LoopEnd::ModelFailed(err) => Some((
            format!(
                "episode ended early after {} tool calls: {}: {err}",
                report.tool_calls,
                err.kind().describe()
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
            resets: 0,
            compactions: 0,
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
        let refused = LoopEnd::ModelFailed(ModelError::Status {
            code: 401,
            body: "bad key".into(),
            retry_after: None,
        });
        assert!(summarize(&report(refused, 5)).is_none());
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
