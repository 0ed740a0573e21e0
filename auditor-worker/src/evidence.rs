//! Where an audit's evidence goes beyond the report: the evidence bucket (`lg-evidence`) that
//! holds each check's full output, the screenshots it took and the rubric judge's replies, by
//! digest; and the clock evidence records are stamped with.
//!
//! An audit does not write while it works. Each piece's digest is its sha256, known at once, so
//! the records name it straight away ([`EvidenceWrites::queue`]); the bytes are kept until the
//! audit's own work is done and then stored together ([`EvidenceWrites::store_all`]), retrying
//! an unreachable bucket. A NATS outage while the checks run then neither loses a check's
//! output nor stops the audit: the worker's claim holds through it once only storing is left
//! (`loopgate_transport::runtime::ClaimedEpisode::wrap_up`).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use loopgate_protocol::snapshot::sha256_hex;
use loopgate_snapshot::{SnapshotError, SnapshotStore};
use loopgate_transport::runtime::retry_with_patience;
use tokio_util::sync::CancellationToken;

/// The evidence bucket, when this auditor has one; without it a report keeps excerpts only
/// and says so in a gap.
#[derive(Clone)]
pub(crate) struct EvidenceBucket(Option<SnapshotStore>);

impl EvidenceBucket {
    pub(crate) fn new(bucket: Option<SnapshotStore>) -> Self {
        EvidenceBucket(bucket)
    }

    /// The writes of one audit, stored once its work is done.
    pub(crate) fn writes(&self, patience: Duration) -> EvidenceWrites {
        EvidenceWrites {
            bucket: self.0.clone(),
            patience,
            pending: Arc::new(Mutex::new(Vec::new())),
        }
    }
}

/// One piece of evidence waiting to be stored.
struct PendingWrite {
    /// What it is, for the gap line when it cannot be stored (`check 'tests'`).
    what: String,
    digest: String,
    bytes: Vec<u8>,
}

/// The evidence one audit writes: named by digest at once, stored when the audit's work is
/// done. Cheap to clone (the clones share the queue).
#[derive(Clone)]
pub(crate) struct EvidenceWrites {
    bucket: Option<SnapshotStore>,
    /// How long [`EvidenceWrites::store_all`] keeps retrying an unreachable bucket.
    patience: Duration,
    pending: Arc<Mutex<Vec<PendingWrite>>>,
}

/// The evidence an audit could not store: the digests its records must no longer name, and a
/// gap line for each.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Unstored {
    pub(crate) digests: BTreeSet<String>,
    pub(crate) gaps: Vec<String>,
}

impl EvidenceWrites {
    /// Queue `output` (`what`: `check 'tests'`, `check 'ui' screenshot home.png`) for the
    /// bucket: its digest, or `None` with a gap line when this auditor has no bucket.
    pub(crate) fn queue(
        &self,
        what: &str,
        output: &[u8],
        gaps: &mut Vec<String>,
    ) -> Option<String> {
        if self.bucket.is_none() {
            gaps.push(format!("output of {what} not stored: no evidence bucket"));
            return None;
        }
        let digest = sha256_hex(output);
        if let Ok(mut pending) = self.pending.lock() {
            pending.push(PendingWrite {
                what: what.to_string(),
                digest: digest.clone(),
                bytes: output.to_vec(),
            });
            return Some(digest);
        }
        gaps.push(format!(
            "output of {what} not stored: its queue is unusable"
        ));
        None
    }

    /// Store every queued piece (once per digest), retrying an unreachable bucket for the
    /// patience; what still cannot be stored is returned, to be unnamed in the report.
    pub(crate) async fn store_all(&self) -> Unstored {
        let pending = match self.pending.lock() {
            Ok(mut pending) => std::mem::take(&mut *pending),
            Err(_) => Vec::new(),
        };
        let mut unstored = Unstored::default();
        let Some(bucket) = &self.bucket else {
            return unstored;
        };
        let mut stored = BTreeSet::new();
        for write in pending {
            if stored.contains(&write.digest) || unstored.digests.contains(&write.digest) {
                continue;
            }
            match self.store_one(bucket, &write).await {
                Ok(()) => {
                    stored.insert(write.digest);
                }
                Err(err) => {
                    tracing::warn!(what = %write.what, error = %err, "storing evidence failed");
                    unstored
                        .gaps
                        .push(format!("output of {} could not be stored", write.what));
                    unstored.digests.insert(write.digest);
                }
            }
        }
        unstored
    }

    async fn store_one(
        &self,
        bucket: &SnapshotStore,
        write: &PendingWrite,
    ) -> Result<(), SnapshotError> {
        let put = retry_with_patience(
            "evidence write",
            self.patience,
            &CancellationToken::new(),
            SnapshotError::is_retryable,
            || bucket.put_bytes(&write.bytes),
        )
        .await?;
        match put {
            Some(digest) if digest == write.digest => Ok(()),
            Some(digest) => Err(SnapshotError::Integrity {
                path: write.what.clone(),
                reason: format!("stored as {digest}, named {}", write.digest),
            }),
            None => Ok(()),
        }
    }
}

/// Milliseconds since the Unix epoch: when an evidence record was produced.
pub(crate) fn unix_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a bucket nothing is queued and the gap says why; nothing is left to store.
    #[tokio::test]
    async fn without_a_bucket_the_gap_names_the_output() {
        let writes = EvidenceBucket::new(None).writes(Duration::from_secs(1));
        let mut gaps = Vec::new();
        assert_eq!(writes.queue("check 'tests'", b"ok", &mut gaps), None);
        assert_eq!(
            gaps,
            vec!["output of check 'tests' not stored: no evidence bucket".to_string()]
        );
        assert_eq!(writes.store_all().await, Unstored::default());
    }
}
