//! Garbage collection of a content-addressed bucket: after runs expire (run retention), their
//! snapshots and the blobs only they used are deleted.
//!
//! Mark: the roots (snapshot ids and loose blob digests still referenced by live runs — base,
//! candidate and current snapshots, evidence output digests) plus every manifest younger than
//! the grace period (a freeze whose run has not recorded it yet) keep their manifest, their
//! manifest pages and every blob their entries name. Sweep: any other `manifest/` or `blob/`
//! object whose last write is older than the grace period is deleted. The grace period must
//! exceed the longest episode (an executor uploads blobs before it writes the manifest that
//! references them) and `snapshot_stat_cache::PRESENT_TTL`. An unreadable root manifest aborts
//! the collection rather than guessing.
//!
//! Then the chunks no object names (a writer cut off, a race lost, an object written again with
//! another size) are purged once older than the grace (`gc_chunks`).
//!
//! Two guards against losing what a concurrent freeze relies on: a freeze that reuses an old
//! blob writes it again (`BLOB_REFRESH_AFTER`), and the sweep re-reads each doomed object's
//! age right before deleting it. A run store with no run while old snapshots exist (a wiped
//! Redis) refuses the sweep (`GcRefusal`).

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use futures::StreamExt;
use loopgate_protocol::snapshot::is_sha256_hex;

use crate::error::{store_error, SnapshotError};
use crate::gc_chunks::ChunkSweep;
use crate::store::{blob_object_name, SnapshotStore};

/// A safe default grace period: a day.
pub const DEFAULT_GC_GRACE: Duration = Duration::from_secs(24 * 3600);

/// The shortest grace for which reuse and the sweep cannot race (see `store::BLOB_REFRESH_AFTER`).
pub const MIN_SAFE_GC_GRACE: Duration = Duration::from_secs(14 * 3600);

/// What must survive the collection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcRoots {
    /// Snapshot ids referenced by live runs.
    pub snapshots: BTreeSet<String>,
    /// Loose blobs referenced by live runs (e.g. check outputs).
    pub blobs: BTreeSet<String>,
    /// How many runs the run store holds. None with old snapshots in the bucket looks like a
    /// wiped run store, not like a quiet deployment: the sweep is refused.
    pub runs: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcReport {
    pub manifests_kept: usize,
    pub manifests_deleted: usize,
    pub blobs_kept: usize,
    pub blobs_deleted: usize,
    /// Stored bytes of the deleted blobs.
    pub bytes_freed: u64,
    /// Root snapshots whose manifest no longer exists (nothing to keep for them).
    pub roots_missing: usize,
    /// Doomed objects that were written again during the collection (a freeze reused them) and
    /// were kept.
    pub rewritten_kept: usize,
    /// Why nothing was swept, when the collection refused to.
    pub refused: Option<GcRefusal>,
    /// The chunks no object named.
    pub chunks: ChunkSweep,
}

/// Why a collection swept nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcRefusal {
    /// The run store holds no run while the bucket holds manifests older than the grace: after
    /// a Redis wipe every snapshot would look unreferenced. Nothing is deleted until a run
    /// exists again (or the objects are removed by hand).
    NoRunsButOldSnapshots,
}

/// Whether the sweep must not run at all: pure, given the roots and the listing.
pub fn sweep_refusal(
    roots: &GcRoots,
    objects: &[ListedObject],
    grace: Duration,
) -> Option<GcRefusal> {
    let old_manifests = objects
        .iter()
        .any(|o| o.name.starts_with("manifest/") && o.age.is_some_and(|age| age >= grace));
    (roots.runs == 0 && old_manifests).then_some(GcRefusal::NoRunsButOldSnapshots)
}

/// One object seen in the bucket listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedObject {
    pub name: String,
    pub size: u64,
    /// Age of its last write; None when unknown (treated as young).
    pub age: Option<Duration>,
    /// Names its chunks' subject (`$O.<bucket>.C.<nuid>`).
    pub nuid: String,
}

/// Which objects the sweep deletes: pure, given the listing, the marked names and the grace.
pub fn sweep_candidates<'a>(
    objects: &'a [ListedObject],
    marked: &HashSet<String>,
    grace: Duration,
) -> Vec<&'a ListedObject> {
    objects
        .iter()
        .filter(|object| {
            let collectable = object
                .name
                .strip_prefix("blob/")
                .or_else(|| object.name.strip_prefix("manifest/"))
                .is_some_and(is_sha256_hex);
            collectable
                && !marked.contains(&object.name)
                && object.age.is_some_and(|age| age >= grace)
        })
        .collect()
}

impl SnapshotStore {
    /// Every live object in the bucket (needs consumer rights on it: the manager's job).
    pub async fn list_objects(&self) -> Result<Vec<ListedObject>, SnapshotError> {
        let timeout = self.request_timeout();
        let mut list = tokio::time::timeout(timeout, self.object_store().list())
            .await
            .map_err(|_| SnapshotError::Timeout {
                op: "list",
                after: timeout,
            })?
            .map_err(|err| store_error("list", err))?;
        let now = time::OffsetDateTime::now_utc();
        let mut objects = Vec::new();
        loop {
            let next = match tokio::time::timeout(timeout, list.next()).await {
                Ok(next) => next,
                Err(_) => {
                    return Err(SnapshotError::Timeout {
                        op: "list",
                        after: timeout,
                    })
                }
            };
            let Some(info) = next else { break };
            let info = info.map_err(|err| store_error("list", err))?;
            if info.deleted {
                continue;
            }
            let age = info
                .modified
                .and_then(|at| Duration::try_from(now - at).ok());
            objects.push(ListedObject {
                name: info.name,
                size: info.size as u64,
                age,
                nuid: info.nuid,
            });
        }
        Ok(objects)
    }

    /// Delete what no root (and no young manifest) references. See the module docs.
    pub async fn collect_garbage(
        &self,
        roots: &GcRoots,
        grace: Duration,
    ) -> Result<GcReport, SnapshotError> {
        let objects = self.list_objects().await?;
        let mut report = GcReport::default();
        if let Some(refusal) = sweep_refusal(roots, &objects, grace) {
            tracing::warn!(
                ?refusal,
                "snapshot gc refused to sweep: the run store holds no run"
            );
            report.refused = Some(refusal);
            return Ok(report);
        }
        let mut snapshots: BTreeSet<String> = roots.snapshots.clone();
        for object in &objects {
            if let Some(id) = object.name.strip_prefix("manifest/") {
                if object.age.is_none_or(|age| age < grace) {
                    snapshots.insert(id.to_string());
                }
            }
        }
        let mut marked: HashSet<String> = roots.blobs.iter().map(|b| blob_object_name(b)).collect();
        for id in &snapshots {
            match self.manifest_with_objects(id).await {
                Ok((manifest, objects)) => {
                    marked.insert(format!("manifest/{id}"));
                    marked.extend(manifest.entries.iter().map(|e| blob_object_name(&e.sha256)));
                    marked.extend(objects.iter().map(|p| blob_object_name(p)));
                }
                Err(SnapshotError::ManifestNotFound { .. }) => report.roots_missing += 1,
                Err(err) => return Err(err),
            }
        }
        let doomed = sweep_candidates(&objects, &marked, grace);
        let doomed_names: HashSet<&str> = doomed.iter().map(|o| o.name.as_str()).collect();
        for object in &objects {
            if doomed_names.contains(object.name.as_str()) {
                continue;
            }
            if object.name.starts_with("manifest/") {
                report.manifests_kept += 1;
            } else if object.name.starts_with("blob/") {
                report.blobs_kept += 1;
            }
        }
        // Manifests first: a crash half-way leaves blobs without manifests, never the reverse.
        let (manifests, blobs): (Vec<_>, Vec<_>) = doomed
            .into_iter()
            .partition(|o| o.name.starts_with("manifest/"));
        for object in manifests.iter().chain(blobs.iter()) {
            // A freeze may have written this object again since the listing (a reused blob
            // refreshed, a manifest re-frozen): look once more, keep it if it is young now.
            let fresh = self.object_info(&object.name).await?;
            let now = time::OffsetDateTime::now_utc();
            let young_now = fresh.as_ref().is_some_and(|info| {
                info.modified
                    .and_then(|at| Duration::try_from(now - at).ok())
                    .is_none_or(|age| age < grace)
            });
            if fresh.is_none() {
                continue;
            }
            if young_now {
                report.rewritten_kept += 1;
                continue;
            }
            let timeout = self.request_timeout();
            match tokio::time::timeout(timeout, self.object_store().delete(&object.name)).await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => return Err(store_error("delete", err)),
                Err(_) => {
                    return Err(SnapshotError::Timeout {
                        op: "delete",
                        after: timeout,
                    })
                }
            }
            if object.name.starts_with("manifest/") {
                report.manifests_deleted += 1;
            } else {
                report.blobs_deleted += 1;
                report.bytes_freed += object.size;
            }
        }
        // Every listed object's chunks stay, the deleted ones' included: their delete purged
        // them, and a doomed object written again since the listing may still use them.
        let live_nuids: HashSet<&str> = objects.iter().map(|o| o.nuid.as_str()).collect();
        report.chunks = self.sweep_orphan_chunks(&live_nuids, grace).await?;
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(name: &str, age_secs: Option<u64>) -> ListedObject {
        ListedObject {
            name: name.to_string(),
            size: 10,
            age: age_secs.map(Duration::from_secs),
            nuid: format!("nuid-{name}"),
        }
    }

    #[test]
    fn an_empty_run_store_with_old_snapshots_refuses_the_sweep() {
        let m = format!("manifest/{}", "a".repeat(64));
        let grace = Duration::from_secs(3600);
        let roots = |runs| GcRoots {
            runs,
            ..GcRoots::default()
        };
        // (runs, objects, refused)
        let cases = [
            (0, vec![object(&m, Some(7200))], true),
            (0, vec![object(&m, Some(10))], false),
            (0, vec![], false),
            (1, vec![object(&m, Some(7200))], false),
            (
                0,
                vec![object(&format!("blob/{}", "b".repeat(64)), Some(7200))],
                false,
            ),
        ];
        for (runs, objects, refused) in cases {
            assert_eq!(
                sweep_refusal(&roots(runs), &objects, grace).is_some(),
                refused,
                "{runs} {objects:?}"
            );
        }
    }

    #[test]
    fn sweep_table() {
        let a = "a".repeat(64);
        let b = "b".repeat(64);
        let objects = vec![
            object(&format!("blob/{a}"), Some(7200)),     // marked: kept
            object(&format!("blob/{b}"), Some(7200)),     // old, unmarked: deleted
            object(&format!("manifest/{b}"), Some(7200)), // old, unmarked: deleted
            object(&format!("manifest/{a}"), Some(10)),   // young: kept
            object("blob/not-a-digest", Some(7200)),      // not ours: kept
            object(&format!("blob/{}", "c".repeat(64)), None), // age unknown: kept
        ];
        let marked: HashSet<String> = [format!("blob/{a}")].into_iter().collect();
        let doomed: Vec<&str> = sweep_candidates(&objects, &marked, Duration::from_secs(3600))
            .iter()
            .map(|o| o.name.as_str())
            .collect();
        assert_eq!(doomed, vec![format!("blob/{b}"), format!("manifest/{b}")]);
    }
}
