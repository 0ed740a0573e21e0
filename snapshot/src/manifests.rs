//! Storing and reading manifests.
//!
//! A snapshot's id is always the sha256 of its canonical flat manifest
//! (`loopgate_protocol::snapshot::Manifest::canonical_bytes`). How it is *stored* depends on size:
//!
//! - up to `PAGED_MIN_ENTRIES` entries: `manifest/<id>` holds the canonical bytes themselves;
//! - larger: `manifest/<id>` holds a small index `{"paged":1,"v":1,"pages":[sha256...]}` and each
//!   page is a blob (`blob/<sha256>`) holding a JSON array of consecutive entries. Page
//!   boundaries are content-defined (a path whose hash has a given bit pattern ends a page), so
//!   adding, removing or changing one file changes one page and the index, and unchanged pages
//!   are shared with the previous snapshot: re-freezing a 10k-file tree after a one-file change
//!   uploads tens of kilobytes of manifest, not a megabyte.
//!
//! Readers accept both forms and always check the reassembled manifest against the id, so a
//! tampered index or page is an `Integrity` error exactly like a tampered flat manifest. The
//! head is untrusted until then, so it is read only within a byte cap, and a paged manifest
//! is checked as its pages stream in: each page against the digest the index names for it
//! (on arrival, before it is appended), its entry count (1 to `MAX_PAGE_ENTRIES`), its paths
//! following the previous page's in order, and the entries and bytes so far against the
//! `[snapshot]` caps (`manifest_limits.rs`). The first failure stops the read: the pages after
//! it are never fetched. Writers are held to the same caps.

use std::ops::Range;

use futures::{StreamExt, TryStreamExt};
use loopgate_protocol::snapshot::{sha256_hex, Manifest, ManifestEntry, SnapshotId};
use serde::{Deserialize, Serialize};

use crate::cache::pages::Page;
use crate::cache::WorkspaceCache;
use crate::error::{check_digest, SnapshotError};
use crate::manifest_limits::{head_limit, Tally, MAX_PAGE_BYTES};
use crate::stat_cache::StatCache;
use crate::store::{manifest_object_name, SnapshotStore};

/// Manifests with more entries than this are stored paged.
pub const PAGED_MIN_ENTRIES: usize = 1024;
/// On average one page per this many entries (must be a power of two).
pub const PAGE_SPREAD: u32 = 128;
/// A page never holds more entries than this.
pub const MAX_PAGE_ENTRIES: usize = 1024;
/// Pages fetched at once when reading a paged manifest.
const PAGE_FETCH_CONCURRENCY: usize = 8;

/// The stored index of a paged manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PagedIndex {
    /// Format marker, always 1.
    pub paged: u32,
    /// The manifest version of the reassembled manifest.
    pub v: u32,
    /// sha256 of each page, in path order.
    pub pages: Vec<String>,
}

/// Does `path` end a page? A content-defined cut: about one path in `PAGE_SPREAD`.
fn ends_page(path: &str) -> bool {
    let digest = sha2::Digest::finalize(<sha2::Sha256 as sha2::Digest>::new_with_prefix(path));
    let value = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
    value % PAGE_SPREAD == 0
}

/// Index ranges of the pages of `entries` (sorted by path).
pub fn page_ranges(entries: &[ManifestEntry]) -> Vec<Range<usize>> {
    let mut ranges = Vec::new();
    let mut start = 0;
    for (i, entry) in entries.iter().enumerate() {
        if ends_page(&entry.path) || i + 1 - start >= MAX_PAGE_ENTRIES {
            ranges.push(start..i + 1);
            start = i + 1;
        }
    }
    if start < entries.len() {
        ranges.push(start..entries.len());
    }
    ranges
}

/// The stored form of a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredForm {
    /// The snapshot id (sha256 of the canonical flat manifest).
    pub id: SnapshotId,
    /// The bytes of `manifest/<id>`: the flat manifest, or the paged index.
    pub head: Vec<u8>,
    /// The pages (sha256, bytes) the index refers to (none for a flat manifest).
    pub pages: Vec<(String, Vec<u8>)>,
}

/// The stored form of a manifest, serialized once: a paged manifest's id is hashed from its
/// pages' bytes (the canonical flat form is the pages' entries joined in order), not from a
/// second serialization of every entry.
pub fn stored_form(manifest: &Manifest) -> StoredForm {
    if manifest.entries.len() <= PAGED_MIN_ENTRIES {
        let head = manifest.canonical_bytes();
        return StoredForm {
            id: sha256_hex(&head),
            head,
            pages: Vec::new(),
        };
    }
    let copy;
    let sorted: &[ManifestEntry] = if manifest.is_sorted() {
        &manifest.entries
    } else {
        let mut entries = manifest.entries.clone();
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        copy = entries;
        &copy
    };
    let pages: Vec<(String, Vec<u8>)> = page_ranges(sorted)
        .into_iter()
        .map(|range| {
            // Serializing plain structs of strings and integers cannot fail.
            let bytes = serde_json::to_vec(&sorted[range]).unwrap_or_default();
            (sha256_hex(&bytes), bytes)
        })
        .collect();
    // `{"v":1,"entries":[` + each page without its brackets, comma-joined + `]}`.
    let empty = serde_json::to_vec(&Manifest {
        v: manifest.v,
        entries: Vec::new(),
    })
    .unwrap_or_default();
    let (open, close) = empty.split_at(empty.len().saturating_sub(2));
    let mut hasher = <sha2::Sha256 as sha2::Digest>::new();
    sha2::Digest::update(&mut hasher, open);
    for (i, (_, bytes)) in pages.iter().enumerate() {
        if i > 0 {
            sha2::Digest::update(&mut hasher, b",");
        }
        let body = bytes
            .get(1..bytes.len().saturating_sub(1))
            .unwrap_or_default();
        sha2::Digest::update(&mut hasher, body);
    }
    sha2::Digest::update(&mut hasher, close);
    let id = hex::encode(sha2::Digest::finalize(hasher));
    let index = PagedIndex {
        paged: 1,
        v: manifest.v,
        pages: pages.iter().map(|(sha, _)| sha.clone()).collect(),
    };
    StoredForm {
        id,
        head: serde_json::to_vec(&index).unwrap_or_default(),
        pages,
    }
}

/// Hold the pages of `manifest`, stored as `pages` (digests in order, see [`stored_form`]), in
/// `cache`, so the next read of a manifest sharing them fetches only the others. Pages already
/// held are only marked used.
pub(crate) fn hold_pages(cache: &WorkspaceCache, manifest: &Manifest, pages: &[String]) {
    let missing: Vec<&String> = pages.iter().filter(|sha| !cache.holds_page(sha)).collect();
    if missing.is_empty() || !manifest.is_sorted() {
        return;
    }
    let ranges = page_ranges(&manifest.entries);
    if ranges.len() != pages.len() {
        return;
    }
    for (sha, range) in pages.iter().zip(ranges) {
        if missing.contains(&sha) {
            cache.hold_page(sha, Page::from(&manifest.entries[range]));
        }
    }
}

/// What writing a manifest cost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManifestWrite {
    pub id: SnapshotId,
    /// Bytes of the index (or flat manifest) and pages that had to be uploaded.
    pub bytes_uploaded: u64,
    /// The page blobs the manifest refers to (present in the store afterwards).
    pub pages: Vec<String>,
}

impl SnapshotStore {
    /// Store the manifest (blobs must already be there) and return its id.
    pub async fn put_manifest(&self, manifest: &Manifest) -> Result<SnapshotId, SnapshotError> {
        manifest
            .validate()
            .map_err(SnapshotError::InvalidManifest)?;
        Ok(self.write_manifest(manifest, None).await?.id)
    }

    /// Store a manifest built by `Manifest::new` (validated there); pages `known` holds as
    /// present are not even looked up. A manifest over this handle's `[snapshot]` caps is
    /// refused (`TooManyEntries`, `TreeTooLarge`) before anything is uploaded: no reader with
    /// the same caps would accept it.
    pub(crate) async fn write_manifest(
        &self,
        manifest: &Manifest,
        known: Option<&StatCache>,
    ) -> Result<ManifestWrite, SnapshotError> {
        let StoredForm { id, head, pages } = stored_form(manifest);
        Tally::new(&id, self.limits()).add(&manifest.entries, || "to write".to_string())?;
        let mut bytes_uploaded = 0;
        for (sha, bytes) in &pages {
            let present = known.is_some_and(|known| known.is_present(sha));
            if !present && self.upload_if_missing(sha, bytes).await? {
                bytes_uploaded += bytes.len() as u64;
            }
        }
        let name = manifest_object_name(&id);
        if self.object_size(&name).await? != Some(head.len() as u64) {
            self.put_object(&name, &head).await?;
            bytes_uploaded += head.len() as u64;
        }
        Ok(ManifestWrite {
            id,
            bytes_uploaded,
            pages: pages.into_iter().map(|(sha, _)| sha).collect(),
        })
    }

    /// Fetch, verify against its id and validate a manifest.
    pub async fn manifest(&self, id: &str) -> Result<Manifest, SnapshotError> {
        Ok(self.manifest_with_pages(id).await?.0)
    }

    /// The manifest and the page blobs it is stored in (empty for a flat manifest).
    pub async fn manifest_with_pages(
        &self,
        id: &str,
    ) -> Result<(Manifest, Vec<String>), SnapshotError> {
        self.manifest_with_pages_via(id, None).await
    }

    /// [`SnapshotStore::manifest_with_pages`], taking the pages `cache` holds from it instead
    /// of the store and holding the others it fetched. The reassembled manifest is checked
    /// against `id` all the same.
    pub(crate) async fn manifest_with_pages_via(
        &self,
        id: &str,
        cache: Option<&WorkspaceCache>,
    ) -> Result<(Manifest, Vec<String>), SnapshotError> {
        check_digest(id)?;
        let name = manifest_object_name(id);
        let bytes = self
            .get_object(&name, head_limit(&self.limits()))
            .await?
            .ok_or_else(|| SnapshotError::ManifestNotFound { id: id.to_string() })?;
        let integrity = |reason: String| SnapshotError::Integrity {
            path: name.clone(),
            reason,
        };
        let actual = sha256_hex(&bytes);
        let (manifest, pages) = if actual == id {
            let manifest: Manifest = serde_json::from_slice(&bytes)
                .map_err(|err| integrity(format!("manifest is not valid JSON: {err}")))?;
            Tally::new(id, self.limits()).add(&manifest.entries, || "in all".to_string())?;
            (manifest, Vec::new())
        } else {
            let index: PagedIndex = serde_json::from_slice(&bytes)
                .map_err(|_| integrity(format!("manifest hashes to {actual}")))?;
            if index.paged != 1 {
                return Err(integrity(format!(
                    "unknown paged manifest format {}",
                    index.paged
                )));
            }
            let entries = self.read_pages(id, &index.pages, cache).await?;
            let manifest = Manifest {
                v: index.v,
                entries,
            };
            let rebuilt = manifest.id();
            if rebuilt != id {
                return Err(integrity(format!(
                    "paged manifest reassembles to {rebuilt}"
                )));
            }
            (manifest, index.pages)
        };
        manifest
            .validate()
            .map_err(|err| integrity(format!("manifest is invalid: {err}")))?;
        Ok((manifest, pages))
    }

    /// Fetch (verified) and concatenate the pages of manifest `id` in order, checking each as
    /// it arrives (digest, entry count, path order, the caps so far) and stopping at the first
    /// failure; pages `cache` holds are not fetched, the others are held there afterwards.
    /// Up to `PAGE_FETCH_CONCURRENCY` pages are in flight ahead of the one being checked.
    async fn read_pages(
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
        // `blob_within` checks the bytes against `sha`: only verified pages are held.
        let bytes = self
            .blob_within(&sha, MAX_PAGE_BYTES)
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
    use std::collections::HashSet;

    fn entries(n: usize) -> Vec<ManifestEntry> {
        let mut entries: Vec<ManifestEntry> = (0..n)
            .map(|i| ManifestEntry {
                path: format!("dir{}/file{i:05}.txt", i % 37),
                mode: 0o644,
                size: i as u64,
                sha256: sha256_hex(i.to_string().as_bytes()),
            })
            .collect();
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        entries
    }

    #[test]
    fn pages_cover_every_entry_once_in_order() {
        for n in [0, 1, 2, 500, 5000] {
            let entries = entries(n);
            let ranges = page_ranges(&entries);
            let mut next = 0;
            for range in &ranges {
                assert_eq!(range.start, next, "n={n}");
                assert!(!range.is_empty() && range.len() <= MAX_PAGE_ENTRIES);
                next = range.end;
            }
            assert_eq!(next, n);
        }
        let ranges = page_ranges(&entries(20_000));
        let average = 20_000 / ranges.len();
        assert!((32..=512).contains(&average), "average page {average}");
    }

    #[test]
    fn the_id_hashed_from_the_pages_is_the_manifest_id() {
        for n in [0, 1, PAGED_MIN_ENTRIES, PAGED_MIN_ENTRIES + 1, 5000] {
            let manifest = Manifest::new(entries(n)).unwrap();
            assert_eq!(stored_form(&manifest).id, manifest.id(), "n={n}");
            let mut unsorted = manifest.clone();
            unsorted.entries.reverse();
            assert_eq!(stored_form(&unsorted).id, manifest.id(), "n={n}, unsorted");
        }
    }

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

    #[test]
    fn small_manifests_are_stored_flat() {
        let manifest = Manifest::new(entries(10)).unwrap();
        let form = stored_form(&manifest);
        assert!(form.pages.is_empty());
        assert_eq!(sha256_hex(&form.head), manifest.id());
        assert_eq!(form.id, manifest.id());
    }

    #[test]
    fn one_change_touches_one_page() {
        let before = Manifest::new(entries(10_000)).unwrap();
        let mut changed = before.clone();
        changed.entries[4321].sha256 = sha256_hex(b"new content");
        let pages_before = stored_form(&before).pages;
        let StoredForm {
            head,
            pages: pages_after,
            ..
        } = stored_form(&changed);
        let old: HashSet<&String> = pages_before.iter().map(|(sha, _)| sha).collect();
        let new_pages: Vec<_> = pages_after
            .iter()
            .filter(|(sha, _)| !old.contains(sha))
            .collect();
        assert_eq!(new_pages.len(), 1);
        let uploaded = head.len() + new_pages[0].1.len();
        assert!(uploaded < 64 * 1024, "{uploaded} bytes");
        let index: PagedIndex = serde_json::from_slice(&head).unwrap();
        let reassembled: Vec<ManifestEntry> = index
            .pages
            .iter()
            .flat_map(|sha| {
                let bytes = &pages_after.iter().find(|(s, _)| s == sha).unwrap().1;
                serde_json::from_slice::<Vec<ManifestEntry>>(bytes).unwrap()
            })
            .collect();
        assert_eq!(reassembled, changed.entries);
    }
}
