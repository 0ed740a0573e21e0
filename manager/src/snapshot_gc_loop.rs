//! Garbage collection of unreferenced snapshot blobs, check outputs and episode transcripts.
//! Roots are every snapshot, log digest and transcript digest referenced by a run still in Redis (terminal runs expire after the
//! retention period, which is when their objects become collectable). Objects younger than the
//! grace period are always kept, so a run created during a collection is never harmed.

use std::time::Duration;

use loopgate_common::state::{LogEntry, LogEvent};
use loopgate_snapshot::GcRoots;
use loopgate_snapshot::SnapshotStore;
use loopgate_transport::runtime::{run_periodically, FirstPass};
use tokio_util::sync::CancellationToken;

use crate::engine::{Engine, EngineError};

pub struct SnapshotGc {
    pub engine: Engine,
    pub snapshots: SnapshotStore,
    pub evidence: SnapshotStore,
    pub every: Duration,
    pub grace: Duration,
}

impl SnapshotGc {
    pub async fn run(self, cancel: CancellationToken) {
        let period = self.every;
        run_periodically(
            "snapshot gc",
            period,
            FirstPass::AfterPeriod,
            cancel,
            || self.collect_once(),
        )
        .await
    }

    /// Every snapshot and blob a live run references.
    pub async fn roots(&self) -> Result<GcRoots, EngineError> {
        let mut roots = GcRoots::default();
        let store = self.engine.store();
        let mut offset = 0;
        loop {
            let ids = store.list(None, offset, 500).await?;
            if ids.is_empty() {
                break;
            }
            offset += ids.len();
            roots.runs += ids.len();
            for id in ids {
                let Some((_, record)) = self.engine.load(&id).await? else {
                    continue;
                };
                roots.snapshots.insert(record.base_snapshot.clone());
                roots.snapshots.insert(record.snapshot.clone());
                let log = self.engine.full_log(&id).await?;
                for entry in log
                    .iter()
                    .filter_map(|r| serde_json::from_str::<LogEntry>(&r.entry).ok())
                {
                    match entry.event {
                        LogEvent::ExecDispatched { base_snapshot, .. } => {
                            roots.snapshots.insert(base_snapshot);
                        }
                        // The candidate, and the episode's transcript in the evidence bucket.
                        LogEvent::ExecResult {
                            candidate,
                            transcript,
                            ..
                        } => {
                            roots.snapshots.extend(candidate);
                            roots.blobs.extend(transcript);
                        }
                        LogEvent::AuditReport { snapshot, .. } => {
                            roots.snapshots.insert(snapshot);
                        }
                        _ => {}
                    }
                }
                for (_, json) in store.evidence(&id).await? {
                    if let Ok(e) =
                        serde_json::from_str::<loopgate_protocol::verdict::Evidence>(&json)
                    {
                        if let Some(d) = e.log_digest {
                            roots.blobs.insert(d);
                        }
                        roots
                            .blobs
                            .extend(e.screenshots.into_iter().map(|s| s.digest));
                    }
                }
            }
        }
        roots.snapshots.retain(|s| !s.is_empty());
        Ok(roots)
    }

    pub async fn collect_once(&self) -> Result<(), EngineError> {
        let roots = self.roots().await?;
        for (bucket, store) in [("snapshots", &self.snapshots), ("evidence", &self.evidence)] {
            match store.collect_garbage(&roots, self.grace).await {
                Ok(report) => tracing::info!(bucket, ?report, "garbage collected"),
                Err(e) => tracing::warn!(bucket, error = %e, "garbage collection failed"),
            }
        }
        Ok(())
    }
}
