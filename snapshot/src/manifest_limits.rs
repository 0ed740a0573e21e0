//! The `[snapshot]` caps on manifests ([`SnapshotLimits`]) and the byte caps on the manifest
//! objects a reader takes into memory. A reader counts a manifest's entries and bytes as its
//! pages arrive ([`Tally`]) and stops at the first cap passed, so a manifest claiming ten
//! million entries costs what its first million do, and an index listing more pages than the
//! entry cap is refused before any page is fetched (every page holds at least one entry).
//! Writers are held to the same caps, so a freeze never stores what readers refuse. No I/O.

use loopgate_common::config::SnapshotLimits;
use loopgate_protocol::snapshot::ManifestEntry;

use crate::error::{over_limit, SnapshotError};

/// Bytes a paged index spends per page it lists (a quoted sha256 and a comma: 67), rounded up.
const INDEX_BYTES_PER_PAGE: u64 = 68;
/// A manifest head may always be this large: a flat manifest holds at most
/// `PAGED_MIN_ENTRIES` (256) entries, which fit with paths of up to 4 KiB each.
const MIN_HEAD_BYTES: u64 = 8 * 1024 * 1024;
/// The most a manifest page may be recorded as: `MAX_PAGE_ENTRIES` (1024) entries with paths
/// of up to 4 KiB, JSON escapes included, fit.
pub(crate) const MAX_PAGE_BYTES: u64 = 32 * 1024 * 1024;

/// The most a manifest head (`manifest/<id>`: a flat manifest or a paged index) may be
/// recorded as: an index listing one page per allowed entry, at least [`MIN_HEAD_BYTES`].
pub(crate) fn head_limit(limits: &SnapshotLimits) -> u64 {
    limits
        .max_manifest_entries
        .saturating_mul(INDEX_BYTES_PER_PAGE)
        .saturating_add(64)
        .max(MIN_HEAD_BYTES)
}

/// Entries and bytes of one manifest counted so far, against the caps.
#[derive(Debug)]
pub(crate) struct Tally<'a> {
    id: &'a str,
    limits: SnapshotLimits,
    entries: u64,
    bytes: u64,
}

impl<'a> Tally<'a> {
    pub(crate) fn new(id: &'a str, limits: SnapshotLimits) -> Tally<'a> {
        Tally {
            id,
            limits,
            entries: 0,
            bytes: 0,
        }
    }

    fn too_many(&self, detail: String) -> SnapshotError {
        over_limit(SnapshotError::TooManyEntries {
            id: self.id.to_string(),
            limit: self.limits.max_manifest_entries,
            detail,
        })
    }

    /// Before any page is fetched: an index of `pages` pages lists at least `pages` entries
    /// (and at most `MAX_PAGE_ENTRIES` times that).
    pub(crate) fn check_index(&self, pages: usize) -> Result<(), SnapshotError> {
        if pages as u64 > self.limits.max_manifest_entries {
            return Err(self.too_many(format!(
                "its index lists {pages} pages of at least one entry each"
            )));
        }
        Ok(())
    }

    /// Count `entries` (a whole flat manifest, or the next page); `what` says how far the read
    /// got, for the error (e.g. "after 3 of its 9766 pages").
    pub(crate) fn add(
        &mut self,
        entries: &[ManifestEntry],
        what: impl FnOnce() -> String,
    ) -> Result<(), SnapshotError> {
        self.entries = self.entries.saturating_add(entries.len() as u64);
        if self.entries > self.limits.max_manifest_entries {
            return Err(self.too_many(format!("{} entries {}", self.entries, what())));
        }
        for entry in entries {
            self.bytes = self.bytes.saturating_add(entry.size);
        }
        if self.bytes > self.limits.max_tree_bytes {
            return Err(over_limit(SnapshotError::TreeTooLarge {
                id: self.id.to_string(),
                limit: self.limits.max_tree_bytes,
            }));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn entries(n: usize, size: u64) -> Vec<ManifestEntry> {
        (0..n)
            .map(|i| ManifestEntry {
                path: format!("f{i:08}"),
                mode: 0o644,
                size,
                sha256: "a".repeat(64),
            })
            .collect()
    }

    fn limits(entries: u64, bytes: u64) -> SnapshotLimits {
        SnapshotLimits {
            max_manifest_entries: entries,
            max_tree_bytes: bytes,
        }
    }

    #[test]
    fn entries_are_counted_across_pages_up_to_the_cap() {
        let mut tally = Tally::new("snap", limits(2500, u64::MAX));
        let page = entries(1024, 1);
        tally.add(&page, || "p1".into()).unwrap();
        tally.add(&page, || "p2".into()).unwrap();
        let err = tally.add(&page, || "after 3 of its 9766 pages".into());
        match err {
            Err(SnapshotError::TooManyEntries { id, limit, detail }) => {
                assert_eq!((id.as_str(), limit), ("snap", 2500));
                assert_eq!(detail, "3072 entries after 3 of its 9766 pages");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_index_with_more_pages_than_entries_allowed_is_refused_unread() {
        let tally = Tally::new("snap", limits(10, u64::MAX));
        assert!(tally.check_index(10).is_ok());
        assert!(matches!(
            tally.check_index(11),
            Err(SnapshotError::TooManyEntries { .. })
        ));
    }

    #[test]
    fn bytes_are_summed_without_overflow() {
        let mut tally = Tally::new("snap", limits(100, 1000));
        assert!(tally.add(&entries(2, 500), String::new).is_ok());
        assert!(matches!(
            tally.add(&entries(1, 1), String::new),
            Err(SnapshotError::TreeTooLarge { limit: 1000, .. })
        ));
        let mut huge = Tally::new("snap", limits(100, u64::MAX - 1));
        assert!(matches!(
            huge.add(&entries(3, u64::MAX / 2), String::new),
            Err(SnapshotError::TreeTooLarge { .. })
        ));
    }

    #[test]
    fn head_caps() {
        assert_eq!(head_limit(&limits(10, 1)), MIN_HEAD_BYTES);
        assert_eq!(head_limit(&limits(1_000_000, 1)), 68_000_064);
        assert_eq!(head_limit(&limits(u64::MAX, 1)), u64::MAX);
    }
}
