//! An episode run by the built-in tool loop with a model profile.

use std::path::{Path, PathBuf};
use std::time::Duration;

use loopgate_models::ChatMessage;
use loopgate_protocol::snapshot::Manifest;
use loopgate_protocol::wire::{ExecOutcome, ExecRequest};
use loopgate_workspace_walk::{BeneathError, RootDir};

use crate::episode::env::{EpisodeEnd, EpisodeEnv};
use crate::episode::workspace_dir::{
    episode_dir, freeze_dir, materialize_base, remove_episode_dir,
};
use crate::observe::Observer;
use crate::prompt::previews::{preview_paths, FilePreview, PREVIEW_FILE_BYTES};
use crate::prompt::system::system_prompt;
use crate::prompt::task::task_prompt;
use crate::self_check::runner::SelfCheck;
use crate::tool_loop::context_health::HealthPolicy;
use crate::tool_loop::context_reset::HANDOFF_FILE;
use crate::tool_loop::prompt_fit::fewer_previews;
use crate::tool_loop::{
    run_tool_loop_observed, ChatModel, EpisodePrompt, LoopEnd, LoopLimits, LoopReport,
};
use crate::tools::browser::gui_tools::GuiTools;
use crate::tools::desktop::desktop_tools::DesktopTools;
use crate::tools::dispatch::EpisodeTools;
use crate::tools::workspace::Workspace;
use loopgate_protocol::gui::GuiBackend;

/// Same as [`crate::episode::run_episode`] with a given model (the built-in tool loop).
/// `observer` is told what the tool loop does.
pub(crate) async fn run_episode_with<M: ChatModel>(
    req: &ExecRequest,
    attempt: u64,
    env: &EpisodeEnv,
    model: &M,
    observer: Observer,
) -> EpisodeEnd {
    let dir = match episode_dir(req, attempt, env) {
        Ok(dir) => dir,
        Err(end) => return end,
    };
    let end = episode_in_dir(req, env, model, dir.path(), observer).await;
    remove_episode_dir(dir);
    end
}

async fn episode_in_dir<M: ChatModel>(
    req: &ExecRequest,
    env: &EpisodeEnv,
    model: &M,
    dir: &Path,
    observer: Observer,
) -> EpisodeEnd {
    let materialized = match materialize_base(env, req, dir).await {
        Ok(materialized) => materialized,
        Err(end) => return end,
    };
    let base = &materialized.base;
    let (tools, prompt) = match episode_tools_and_prompt(req, env, dir, base).await {
        Ok(prepared) => prepared,
        Err(end) => return end,
    };
    let limits = LoopLimits {
        max_steps: req.max_steps,
        episode: Duration::from_secs(req.episode_secs.max(1)),
        health: HealthPolicy::for_window(model.context_window()),
        retrying: req
            .feedback
            .retries_failure(&req.increment.acceptance_checks),
        attempt: req.attempt,
        max_tokens: req.max_tokens,
    };
    let handoff = HandoffFile::capture(dir);
    let report = run_tool_loop_observed(model, &tools, prompt, limits, observer.clone()).await;
    observer.agent_done();
    if let Err(err) = handoff.restore() {
        return EpisodeEnd::Retry {
            reason: format!("restoring {HANDOFF_FILE} before freezing: {err}"),
        };
    }
    record_report(&report);
    let usage = report.usage;
    let (summary, claimed_done) = match frozen_summary(&report) {
        Ok(summary) => summary,
        Err(error) => return EpisodeEnd::failed(error, usage),
    };
    match freeze_dir(env, dir, materialized, usage, &req.ignore).await {
        Ok((candidate, files_changed)) => EpisodeEnd::Outcome {
            outcome: ExecOutcome::Frozen {
                candidate,
                summary,
                claimed_done,
                steps: report.steps,
                tool_calls: report.tool_calls,
                files_changed,
                self_check_refusals: report.self_check_refusals,
            },
            usage,
        },
        Err(end) => end,
    }
}

/// The episode's tools on the materialized workspace in `dir` (the browser's too in a gui
/// episode) and its prompt: the system prompt and the task with the workspace's files, with
/// smaller versions that leave out the file previews for a model whose window it exceeds.
async fn episode_tools_and_prompt(
    req: &ExecRequest,
    env: &EpisodeEnv,
    dir: &Path,
    base: &Manifest,
) -> Result<(EpisodeTools, EpisodePrompt), EpisodeEnd> {
    let workspace = Workspace::new(dir).map_err(|err| EpisodeEnd::Retry {
        reason: err.to_string(),
    })?;
    let files: Vec<String> = base.entries.iter().map(|e| e.path.clone()).collect();
    let sizes: Vec<(String, u64)> = base
        .entries
        .iter()
        .map(|e| (e.path.clone(), e.size))
        .collect();
    let previews = read_previews(dir, &preview_paths(req, &sizes)).await;
    let gui = (req.capability == loopgate_protocol::subjects::Capability::Gui)
        .then(|| req.gui.as_ref().map(|g| g.backend).unwrap_or_default());
    let failed = |err: crate::tools::browser::page_tool::GuiToolError| {
        EpisodeEnd::failed(format!("gui episode: {err}"), Default::default())
    };
    let gui_tools = match gui {
        Some(GuiBackend::Browser) => Some(
            GuiTools::start(dir, req.gui.as_ref(), &env.agent, &env.tools.shell_env)
                .map_err(failed)?,
        ),
        _ => None,
    };
    let desktop_tools = match gui {
        Some(GuiBackend::Desktop) => {
            Some(DesktopTools::start(dir, &env.agent, &env.tools.shell_env).map_err(failed)?)
        }
        _ => None,
    };
    let with_previews = |previews: &[FilePreview]| {
        vec![
            ChatMessage::system(system_prompt(gui)),
            ChatMessage::user(task_prompt(req, &files, previews)),
        ]
    };
    let prompt = fewer_previews(&previews, |p| p.text.len()).iter().fold(
        EpisodePrompt::new(with_previews(&previews)),
        |prompt, fewer| prompt.or_smaller(with_previews(fewer)),
    );
    let tools = EpisodeTools::new(workspace, env.tools.clone())
        .with_isolation(env.agent.clone())
        .with_write_scope(req.increment.write_scope.clone())
        .with_protected_paths(req.contract.protected_paths.clone())
        .with_self_check(SelfCheck::for_request(req, &env.self_check, &env.work_dir))
        .with_gui(gui_tools)
        .with_desktop(desktop_tools);
    Ok((tools, prompt))
}

/// The loop's report in the log, and its self-check refusals in the metrics.
fn record_report(report: &LoopReport) {
    tracing::info!(
        steps = report.steps,
        tool_calls = report.tool_calls,
        input_tokens = report.usage.input_tokens,
        output_tokens = report.usage.output_tokens,
        cached_prompt_tokens = report.usage.cached_prompt_tokens,
        cost_micros = report.usage.cost_micros,
        resets = report.resets,
        compactions = report.compactions,
        self_check_refusals = report.self_check_refusals,
        cut_calls = report.cut_calls,
        smaller_prompts = report.smaller_prompts,
        end = end_label(&report.end),
        "tool loop ended"
    );
    if report.self_check_refusals > 0 {
        loopgate_telemetry::metrics::Metrics::new()
            .self_check_refusals
            .add(u64::from(report.self_check_refusals), &[]);
    }
}

/// The summary and `claimed_done` to freeze with (see [`summarize`]), with the refusals and
/// resets noted; `Err` with the round's error when it fails instead.
fn frozen_summary(report: &LoopReport) -> Result<(String, bool), String> {
    let Some((mut summary, claimed_done)) = summarize(report) else {
        return Err(match &report.end {
            LoopEnd::ModelFailed(err) => format!(
                "model call failed after {} tool calls: {}: {err}",
                report.tool_calls,
                err.kind().describe()
            ),
            _ => "episode produced nothing".to_string(),
        });
    };
    if report.self_check_refusals > 0 {
        summary.push_str(&format!(
            " (self-check refused finish {}x)",
            report.self_check_refusals
        ));
    }
    if report.resets > 0 {
        summary.push_str(&format!(
            " (context resets: {}; handoffs via {HANDOFF_FILE})",
            report.resets
        ));
    }
    if report.smaller_prompts > 0 {
        summary.push_str(&format!(
            " (the first prompt exceeded the model's window: {} file previews left out)",
            report.smaller_prompts
        ));
    }
    Ok((summary, claimed_done))
}

/// Keeps the handoff file out of the frozen snapshot: removed when the base had none, put
/// back as it was when the base had one. Both beneath the workspace root, following no
/// symlink: whatever the agent left at `progress.md` (a symlink to a file outside included) is
/// removed or replaced by a rename, never written through.
struct HandoffFile {
    dir: PathBuf,
    original: Option<Vec<u8>>,
}

impl HandoffFile {
    /// The handoff file of the freshly materialized workspace `dir`, as it is now.
    fn capture(dir: &Path) -> Self {
        let original = RootDir::open(dir)
            .and_then(|root| root.read(HANDOFF_FILE))
            .ok();
        HandoffFile {
            dir: dir.to_path_buf(),
            original,
        }
    }

    fn restore(self) -> Result<(), BeneathError> {
        let root = RootDir::open(&self.dir)?;
        if root
            .symlink_metadata(HANDOFF_FILE)
            .is_ok_and(|meta| meta.file_type().is_symlink())
        {
            tracing::warn!(
                target: "loopgate::security",
                security_event = "path_refused",
                reason = "handoff_symlink",
                path = HANDOFF_FILE,
                "the agent left a symlink at the handoff file; replaced, not followed"
            );
            loopgate_telemetry::metrics::Metrics::new()
                .refused_paths
                .add(
                    1,
                    &[opentelemetry::KeyValue::new("reason", "handoff_symlink")],
                );
        }
        match &self.original {
            Some(bytes) => root.replace(HANDOFF_FILE, bytes),
            None => match root.remove_file(HANDOFF_FILE) {
                Err(err) if err.io_kind() != Some(std::io::ErrorKind::NotFound) => Err(err),
                _ => Ok(()),
            },
        }
    }
}

/// The summary and `claimed_done` to freeze with, or None when the round fails instead: the
/// model failed before any tool ran, or with an error that ends the episode (auth, quota), so
/// the manager sees the reason rather than a candidate to audit.
pub(crate) fn summarize(report: &LoopReport) -> Option<(String, bool)> {
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
        LoopEnd::Stuck => Some((
            "stopped early: the model kept repeating a call that got it nothing (a write of \
             what the refused workspace already held, or a call that failed the same way each \
             time); the next round starts afresh"
                .to_string(),
            false,
        )),
        LoopEnd::TokenBudget(max) => Some((
            format!("the run's token budget ({max} tokens for this episode) is spent; ended early"),
            false,
        )),
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
        LoopEnd::Stuck => "stuck",
        LoopEnd::TimedOut(_) => "timed_out",
        LoopEnd::TokenBudget(_) => "token_budget",
        LoopEnd::ModelFailed(_) => "model_failed",
    }
}

/// The current text of each of `paths` in the freshly materialized `dir`; a file that is not
/// UTF-8 text (or holds a NUL), grew past the preview cap or cannot be read is left out. Read
/// beneath `dir` following no symlink.
async fn read_previews(dir: &Path, paths: &[String]) -> Vec<FilePreview> {
    let (dir, paths) = (dir.to_path_buf(), paths.to_vec());
    tokio::task::spawn_blocking(move || {
        let Ok(root) = RootDir::open(&dir) else {
            return Vec::new();
        };
        paths
            .into_iter()
            .filter_map(|path| {
                let bytes = root.read(&path).ok()?;
                if bytes.len() as u64 > PREVIEW_FILE_BYTES || bytes.contains(&0) {
                    return None;
                }
                let text = String::from_utf8(bytes).ok()?;
                Some(FilePreview { path, text })
            })
            .collect()
    })
    .await
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use loopgate_models::ModelError;
    use loopgate_protocol::usage::Usage;

    fn report(end: LoopEnd, tool_calls: u32) -> LoopReport {
        LoopReport {
            end,
            steps: 1,
            tool_calls,
            usage: Usage::default(),
            resets: 0,
            compactions: 0,
            self_check_refusals: 0,
            cut_calls: 0,
            smaller_prompts: 0,
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
}
