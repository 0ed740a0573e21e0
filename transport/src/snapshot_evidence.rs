//! The evidence bucket `lg-evidence`: full outputs of acceptance checks, content-addressed
//! like snapshot blobs (`blob/<sha256>`) and referenced by `Evidence::log_digest`.
//!
//! It is separate from the snapshot bucket so that auditors, which must never be able to
//! write or delete snapshots, can still store their evidence: their NATS user may publish to
//! `$O.lg-evidence.>` but only read `lg-snapshots` (deploy/nats/). Evidence is written once
//! and named by its digest, so a reader verifies it exactly like a snapshot blob.

use std::time::Duration;

use async_nats::jetstream;

use crate::bus::{Bus, BusError};
use crate::snapshot_store::{SnapshotError, SnapshotStore};

pub const EVIDENCE_BUCKET: &str = "lg-evidence";

const ENSURE_ATTEMPTS: u64 = 4;

impl Bus {
    /// Create the evidence bucket if it does not exist. Idempotent; needs stream-creation
    /// rights (the manager's credentials).
    pub async fn ensure_evidence_bucket(&self) -> Result<(), BusError> {
        let js = self.jetstream();
        let timeout = self.request_timeout();
        let mut last_error = String::new();
        for attempt in 0..ENSURE_ATTEMPTS {
            if let Ok(Ok(_)) =
                tokio::time::timeout(timeout, js.get_object_store(EVIDENCE_BUCKET)).await
            {
                return Ok(());
            }
            let config = jetstream::object_store::Config {
                bucket: EVIDENCE_BUCKET.to_string(),
                description: Some("loopgate acceptance-check outputs".into()),
                storage: jetstream::stream::StorageType::File,
                ..Default::default()
            };
            match tokio::time::timeout(timeout, js.create_object_store(config)).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(err)) => last_error = err.to_string(),
                Err(_) => last_error = format!("timed out after {timeout:?}"),
            }
            tokio::time::sleep(Duration::from_millis(50 * (attempt + 1))).await;
        }
        Err(BusError::Nats {
            op: "ensure evidence bucket",
            reason: last_error,
        })
    }
}

impl SnapshotStore {
    /// Open the evidence bucket (created by `Bus::ensure_topology`).
    pub async fn evidence(bus: &Bus) -> Result<SnapshotStore, SnapshotError> {
        SnapshotStore::open_bucket(bus.jetstream(), EVIDENCE_BUCKET, bus.request_timeout()).await
    }
}
