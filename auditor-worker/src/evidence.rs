//! Where an audit's evidence goes beyond the report: the evidence bucket (`lg-evidence`) that
//! holds each check's full output, the screenshots it took and the rubric judge's replies, by
//! digest; and the clock evidence records are stamped with.

use std::time::{SystemTime, UNIX_EPOCH};

use loopgate_snapshot::SnapshotStore;

/// The evidence bucket, when this auditor has one; without it a report keeps excerpts only
/// and says so in a gap.
#[derive(Clone)]
pub(crate) struct EvidenceBucket(Option<SnapshotStore>);

impl EvidenceBucket {
    pub(crate) fn new(bucket: Option<SnapshotStore>) -> Self {
        EvidenceBucket(bucket)
    }

    /// Put `output` (of the check `check_id`) into the bucket: its digest, or `None` with a gap
    /// line saying why it is not stored.
    pub(crate) async fn store(
        &self,
        check_id: &str,
        output: &[u8],
        gaps: &mut Vec<String>,
    ) -> Option<String> {
        let Some(bucket) = &self.0 else {
            gaps.push(format!(
                "output of check '{check_id}' not stored: no evidence bucket"
            ));
            return None;
        };
        match bucket.put_bytes(output).await {
            Ok(digest) => Some(digest),
            Err(err) => {
                tracing::warn!(check = %check_id, error = %err, "storing check output");
                gaps.push(format!("output of check '{check_id}' could not be stored"));
                None
            }
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
