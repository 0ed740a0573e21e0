//! Storing and reading manifests.
//!
//! A snapshot's id is always the sha256 of its canonical flat manifest
//! (`loopgate_protocol::snapshot::Manifest::canonical_bytes`). How it is *stored* depends on size:
//!
//! - up to `PAGED_MIN_ENTRIES` entries: `manifest/<id>` holds the canonical bytes themselves;
//! - larger: the entries are cut into pages, each a blob (`blob/<sha256>`) holding a JSON array
//!   of consecutive entries, and the page digests into groups, each a blob holding a JSON array
//!   of page digests; `manifest/<id>` holds a small head `{"paged":2,"v":1,"groups":[...]}`.
//!   Both cuts are content-defined (a path whose hash has a given bit pattern ends a page, a
//!   page digest with one ends a group), so adding, removing or changing one file changes one
//!   page, one group and the head, and the rest is shared with the previous snapshot:
//!   re-freezing a 10k-file tree after a one-file change uploads a few kilobytes of manifest
//!   (a page of ~32 entries, a group of ~32 digests, a head of ~10 digests).
//! - Heads of the earlier form `{"paged":1,"v":1,"pages":[...]}` (every page digest in the
//!   head, pages of ~128 entries) are still read.
//!
//! Every one of these objects (flat manifest, head, page, group) is stored zstd-compressed
//! (`packed.rs`) and still named by, and verified against, the sha256 of its uncompressed JSON;
//! objects stored uncompressed by earlier writers read as before.
//!
//! Readers accept every form and always check the reassembled manifest against the id, so a
//! tampered head, group or page is an `Integrity` error exactly like a tampered flat manifest.
//! The head is untrusted until then, so it is read only within a byte cap; groups are checked
//! against their digests and counts; a paged manifest is checked as its pages stream in: each
//! page against the digest listed for it (on arrival, before it is appended), its entry count
//! (1 to `MAX_PAGE_ENTRIES`), its paths following the previous page's in order, and the
//! entries and bytes so far against the `[snapshot]` caps (`manifest_limits.rs`). The first
//! failure stops the read: the pages after it are never fetched. Writers are held to the same
//! caps.

use std::ops::Range;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use loopgate_protocol::snapshot::{sha256_hex, Manifest, ManifestEntry, SnapshotId};
use serde::{Deserialize, Serialize};

use crate::cache::known::KnownManifest;
use crate::cache::pages::Page;
use crate::cache::WorkspaceCache;
use crate::error::{check_digest, SnapshotError};
use crate::manifest_limits::{head_limit, Tally};
use crate::packed::{pack, unpack};
use crate::stat_cache::StatCache;
pub use crate::store::ManifestWrite;
use crate::store::{manifest_object_name, SnapshotStore};

/// Manifests with more entries than this are stored paged.
pub const PAGED_MIN_ENTRIES: usize = 256;
/// On average one page per this many entries (must be a power of two).
pub const PAGE_SPREAD: u32 = 32;
/// On average one group per this many pages (must be a power of two).
pub const GROUP_SPREAD: u32 = 32;
/// A group never lists more pages than this.
pub const MAX_GROUP_PAGES: usize = 1024;
/// The most a group may be recorded as: `MAX_GROUP_PAGES` quoted digests with commas.
pub(crate) const MAX_GROUP_BYTES: u64 = MAX_GROUP_PAGES as u64 * 67 + 2;
/// A page never holds more entries than this.
pub const MAX_PAGE_ENTRIES: usize = 1024;
/// Pages fetched at once when reading a paged manifest.
pub(crate) const PAGE_FETCH_CONCURRENCY: usize = 8;
/// Pages and groups a manifest write has in flight at once.
const PAGE_WRITE_CONCURRENCY: usize = 8;

/// The stored index of a paged manifest of the earlier form (read, no longer written).
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

/// The stored head of a paged manifest: its groups of page digests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupedIndex {
    /// Format marker, always 2.
    pub paged: u32,
    /// The manifest version of the reassembled manifest.
    pub v: u32,
    /// sha256 of each group (a JSON array of page digests), in path order.
    pub groups: Vec<String>,
}

/// A paged head of either form.
#[derive(Deserialize)]
#[serde(untagged)]
enum PagedHead {
    Grouped(GroupedIndex),
    Paged(PagedIndex),
}

/// Does the page with digest `sha` end a group? A content-defined cut on the digest itself:
/// about one page in `GROUP_SPREAD`.
fn ends_group(sha: &str) -> bool {
    let value = sha
        .get(..8)
        .and_then(|prefix| u32::from_str_radix(prefix, 16).ok())
        .unwrap_or(0);
    value % GROUP_SPREAD == 0
}

/// Index ranges of the groups of `pages` (digests in path order).
fn group_ranges(pages: &[String]) -> Vec<Range<usize>> {
    let mut ranges = Vec::new();
    let mut start = 0;
    for (i, sha) in pages.iter().enumerate() {
        if ends_group(sha) || i + 1 - start >= MAX_GROUP_PAGES {
            ranges.push(start..i + 1);
            start = i + 1;
        }
    }
    if start < pages.len() {
        ranges.push(start..pages.len());
    }
    ranges
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
    /// The bytes of `manifest/<id>`: the flat manifest, or the paged head.
    pub head: Vec<u8>,
    /// The pages (sha256, bytes) the groups list, in order (none for a flat manifest).
    pub pages: Vec<(String, Vec<u8>)>,
    /// The groups (sha256, bytes) the head lists, in order (none for a flat manifest).
    pub groups: Vec<(String, Vec<u8>)>,
    /// The entries each page holds (indexes into the sorted entries), in order.
    pub ranges: Vec<Range<usize>>,
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
            groups: Vec::new(),
            ranges: Vec::new(),
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
    let ranges = page_ranges(sorted);
    let pages: Vec<(String, Vec<u8>)> = ranges
        .iter()
        .cloned()
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
    let digests: Vec<String> = pages.iter().map(|(sha, _)| sha.clone()).collect();
    let groups: Vec<(String, Vec<u8>)> = group_ranges(&digests)
        .into_iter()
        .map(|range| {
            // Serializing strings cannot fail.
            let bytes = serde_json::to_vec(&digests[range]).unwrap_or_default();
            (sha256_hex(&bytes), bytes)
        })
        .collect();
    let index = GroupedIndex {
        paged: 2,
        v: manifest.v,
        groups: groups.iter().map(|(sha, _)| sha.clone()).collect(),
    };
    StoredForm {
        id,
        head: serde_json::to_vec(&index).unwrap_or_default(),
        pages,
        groups,
        ranges,
    }
}

/// Hold the pages of `manifest`, as `written` stored them, in `cache`, so the next read of a
/// manifest sharing them fetches only the others (pages already held are only marked used),
/// and remember its head as known: this process computed its id from these entries.
pub(crate) fn hold_pages(
    cache: &WorkspaceCache,
    manifest: &Arc<Manifest>,
    written: &ManifestWrite,
) {
    let ManifestWrite {
        id,
        head_sha256,
        pages,
        groups,
        page_ranges: ranges,
        ..
    } = written;
    if pages.is_empty() || ranges.len() != pages.len() || !manifest.is_sorted() {
        return;
    }
    for (sha, range) in pages.iter().zip(ranges) {
        if !cache.holds_page(sha) {
            match manifest.entries.get(range.clone()) {
                Some(entries) => cache.hold_page(sha, Page::from(entries)),
                None => return,
            }
        }
    }
    cache.remember_manifest(
        id,
        KnownManifest {
            head_sha256: head_sha256.clone(),
            v: manifest.v,
            pages: pages.clone().into(),
            groups: groups.clone().into(),
            assembled: Some(Arc::clone(manifest)),
        },
    );
}

/// A manifest as read, with the blobs it is stored in.
struct StoredManifest {
    manifest: Arc<Manifest>,
    pages: Vec<String>,
    groups: Vec<String>,
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
        let StoredForm {
            id,
            head,
            pages,
            groups,
            ranges,
        } = stored_form(manifest);
        Tally::new(&id, self.limits()).add(&manifest.entries, || "to write".to_string())?;
        // The pages and groups go up together, and the head is looked up meanwhile; it is
        // written only after them, so a head in the store always names stored objects.
        // Collected first: a stream over the lazy filter would not be `Send` for every
        // lifetime, which spawned tasks and axum handlers need.
        let puts: Vec<_> = pages
            .iter()
            .chain(&groups)
            .filter(|(sha, _)| !known.is_some_and(|known| known.is_present(sha)))
            .map(|(sha, bytes)| self.put_packed_if_missing(sha, bytes))
            .collect();
        let written = futures::stream::iter(puts)
            .buffer_unordered(PAGE_WRITE_CONCURRENCY)
            .try_collect::<Vec<u64>>();
        let name = manifest_object_name(&id);
        let (written, held) = futures::try_join!(written, self.object_info(&name))?;
        let mut bytes_uploaded: u64 = written.iter().sum();
        let held_size = held.as_ref().map(|info| info.size as u64);
        if held_size != Some(head.len() as u64) {
            let packed = pack(&head);
            if held_size != Some(packed.len() as u64) {
                self.put_object(&name, &packed, held.as_ref()).await?;
                bytes_uploaded += packed.len() as u64;
            }
        }
        Ok(ManifestWrite {
            id,
            bytes_uploaded,
            pages: pages.into_iter().map(|(sha, _)| sha).collect(),
            groups: groups.into_iter().map(|(sha, _)| sha).collect(),
            head_sha256: sha256_hex(&head),
            page_ranges: ranges,
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
        let stored = self.stored_manifest(id, None).await?;
        // Read without a cache: nothing else holds it, so this moves it out.
        Ok((Arc::unwrap_or_clone(stored.manifest), stored.pages))
    }

    /// The manifest and every blob it is stored in besides `manifest/<id>` (its pages and its
    /// groups; empty for a flat manifest): what a collector must keep.
    pub async fn manifest_with_objects(
        &self,
        id: &str,
    ) -> Result<(Manifest, Vec<String>), SnapshotError> {
        let stored = self.stored_manifest(id, None).await?;
        let mut objects = stored.pages;
        objects.extend(stored.groups);
        Ok((Arc::unwrap_or_clone(stored.manifest), objects))
    }

    /// [`SnapshotStore::manifest_with_pages`], taking the pages `cache` holds from it instead
    /// of the store and holding the others it fetched, with the manifest's groups too (both
    /// empty for a flat manifest). A manifest read from the store is checked against `id`
    /// all the same; one whose head this process verified or wrote comes from `cache` (shared
    /// where `cache` keeps it assembled).
    pub(crate) async fn manifest_with_pages_via(
        &self,
        id: &str,
        cache: Option<&WorkspaceCache>,
    ) -> Result<(Arc<Manifest>, Vec<String>, Vec<String>), SnapshotError> {
        let stored = self.stored_manifest(id, cache).await?;
        Ok((stored.manifest, stored.pages, stored.groups))
    }

    /// Fetch, verify against `id` and validate a manifest of any stored form.
    async fn stored_manifest(
        &self,
        id: &str,
        cache: Option<&WorkspaceCache>,
    ) -> Result<StoredManifest, SnapshotError> {
        check_digest(id)?;
        let name = manifest_object_name(id);
        let limit = head_limit(&self.limits());
        let stored = self
            .get_object(&name, limit)
            .await?
            .ok_or_else(|| SnapshotError::ManifestNotFound { id: id.to_string() })?;
        let bytes = unpack(&name, &stored, limit)?;
        let integrity = |reason: String| SnapshotError::Integrity {
            path: name.clone(),
            reason,
        };
        let actual = sha256_hex(&bytes);
        let stored = if actual == id {
            let manifest: Manifest = serde_json::from_slice(&bytes)
                .map_err(|err| integrity(format!("manifest is not valid JSON: {err}")))?;
            Tally::new(id, self.limits()).add(&manifest.entries, || "in all".to_string())?;
            StoredManifest {
                manifest: Arc::new(manifest),
                pages: Vec::new(),
                groups: Vec::new(),
            }
        } else if let Some((known, manifest)) =
            cache.and_then(|cache| cache.known_manifest(id, &actual))
        {
            // The head this process verified or wrote: the same groups, hence the same pages.
            return Ok(StoredManifest {
                manifest,
                pages: known.pages.to_vec(),
                groups: known.groups.to_vec(),
            });
        } else {
            let head: PagedHead = serde_json::from_slice(&bytes)
                .map_err(|_| integrity(format!("manifest hashes to {actual}")))?;
            let (v, pages, groups) = match head {
                PagedHead::Paged(index) if index.paged == 1 => (index.v, index.pages, Vec::new()),
                PagedHead::Grouped(index) if index.paged == 2 => {
                    let pages = self.read_groups(id, &index.groups).await?;
                    (index.v, pages, index.groups)
                }
                PagedHead::Paged(PagedIndex { paged, .. })
                | PagedHead::Grouped(GroupedIndex { paged, .. }) => {
                    return Err(integrity(format!("unknown paged manifest format {paged}")));
                }
            };
            let entries = self.read_pages(id, &pages, cache).await?;
            let manifest = Manifest { v, entries };
            let rebuilt = manifest.id();
            if rebuilt != id {
                return Err(integrity(format!(
                    "paged manifest reassembles to {rebuilt}"
                )));
            }
            StoredManifest {
                manifest: Arc::new(manifest),
                pages,
                groups,
            }
        };
        stored
            .manifest
            .validate()
            .map_err(|err| integrity(format!("manifest is invalid: {err}")))?;
        if let (Some(cache), false) = (cache, stored.pages.is_empty()) {
            cache.remember_manifest(
                id,
                KnownManifest {
                    head_sha256: actual,
                    v: stored.manifest.v,
                    pages: stored.pages.clone().into(),
                    groups: stored.groups.clone().into(),
                    assembled: Some(Arc::clone(&stored.manifest)),
                },
            );
        }
        Ok(stored)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::collections::HashSet;

    /// `n` entries in path order, spread over 37 directories (shared with `manifest_read`).
    pub(crate) fn entries(n: usize) -> Vec<ManifestEntry> {
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
        assert!((16..=128).contains(&average), "average page {average}");
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
    fn small_manifests_are_stored_flat() {
        let manifest = Manifest::new(entries(10)).unwrap();
        let form = stored_form(&manifest);
        assert!(form.pages.is_empty());
        assert_eq!(sha256_hex(&form.head), manifest.id());
        assert_eq!(form.id, manifest.id());
    }

    #[test]
    fn one_change_touches_one_page_and_one_group() {
        let before = Manifest::new(entries(10_000)).unwrap();
        let mut changed = before.clone();
        changed.entries[4321].sha256 = sha256_hex(b"new content");
        let StoredForm {
            pages: pages_before,
            groups: groups_before,
            ..
        } = stored_form(&before);
        let StoredForm {
            head,
            pages: pages_after,
            groups: groups_after,
            ..
        } = stored_form(&changed);
        let new = |before: &[(String, Vec<u8>)], after: &[(String, Vec<u8>)]| {
            let old: HashSet<String> = before.iter().map(|(sha, _)| sha.clone()).collect();
            after
                .iter()
                .filter(|(sha, _)| !old.contains(sha))
                .map(|(_, bytes)| bytes.len())
                .collect::<Vec<_>>()
        };
        let (new_pages, new_groups) = (
            new(&pages_before, &pages_after),
            new(&groups_before, &groups_after),
        );
        assert_eq!(new_pages.len(), 1, "pages");
        assert!((1..=2).contains(&new_groups.len()), "groups {new_groups:?}");
        let uploaded =
            head.len() + new_pages.iter().sum::<usize>() + new_groups.iter().sum::<usize>();
        // A page of ~32 entries (~4 KiB here), a group of ~32 digests, a small head.
        assert!(uploaded < 12 * 1024, "{uploaded} bytes");
        let index: GroupedIndex = serde_json::from_slice(&head).unwrap();
        assert_eq!(index.paged, 2);
        let reassembled: Vec<ManifestEntry> = index
            .groups
            .iter()
            .flat_map(|sha| {
                let bytes = &groups_after.iter().find(|(s, _)| s == sha).unwrap().1;
                serde_json::from_slice::<Vec<String>>(bytes).unwrap()
            })
            .flat_map(|sha| {
                let bytes = &pages_after.iter().find(|(s, _)| *s == sha).unwrap().1;
                serde_json::from_slice::<Vec<ManifestEntry>>(bytes).unwrap()
            })
            .collect();
        assert_eq!(reassembled, changed.entries);
    }

    #[test]
    fn groups_cover_every_page_once_in_order() {
        for n in [0, 1, 31, 32, 500, 5000] {
            let pages: Vec<String> = (0..n)
                .map(|i| sha256_hex(&[i as u8, (i >> 8) as u8]))
                .collect();
            let mut next = 0;
            for range in group_ranges(&pages) {
                assert_eq!(range.start, next, "n={n}");
                assert!(!range.is_empty() && range.len() <= MAX_GROUP_PAGES);
                next = range.end;
            }
            assert_eq!(next, n);
        }
    }
}
