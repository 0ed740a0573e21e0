//! Where an audit's pristine copy of the candidate comes from: the warm-workspace cache
//! (`[auditor] cache_bytes`) when there is one, a fresh materialize otherwise. Either way every
//! file is verified against its digest; a cached tree is checked out to one audit at a time,
//! so concurrent audits of one snapshot never share a directory, and checks still run in their
//! own private copies of it (`run_checks.rs`).

use std::path::Path;

use loopgate_protocol::snapshot::Manifest;
use loopgate_snapshot::SnapshotError;

use crate::audit::auditor::Auditor;

impl Auditor {
    /// Materialize `id` into `workspace` (which must not exist yet or be empty).
    pub(super) async fn materialize_candidate(
        &self,
        id: &str,
        workspace: &Path,
    ) -> Result<Manifest, SnapshotError> {
        match &self.workspaces {
            Some(cache) => {
                // With layered check copies the tree becomes the check user's
                // (`CheckBase::prepare`): written for it, its files keep their ctimes and the
                // next reuse vouches for them by stat.
                let owner = self.sandbox.run_as.filter(|_| self.sandbox.layers());
                let (manifest, report) = self
                    .store
                    .materialize_warm_as(id, workspace, cache, owner)
                    .await?;
                tracing::debug!(snapshot = %id, ?report, "candidate materialized warm");
                Ok(manifest)
            }
            None => self.store.materialize(id, workspace).await,
        }
    }

    /// After the audit: give the pristine tree back to the cache for the next audit.
    pub(super) async fn keep_workspace(&self, workspace: &Path) {
        let Some(cache) = &self.workspaces else {
            return;
        };
        if let Err(err) = cache.check_in(workspace).await {
            tracing::warn!(error = %err, "keeping the audited tree failed");
        }
    }
}
