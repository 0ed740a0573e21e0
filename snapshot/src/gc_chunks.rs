//! Chunks that no object's metadata names. Three things leave them in a bucket's stream: a
//! write cut off between its chunks and its metadata (a crashed or timed-out writer), the
//! loser of two writers racing on one new name (the rolled-up metadata keeps the winner's
//! chunks), and an object written again with another size (`object_write`, which never
//! purges: the workers may not). The collection purges the chunk subject of every nuid that no
//! object of its listing names and whose last chunk is older than the grace, so a write in
//! progress (its chunks published, its metadata not yet) is never touched.

use std::collections::HashSet;
use std::future::IntoFuture;
use std::time::Duration;

use futures::StreamExt;

use crate::error::{bounded, store_error, SnapshotError};
use crate::store::SnapshotStore;

/// What the chunk sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChunkSweep {
    /// Chunk sets (one write's chunks) no object named, purged.
    pub orphan_sets_purged: usize,
    /// Chunk messages those purges removed.
    pub chunks_purged: u64,
    /// Orphan sets younger than the grace, kept (a write may still be finishing).
    pub young_orphans_kept: usize,
}

/// The chunk subjects (`$O.<bucket>.C.<nuid>`) whose nuid no live object names: pure.
pub(crate) fn orphan_chunk_subjects<'a>(
    bucket: &str,
    subjects: &'a [String],
    live_nuids: &HashSet<&str>,
) -> Vec<&'a str> {
    let prefix = format!("$O.{bucket}.C.");
    subjects
        .iter()
        .filter(|subject| {
            subject
                .strip_prefix(&prefix)
                .is_some_and(|nuid| !nuid.is_empty() && !live_nuids.contains(nuid))
        })
        .map(String::as_str)
        .collect()
}

impl SnapshotStore {
    /// Purge the chunks no object in `live_nuids` names and older than `grace` (see the module
    /// docs). `live_nuids` comes from a listing taken before this call: a write after it has
    /// young chunks, which are kept.
    pub(crate) async fn sweep_orphan_chunks(
        &self,
        live_nuids: &HashSet<&str>,
        grace: Duration,
    ) -> Result<ChunkSweep, SnapshotError> {
        let subjects = self.chunk_subjects().await?;
        let timeout = self.request_timeout();
        let mut sweep = ChunkSweep::default();
        for subject in orphan_chunk_subjects(self.bucket(), &subjects, live_nuids) {
            let last = bounded(
                "chunk age",
                timeout,
                self.stream().get_last_raw_message_by_subject(subject),
            )
            .await?;
            let age = Duration::try_from(time::OffsetDateTime::now_utc() - last.time).ok();
            if age.is_none_or(|age| age < grace) {
                sweep.young_orphans_kept += 1;
                continue;
            }
            let purged = bounded(
                "purge orphan chunks",
                timeout,
                self.stream().purge().filter(subject).into_future(),
            )
            .await?;
            sweep.orphan_sets_purged += 1;
            sweep.chunks_purged += purged.purged;
        }
        if sweep.orphan_sets_purged > 0 {
            tracing::info!(
                bucket = self.bucket(),
                sets = sweep.orphan_sets_purged,
                chunks = sweep.chunks_purged,
                "purged chunks no object named"
            );
        }
        Ok(sweep)
    }

    /// Every chunk subject the bucket's stream holds a message on.
    async fn chunk_subjects(&self) -> Result<Vec<String>, SnapshotError> {
        let timeout = self.request_timeout();
        let filter = format!("$O.{}.C.>", self.bucket());
        let mut listing = bounded(
            "list chunk subjects",
            timeout,
            self.stream().info_with_subjects(filter),
        )
        .await?;
        let mut subjects = Vec::new();
        loop {
            let next = tokio::time::timeout(timeout, listing.next())
                .await
                .map_err(|_| SnapshotError::Timeout {
                    op: "list chunk subjects",
                    after: timeout,
                })?;
            match next {
                Some(Ok((subject, _count))) => subjects.push(subject),
                Some(Err(err)) => return Err(store_error("list chunk subjects", err)),
                None => break,
            }
        }
        Ok(subjects)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orphan_chunk_subjects_table() {
        let subjects: Vec<String> = [
            "$O.b.C.live1",
            "$O.b.C.gone1",
            "$O.b.C.",
            "$O.other.C.gone2",
            "$O.b.M.bmFtZQ",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let live: HashSet<&str> = ["live1"].into_iter().collect();
        assert_eq!(
            orphan_chunk_subjects("b", &subjects, &live),
            vec!["$O.b.C.gone1"]
        );
        assert!(orphan_chunk_subjects("b", &[], &live).is_empty());
    }
}
