//! Running a step's self-checks: list the files the live workspace would freeze to (the
//! freeze's own walk and ignore rules, so the copy is the tree the auditor will materialize),
//! then run each targeted check in its own scratch copy under the executor's work dir through
//! `loopgate_checks`, in the agent's own sandbox: a self-check sees exactly what the agent's
//! `shell` sees (the same bubblewrap, user, hidden paths, pid namespace, environment
//! allow-list and network). Its output goes back to the model, so it must reach nothing the
//! agent cannot. The live workspace is only read. Several checks of a big tree share one copy
//! as the lower layer of each check's own layered copy, as the auditor's do.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use crate::isolation::AgentIsolationEnv;
use crate::prompt::path_hints::missing_path_hints;
use loopgate_checks::{
    copy_files, run_in_scratch_copy, worth_layering, CheckBase, CopyFile, CopySource, OverlayTools,
    Sandbox, ScratchCheck, ScratchCopyError, DEFAULT_CHECK_PATH,
};
use loopgate_protocol::verdict::CheckVerdict;
use loopgate_protocol::wire::{EpisodeKind, ExecRequest};
use loopgate_snapshot::freeze::walk_workspace;
use loopgate_snapshot::{FreezeRules, SnapshotError};

use crate::self_check::finish_rules::CheckFinding;
use crate::self_check::targets::{targeted_checks, TargetCheck};

/// How this worker runs self-checks, for every episode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelfCheckEnv {
    /// The agent's sandbox and network (the one probed at start-up, shared with the episodes'
    /// `shell`): every self-check runs in it, with the `shell`'s network.
    pub agent: AgentIsolationEnv,
    /// Layered copies in that sandbox (probed at start-up), or full copies.
    pub layers: Option<OverlayTools>,
    /// `PATH` for checks.
    pub check_path: String,
}

impl SelfCheckEnv {
    /// Self-checks in `agent`'s sandbox, with layered copies where they work there (probed
    /// in `work_dir`) and `check_path` (plus `loopgate browse` where it is installed).
    pub async fn in_agent_sandbox(
        agent: AgentIsolationEnv,
        work_dir: &Path,
        check_path: &str,
    ) -> Self {
        let sandbox = agent.sandbox.for_checks(agent.network.shell, None);
        let layers = loopgate_checks::probe_layers(&sandbox, work_dir).await;
        SelfCheckEnv {
            check_path: loopgate_checks::with_loopgate_dir(check_path, &sandbox),
            agent,
            layers,
        }
    }

    /// Checks without isolation and with the default `PATH` (tests).
    pub fn unisolated(reason: &str) -> Self {
        SelfCheckEnv {
            agent: AgentIsolationEnv::unsandboxed(reason),
            layers: None,
            check_path: DEFAULT_CHECK_PATH.to_string(),
        }
    }

    /// The sandbox every self-check runs in: the agent's (`AgentSandbox::for_checks`).
    pub fn sandbox(&self) -> Sandbox {
        self.agent
            .sandbox
            .for_checks(self.agent.network.shell, self.layers.clone())
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum SelfCheckError {
    #[error("self-check scratch dir under {path:?}: {source}")]
    Scratch {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("listing the workspace: {0}")]
    Workspace(#[from] SnapshotError),
    #[error("listing the workspace: {0}")]
    Interrupted(String),
    #[error(transparent)]
    Copy(#[from] ScratchCopyError),
}

/// One episode's self-check: what it runs, how often, where.
#[derive(Debug, Clone)]
pub(crate) struct SelfCheck {
    targets: Vec<TargetCheck>,
    /// Self-checks the episode may run (`budget.self_checks`).
    allowed: u32,
    env: Arc<SelfCheckEnv>,
    /// Scratch copies are made under this directory (the executor's work dir).
    scratch_parent: PathBuf,
    /// The task's freeze ignores: what the candidate (and so the audit) will not contain.
    ignore: Vec<String>,
    /// What each check gets beyond the worker's environment: a `[gui]` task's
    /// `LOOPGATE_GUI_URL` / `LOOPGATE_GUI_SERVE`, as the auditor gives its checks.
    check_env: Vec<(String, String)>,
}

impl SelfCheck {
    /// The request's self-check, when it has one: a work step (planning episodes have no
    /// contract to check yet) with `self_checks` > 0 that targets at least one check.
    pub(crate) fn for_request(
        req: &ExecRequest,
        env: &SelfCheckEnv,
        scratch_parent: &Path,
    ) -> Option<SelfCheck> {
        if req.episode != EpisodeKind::Step || req.self_checks == 0 {
            return None;
        }
        let targets = targeted_checks(&req.contract, &req.increment);
        (!targets.is_empty()).then(|| SelfCheck {
            targets,
            allowed: req.self_checks,
            env: Arc::new(env.clone()),
            scratch_parent: scratch_parent.to_path_buf(),
            ignore: req.ignore.clone(),
            check_env: req.gui.as_ref().map(|g| g.check_env()).unwrap_or_default(),
        })
    }

    pub(crate) fn allowed(&self) -> u32 {
        self.allowed
    }

    /// What each check's copy is made from. Several checks of a tree worth layering: the files
    /// copied once into `scratch/base`, prepared as the read-only lower layer of every check's
    /// own layered copy (as the auditor does). Otherwise, or when that cannot be prepared, each
    /// check copies the files itself.
    async fn copy_source(
        &self,
        files: Vec<CopyFile>,
        bytes: u64,
        scratch: &Path,
        sandbox: &Sandbox,
    ) -> CopySource {
        let files = Arc::new(files);
        let per_check = CopySource::Files(files.clone());
        if self.targets.len() < 2 || !sandbox.layers() || !worth_layering(files.len(), bytes) {
            return per_check;
        }
        let (base, sandbox) = (scratch.join("base"), sandbox.clone());
        let prepared = tokio::task::spawn_blocking(move || {
            copy_files(&files, &base)?;
            CheckBase::prepare(&base, &sandbox)
        })
        .await;
        match prepared {
            Ok(Ok(Some(base))) => CopySource::Layered(base),
            Ok(Ok(None)) => per_check,
            Ok(Err(err)) => {
                tracing::warn!(error = %err, "preparing layered self-check copies; copying instead");
                per_check
            }
            Err(err) => {
                tracing::warn!(error = %err, "preparing layered self-check copies; copying instead");
                per_check
            }
        }
    }

    /// Run every targeted check on a copy of `workspace`; one finding per check, in order.
    pub(crate) async fn run(&self, workspace: &Path) -> Result<Vec<CheckFinding>, SelfCheckError> {
        let started = Instant::now();
        let scratch = tempfile::Builder::new()
            .prefix("self-check-")
            .tempdir_in(&self.scratch_parent)
            .map_err(|source| SelfCheckError::Scratch {
                path: self.scratch_parent.clone(),
                source,
            })?;
        let (root, rules) = (
            workspace.to_path_buf(),
            FreezeRules::with_ignores(&self.ignore),
        );
        let files = tokio::task::spawn_blocking(move || walk_workspace(&root, &rules))
            .await
            .map_err(|err| SelfCheckError::Interrupted(err.to_string()))??;
        let paths: Vec<String> = files.iter().map(|file| file.entry.path.clone()).collect();
        let bytes: u64 = files.iter().map(|file| file.entry.size).sum();
        let files: Vec<CopyFile> = files
            .into_iter()
            .map(|file| CopyFile {
                path: file.entry.path,
                source: file.source,
                mode: file.entry.mode,
            })
            .collect();
        let file_count = files.len();
        let sandbox = self.env.sandbox();
        let source = self
            .copy_source(files, bytes, scratch.path(), &sandbox)
            .await;
        let mut findings = Vec::with_capacity(self.targets.len());
        for (index, target) in self.targets.iter().enumerate() {
            let check = ScratchCheck {
                scratch: scratch.path(),
                index,
                command: &target.command,
                timeout: target.timeout,
                path_var: &self.env.check_path,
                sandbox: &sandbox,
                extra_env: &self.check_env,
            };
            let run = run_in_scratch_copy(&check, &source).await?;
            tracing::info!(check = %target.id, verdict = ?run.verdict(), end = ?run.end,
                duration_ms = run.duration.as_millis() as u64, "self-check ran");
            let verdict = run.verdict();
            let hints = if verdict == CheckVerdict::Fail {
                missing_path_hints(
                    &target.command,
                    &String::from_utf8_lossy(&run.output),
                    &paths,
                )
            } else {
                Vec::new()
            };
            findings.push(
                CheckFinding::new(&target.id, verdict, run.exit_code(), &run.output)
                    .with_hints(hints),
            );
        }
        let path = scratch.path().to_path_buf();
        if !matches!(
            tokio::task::spawn_blocking(move || scratch.close()).await,
            Ok(Ok(()))
        ) {
            tracing::warn!(path = %path.display(), "removing the self-check scratch dir failed");
        }
        tracing::info!(
            checks = findings.len(),
            files = file_count,
            duration_ms = started.elapsed().as_millis() as u64,
            "self-check finished"
        );
        Ok(findings)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn request(episode: &str, self_checks: u32, criteria: serde_json::Value) -> ExecRequest {
        serde_json::from_value(json!({
            "run_id": "r", "generation": 1, "round": 1, "capability": "cli",
            "contract": {"goal": "g", "criteria": criteria, "protected_paths": [], "spec_hash": "h"},
            "increment": {"objective": "o"}, "base_snapshot": "b", "executor_profile": "p",
            "episode_secs": 5, "max_steps": 3, "episode": episode, "self_checks": self_checks
        }))
        .unwrap()
    }

    #[test]
    fn which_requests_self_check_table() {
        let check = json!([{"id": "a", "description": "", "check": "true", "blocking": true, "timeout_secs": 5}]);
        let soft = json!([{"id": "a", "description": "", "check": "true", "blocking": false, "timeout_secs": 5}]);
        // (episode, self_checks, criteria, allowed self-checks or none)
        let cases = [
            ("step", 2, check.clone(), Some(2)),
            ("step", 1, check.clone(), Some(1)),
            ("step", 0, check.clone(), None),
            ("step", 2, soft, None),
            ("step", 2, json!([]), None),
            ("plan", 2, check.clone(), None),
            ("propose", 2, check, None),
        ];
        let env = SelfCheckEnv::unisolated("test");
        for (episode, self_checks, criteria, want) in cases {
            let req = request(episode, self_checks, criteria.clone());
            let got = SelfCheck::for_request(&req, &env, Path::new("/tmp")).map(|s| s.allowed());
            assert_eq!(got, want, "{episode} {self_checks} {criteria}");
        }
    }

    /// A `[gui]` task's self-checks see the URL and serve command its audit's checks see (a
    /// browser check otherwise fails in the self-check for want of them, whatever the page).
    #[tokio::test]
    async fn a_gui_tasks_self_check_gets_the_gui_environment() {
        let check = json!([{"id": "gui-env", "description": "", "blocking": true, "timeout_secs": 5,
            "check": "test \"$LOOPGATE_GUI_URL\" = http://127.0.0.1:8765 && test \"$LOOPGATE_GUI_SERVE\" = 'python3 -m http.server 8765'"}]);
        let workspace = tempfile::tempdir().unwrap();
        std::fs::write(workspace.path().join("index.html"), "<h1>x</h1>").unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let env = SelfCheckEnv::unisolated("test");
        // (the task's [gui], the check's verdict)
        let cases = [
            (None, CheckVerdict::Fail),
            (
                Some(
                    json!({"serve": "python3 -m http.server 8765", "url": "http://127.0.0.1:8765"}),
                ),
                CheckVerdict::Pass,
            ),
        ];
        for (gui, want) in cases {
            let mut req = request("step", 1, check.clone());
            req.gui = gui.clone().map(|g| serde_json::from_value(g).unwrap());
            let self_check = SelfCheck::for_request(&req, &env, scratch.path()).unwrap();
            let findings = self_check.run(workspace.path()).await.unwrap();
            let verdicts: Vec<CheckVerdict> = findings.iter().map(|f| f.verdict).collect();
            assert_eq!(verdicts, vec![want], "gui {gui:?}");
        }
    }
}
