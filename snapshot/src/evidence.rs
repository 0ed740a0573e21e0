//! The evidence bucket `lg-evidence`: full outputs of acceptance checks, content-addressed
//! like snapshot blobs (`blob/<sha256>`) and referenced by `Evidence::log_digest`.
//!
//! It is separate from the snapshot bucket so that auditors, which must never be able to
//! write or delete snapshots, can still store their evidence: their NATS user may publish to
//! `$O.lg-evidence.>` but only read `lg-snapshots` (deploy/nats/). Evidence is written once
//! and named by its digest, so a reader verifies it exactly like a snapshot blob.

pub use loopgate_protocol::subjects::EVIDENCE_BUCKET;
use std::time::Duration;

use async_nats::jetstream;

use crate::error::SnapshotError;
use crate::store::SnapshotStore;

impl SnapshotStore {
    /// Open the evidence bucket (created by the manager's topology) on a JetStream context.
    pub async fn evidence_from_jetstream(
        js: &jetstream::Context,
        timeout: Duration,
    ) -> Result<SnapshotStore, SnapshotError> {
        SnapshotStore::open_bucket(js, EVIDENCE_BUCKET, timeout).await
    }
}
