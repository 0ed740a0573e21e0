//! Running a contract's checks for one audit: each in its own copy of the pristine
//! materialized snapshot (so checks cannot affect each other), under the host's sandbox, with
//! the full output stored in the evidence bucket and only its digest and an excerpt in the
//! report.

use std::path::{Path, PathBuf};
use std::time::Duration;

use loopgate_common::verdict::Evidence;
use loopgate_common::wire::AuditRequest;

use crate::audit::rules::{evidence_from_run, unix_millis};
use crate::audit::scratch_copy::copy_tree;
use crate::audit::{AuditError, Auditor};
use crate::checks::{run_check, CheckSpec};
use crate::sandbox::launch::prepare_check_dir;

/// Where one check runs: its copy of the snapshot, its HOME and bubblewrap's status file.
struct CheckDirs {
    root: PathBuf,
    workspace: PathBuf,
    home: PathBuf,
    status: PathBuf,
}

fn prepare(
    scratch: &Path,
    index: usize,
    pristine: &Path,
    run_as: Option<(u32, u32)>,
) -> std::io::Result<CheckDirs> {
    let root = scratch.join(format!("check-{index}"));
    std::fs::create_dir(&root)?;
    let dirs = CheckDirs {
        workspace: root.join("ws"),
        home: root.join("home"),
        status: root.join("status"),
        root,
    };
    copy_tree(pristine, &dirs.workspace)?;
    std::fs::create_dir(&dirs.home)?;
    std::fs::write(&dirs.status, b"")?;
    prepare_check_dir(scratch, &[&dirs.root], run_as)?;
    Ok(dirs)
}

impl Auditor {
    /// Run every check of the contract; gaps collects what could not be recorded.
    pub(crate) async fn run_checks(
        &self,
        req: &AuditRequest,
        scratch: &Path,
        pristine: &Path,
        gaps: &mut Vec<String>,
    ) -> Result<Vec<Evidence>, AuditError> {
        let mut evidence = Vec::new();
        for (index, criterion) in req.contract.criteria.iter().enumerate() {
            let Some(command) = &criterion.check else {
                continue;
            };
            let (scratch_dir, source_dir) = (scratch.to_path_buf(), pristine.to_path_buf());
            let run_as = self.sandbox.run_as;
            let dirs = tokio::task::spawn_blocking(move || {
                prepare(&scratch_dir, index, &source_dir, run_as)
            })
            .await
            .map_err(|err| AuditError::Scratch {
                path: scratch.to_path_buf(),
                source: std::io::Error::other(err.to_string()),
            })?
            .map_err(|source| AuditError::Scratch {
                path: scratch.to_path_buf(),
                source,
            })?;
            let run = run_check(&CheckSpec {
                command,
                cwd: &dirs.workspace,
                home: &dirs.home,
                path_var: &self.check_path,
                timeout: Duration::from_secs(criterion.timeout_secs.max(1)),
                sandbox: &self.sandbox,
                status_file: &dirs.status,
            })
            .await;
            tracing::info!(run_id = %req.run_id, check = %criterion.id, verdict = ?run.verdict(),
                end = ?run.end, duration_ms = run.duration.as_millis() as u64, "check finished");
            let root = dirs.root.clone();
            let removed = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&root)).await;
            if !matches!(removed, Ok(Ok(()))) {
                tracing::warn!(path = %dirs.root.display(), "removing a check's scratch copy failed");
            }
            let log_digest = self.store_output(&criterion.id, &run.output, gaps).await;
            evidence.push(evidence_from_run(
                &criterion.id,
                &run,
                &req.candidate_snapshot,
                log_digest,
                unix_millis(),
            ));
        }
        if !evidence.is_empty() {
            gaps.extend(self.sandbox.limitations.iter().cloned());
        }
        Ok(evidence)
    }

    /// Put a check's output into the evidence bucket; its digest, or None (with a gap).
    pub(crate) async fn store_output(
        &self,
        check_id: &str,
        output: &[u8],
        gaps: &mut Vec<String>,
    ) -> Option<String> {
        let Some(evidence) = &self.evidence else {
            gaps.push(format!(
                "output of check '{check_id}' not stored: no evidence bucket"
            ));
            return None;
        };
        match evidence.put_bytes(output).await {
            Ok(digest) => Some(digest),
            Err(err) => {
                tracing::warn!(check = %check_id, error = %err, "storing check output");
                gaps.push(format!("output of check '{check_id}' could not be stored"));
                None
            }
        }
    }
}
