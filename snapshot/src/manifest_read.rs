//! Reading a paged manifest's groups and pages: each fetched (within its byte cap, decoded
//! within the same cap: `packed.rs`) and verified against its digest as it arrives, then
//! checked (a group: 1 to `MAX_GROUP_PAGES` digests; a page: 1 to `MAX_PAGE_ENTRIES` entries,
//! paths after the previous page's, the `[snapshot]` caps so far) before the next is taken.
//! The stored forms and the head: `manifests.rs`.

use futures::{StreamExt, TryStreamExt};
use loopgate_protocol::snapshot::ManifestEntry;

use crate::cache::pages::Page;
use crate::cache::WorkspaceCache;
use crate::error::{check_digest, SnapshotError};
use crate::manifest_limits::{Tally, MAX_PAGE_BYTES};
use crate::manifests::{
    MAX_GROUP_BYTES, MAX_GROUP_PAGES, MAX_PAGE_ENTRIES, PAGE_FETCH_CONCURRENCY,
};
use crate::store::SnapshotStore;

impl SnapshotStore {
    /// Fetch (verified) the groups of manifest `id` and concatenate the page digests they
    /// list, checking each group's size and digests, and the count so far against the caps
    /// (every page holds at least one entry) before the next group is fetched.
    pub(crate) async fn read_groups(
        &self,
        id: &str,
        groups: &[String],
    ) -> Result<Vec<String>, SnapshotError> {
        let tally = Tally::new(id, self.limits());
        tally.check_index(groups.len())?;
        let fetches = groups
            .iter()
            .cloned()
            .map(|sha| async move { self.read_group(sha).await });
        let mut arriving = futures::stream::iter(fetches).buffered(PAGE_FETCH_CONCURRENCY);
        let mut pages = Vec::new();
        while let Some(listed) = arriving.try_next().await? {
            pages.extend(listed);
            tally.check_index(pages.len())?;
        }
        Ok(pages)
    }

    /// One group: verified against `sha`, 1 to `MAX_GROUP_PAGES` well-formed digests.
    async fn read_group(&self, sha: String) -> Result<Vec<String>, SnapshotError> {
        let integrity = |reason: String| SnapshotError::Integrity {
            path: format!("manifest group {sha}"),
            reason,
        };
        let bytes = self
            .packed_blob_within(&sha, MAX_GROUP_BYTES)
            .await
            .map_err(|err| match err {
                SnapshotError::BlobNotFound { .. } => integrity("group is missing".to_string()),
                other => other,
            })?;
        let listed: Vec<String> = serde_json::from_slice(&bytes)
            .map_err(|err| integrity(format!("group is not valid JSON: {err}")))?;
        if !(1..=MAX_GROUP_PAGES).contains(&listed.len()) {
            return Err(integrity(format!(
                "group lists {} pages (1 to {MAX_GROUP_PAGES} allowed)",
                listed.len()
            )));
        }
        if let Some(bad) = listed.iter().find(|page| check_digest(page).is_err()) {
            return Err(integrity(format!("group lists '{bad}', not a digest")));
        }
        Ok(listed)
    }

    /// Fetch (verified) and concatenate the pages of manifest `id` in order, checking each as
    /// it arrives (digest, entry count, path order, the caps so far) and stopping at the first
    /// failure; pages `cache` holds are not fetched, the others are held there afterwards.
    /// Up to `PAGE_FETCH_CONCURRENCY` pages are in flight ahead of the one being checked.
    pub(crate) async fn read_pages(
        &self,
        id: &str,
        pages: &[String],
        cache: Option<&WorkspaceCache>,
    ) -> Result<Vec<ManifestEntry>, SnapshotError> {
        let mut tally = Tally::new(id, self.limits());
        tally.check_index(pages.len())?;
        // Owned ids: a closure over `&String` makes the future not `Send` for every lifetime,
        // which axum handlers and spawned tasks need.
        let fetches = pages
            .iter()
            .cloned()
            .map(|sha| async move { self.read_page(sha, cache).await });
        let mut arriving = futures::stream::iter(fetches).buffered(PAGE_FETCH_CONCURRENCY);
        let mut entries: Vec<ManifestEntry> = Vec::new();
        let mut read = 0;
        while let Some((sha, page)) = arriving.try_next().await? {
            read += 1;
            let integrity = |reason: String| SnapshotError::Integrity {
                path: format!("manifest page {sha}"),
                reason,
            };
            if !page_size_is_valid(page.len()) {
                return Err(integrity(format!(
                    "page holds {} entries (1 to {MAX_PAGE_ENTRIES} allowed)",
                    page.len()
                )));
            }
            let previous = entries.last().map(|e| e.path.as_str());
            if let Some(at) = first_out_of_order(previous, &page) {
                return Err(integrity(format!("paths out of order at '{at}'")));
            }
            tally.add(&page, || {
                format!("after {read} of its {} pages", pages.len())
            })?;
            entries.extend(page.iter().cloned());
        }
        Ok(entries)
    }

    /// One page, from `cache` or the store (verified against `sha`, recorded as at most
    /// `MAX_PAGE_BYTES`); a page fetched is held in `cache`.
    async fn read_page(
        &self,
        sha: String,
        cache: Option<&WorkspaceCache>,
    ) -> Result<(String, Page), SnapshotError> {
        if let Some(page) = cache.and_then(|cache| cache.page(&sha)) {
            return Ok((sha, page));
        }
        // `packed_blob_within` checks the bytes against `sha`: only verified pages are held.
        let bytes = self
            .packed_blob_within(&sha, MAX_PAGE_BYTES)
            .await
            .map_err(|err| match err {
                SnapshotError::BlobNotFound { sha256 } => SnapshotError::Integrity {
                    path: format!("manifest page {sha256}"),
                    reason: "page is missing".to_string(),
                },
                other => other,
            })?;
        let page: Page = serde_json::from_slice::<Vec<ManifestEntry>>(&bytes)
            .map_err(|err| SnapshotError::Integrity {
                path: format!("manifest page {sha}"),
                reason: format!("page is not valid JSON: {err}"),
            })?
            .into();
        if let Some(cache) = cache {
            cache.hold_page(&sha, page.clone());
        }
        Ok((sha, page))
    }
}

/// A page's entry count is what a writer makes: 1 to `MAX_PAGE_ENTRIES`.
fn page_size_is_valid(entries: usize) -> bool {
    (1..=MAX_PAGE_ENTRIES).contains(&entries)
}

/// The first path of `page` that does not come strictly after the one before it (`previous`
/// for its first entry): a manifest's paths are sorted and unique.
fn first_out_of_order<'a>(previous: Option<&str>, page: &'a [ManifestEntry]) -> Option<&'a str> {
    let mut before = previous;
    for entry in page {
        if before.is_some_and(|b| b >= entry.path.as_str()) {
            return Some(&entry.path);
        }
        before = Some(&entry.path);
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::manifests::tests::entries;

    #[test]
    fn pages_hold_what_a_writer_makes_in_path_order() {
        assert!(!page_size_is_valid(0));
        assert!(page_size_is_valid(1) && page_size_is_valid(MAX_PAGE_ENTRIES));
        assert!(!page_size_is_valid(MAX_PAGE_ENTRIES + 1));
        let page = entries(3);
        assert_eq!(first_out_of_order(None, &page), None);
        assert_eq!(first_out_of_order(Some(""), &page), None);
        let last = page[2].path.clone();
        assert_eq!(
            first_out_of_order(Some(&last), &page),
            Some(page[0].path.as_str())
        );
        let mut twice = page.clone();
        twice[2] = twice[1].clone();
        assert_eq!(
            first_out_of_order(None, &twice),
            Some(page[1].path.as_str())
        );
    }
}
