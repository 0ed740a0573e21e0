//! The auditor: what it is built from (`AuditorParts`), what it keeps, and the one error an
//! audit can end in. Its audits are `report.rs` (the entry point), `pipeline.rs` (the phases),
//! `plan.rs`, `run_checks.rs`, `clause_runs.rs` and `workspace.rs`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use loopgate_checks::Sandbox;
use loopgate_models::ChatClient;
use loopgate_protocol::report::signing::ReportSigningKey;
use loopgate_protocol::wire::AuditRequest;
use loopgate_snapshot::{SnapshotError, SnapshotStore, WorkspaceCache};

use crate::evidence::EvidenceBucket;
use crate::judge_context::JudgeModel;

/// Errors that leave no report: the request should be retried (nak) on this or another worker.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("snapshot store unavailable: {0}")]
    Store(#[from] SnapshotError),
    #[error("scratch directory under {path:?}: {source}")]
    Scratch {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What an [`Auditor`] is built from.
pub struct AuditorParts {
    /// The snapshot bucket, read only.
    pub store: SnapshotStore,
    /// Where full check outputs go (`lg-evidence`); `None`: only digests and excerpts.
    pub evidence: Option<SnapshotStore>,
    /// Each audit materializes into a fresh directory under this one.
    pub work_dir: PathBuf,
    pub worker_id: String,
    /// `PATH` for acceptance checks.
    pub check_path: String,
    /// How checks are isolated here.
    pub sandbox: Sandbox,
    /// A change outside the increment's write_scope is a violation, not just suspect.
    pub strict_scope: bool,
    /// Judge clients by model profile name.
    pub judges: BTreeMap<String, ChatClient>,
    /// The pool's key: every report is signed with it (`None`: reports go out unsigned).
    pub signing_key: Option<Arc<ReportSigningKey>>,
    /// Warm workspaces (`[auditor] cache_bytes`); `None`: every audit materializes afresh.
    pub workspaces: Option<WorkspaceCache>,
}

/// What the auditor needs to run audits. Cheap to share behind an `Arc`.
pub struct Auditor {
    pub(super) store: SnapshotStore,
    pub(super) evidence: EvidenceBucket,
    pub(super) work_dir: PathBuf,
    pub(super) worker_id: String,
    pub(super) check_path: String,
    pub(super) sandbox: Sandbox,
    pub(super) strict_scope: bool,
    pub(super) judges: BTreeMap<String, ChatClient>,
    pub(super) signing_key: Option<Arc<ReportSigningKey>>,
    pub(super) workspaces: Option<WorkspaceCache>,
}

impl Auditor {
    pub fn new(parts: AuditorParts) -> Self {
        Auditor {
            store: parts.store,
            evidence: EvidenceBucket::new(parts.evidence),
            work_dir: parts.work_dir,
            worker_id: parts.worker_id,
            check_path: parts.check_path,
            sandbox: parts.sandbox,
            strict_scope: parts.strict_scope,
            judges: parts.judges,
            signing_key: parts.signing_key,
            workspaces: parts.workspaces,
        }
    }

    /// The id this auditor goes by in its reports and its claims on work.
    pub fn worker_id(&self) -> &str {
        &self.worker_id
    }

    /// The judge model `req` names, as this auditor serves it.
    pub(super) fn judge_model<'a>(&'a self, req: &'a AuditRequest) -> JudgeModel<'a> {
        match &req.auditor_profile {
            None => JudgeModel::NoneNamed,
            Some(name) => match self.judges.get(name) {
                Some(client) => JudgeModel::Ready(client),
                None => JudgeModel::NotConfigured(name),
            },
        }
    }
}
