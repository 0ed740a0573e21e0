//! Manifests this process has already verified or written, by id: the digest of the head it
//! read or wrote and the pages and groups the head stands for. A later read whose head hashes
//! the same is the same manifest (pages and groups are content-addressed), so it is put
//! together from held pages without fetching the groups or checking the whole against its id
//! again. The most recently used also keep the manifest itself, shared, so a read of one of
//! them copies nothing. Bounded by count, by the page digests listed and by the entries kept
//! assembled, least recently used first out. No I/O.

use std::collections::HashMap;
use std::sync::Arc;

use loopgate_protocol::snapshot::Manifest;

/// At most this many manifests are known at once.
pub(crate) const MAX_KNOWN_MANIFESTS: usize = 64;
/// At most this many page digests are listed over all known manifests (about 6 MiB of
/// digests; a tree of 16,000 files has about 500 pages).
pub(crate) const MAX_KNOWN_PAGES: usize = 64 * 1024;
/// At most this many entries are kept in assembled manifests over all known ones (a few
/// trees of 16,000 files; about 12 MiB where no tree or caller shares them).
pub(crate) const MAX_ASSEMBLED_ENTRIES: usize = 64 * 1024;

/// A paged manifest as verified or written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KnownManifest {
    /// sha256 of the head's bytes.
    pub(crate) head_sha256: String,
    /// The manifest version.
    pub(crate) v: u32,
    pub(crate) pages: Arc<[String]>,
    pub(crate) groups: Arc<[String]>,
    /// The manifest itself, as verified or written (dropped first when over the bound).
    pub(crate) assembled: Option<Arc<Manifest>>,
}

#[derive(Debug, Default)]
pub(crate) struct KnownManifests {
    /// Manifest id -> (what was known, last use tick).
    known: HashMap<String, (KnownManifest, u64)>,
    /// Page digests listed over all known manifests.
    pages: usize,
    /// Entries of the manifests kept assembled.
    assembled: usize,
    tick: u64,
}

fn assembled_len(known: &KnownManifest) -> usize {
    known.assembled.as_ref().map_or(0, |m| m.entries.len())
}

impl KnownManifests {
    /// What is known of manifest `id` when its head hashes to `head_sha256` (marked used).
    pub(crate) fn get(&mut self, id: &str, head_sha256: &str) -> Option<KnownManifest> {
        self.tick += 1;
        let (known, tick) = self.known.get_mut(id)?;
        if known.head_sha256 != head_sha256 {
            return None;
        }
        *tick = self.tick;
        Some(known.clone())
    }

    /// Know manifest `id` (a manifest listing more than `MAX_KNOWN_PAGES` pages is not kept).
    pub(crate) fn insert(&mut self, id: &str, mut known: KnownManifest) {
        if known.pages.len() > MAX_KNOWN_PAGES {
            return;
        }
        if assembled_len(&known) > MAX_ASSEMBLED_ENTRIES {
            known.assembled = None;
        }
        self.tick += 1;
        self.pages += known.pages.len();
        self.assembled += assembled_len(&known);
        if let Some((earlier, _)) = self.known.insert(id.to_string(), (known, self.tick)) {
            self.pages -= earlier.pages.len();
            self.assembled -= assembled_len(&earlier);
        }
        while self.known.len() > MAX_KNOWN_MANIFESTS || self.pages > MAX_KNOWN_PAGES {
            let oldest = self
                .known
                .iter()
                .min_by_key(|(_, (_, tick))| *tick)
                .map(|(id, _)| id.clone());
            match oldest.and_then(|id| self.known.remove(&id)) {
                Some((gone, _)) => {
                    self.pages -= gone.pages.len();
                    self.assembled -= assembled_len(&gone);
                }
                None => break,
            }
        }
        while self.assembled > MAX_ASSEMBLED_ENTRIES {
            let oldest = self
                .known
                .values_mut()
                .filter(|(known, _)| known.assembled.is_some())
                .min_by_key(|(_, tick)| *tick);
            match oldest.and_then(|(known, _)| known.assembled.take()) {
                Some(gone) => self.assembled -= gone.entries.len(),
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn known(head: &str) -> KnownManifest {
        KnownManifest {
            head_sha256: head.to_string(),
            v: 1,
            pages: vec!["p".to_string()].into(),
            groups: Vec::new().into(),
            assembled: None,
        }
    }

    #[test]
    fn a_head_that_hashes_otherwise_is_not_known() {
        let mut manifests = KnownManifests::default();
        manifests.insert("id", known("h1"));
        assert_eq!(manifests.get("id", "h1"), Some(known("h1")));
        assert_eq!(
            manifests.get("id", "h2"),
            None,
            "another head under the same id"
        );
        assert_eq!(manifests.get("other", "h1"), None);
    }

    #[test]
    fn the_least_recently_used_go_first() {
        let mut manifests = KnownManifests::default();
        for i in 0..MAX_KNOWN_MANIFESTS {
            manifests.insert(&format!("m{i}"), known("h"));
        }
        assert!(manifests.get("m0", "h").is_some());
        manifests.insert("new", known("h"));
        assert_eq!(manifests.known.len(), MAX_KNOWN_MANIFESTS);
        assert!(manifests.get("m0", "h").is_some(), "used just before");
        assert!(manifests.get("m1", "h").is_none(), "the oldest went");
        assert!(manifests.get("new", "h").is_some());
    }

    #[test]
    fn the_page_digests_listed_are_bounded_too() {
        let mut manifests = KnownManifests::default();
        let big = |pages: usize| KnownManifest {
            pages: vec!["p".to_string(); pages].into(),
            ..known("h")
        };
        manifests.insert("a", big(MAX_KNOWN_PAGES / 2));
        manifests.insert("a", big(MAX_KNOWN_PAGES / 2));
        assert_eq!(
            manifests.pages,
            MAX_KNOWN_PAGES / 2,
            "known again, counted once"
        );
        manifests.insert("b", big(MAX_KNOWN_PAGES / 2));
        manifests.insert("c", big(1));
        assert!(
            manifests.get("a", "h").is_none(),
            "the oldest went to make room"
        );
        assert!(manifests.get("b", "h").is_some() && manifests.get("c", "h").is_some());
        assert_eq!(manifests.pages, MAX_KNOWN_PAGES / 2 + 1);
        manifests.insert("huge", big(MAX_KNOWN_PAGES + 1));
        assert!(manifests.get("huge", "h").is_none(), "too large to keep");
    }

    #[test]
    fn the_least_recently_used_give_up_their_assembled_manifest_first() {
        let assembled = |entries: usize| {
            Some(Arc::new(Manifest {
                v: 1,
                entries: crate::manifests::tests::entries(entries),
            }))
        };
        let mut manifests = KnownManifests::default();
        let third = MAX_ASSEMBLED_ENTRIES / 3;
        for id in ["a", "b", "c"] {
            let known = KnownManifest {
                assembled: assembled(third),
                ..known("h")
            };
            manifests.insert(id, known);
        }
        assert!(manifests.get("a", "h").unwrap().assembled.is_some());
        manifests.insert(
            "d",
            KnownManifest {
                assembled: assembled(third),
                ..known("h")
            },
        );
        let kept = |m: &mut KnownManifests, id: &str| m.get(id, "h").unwrap().assembled.is_some();
        assert!(
            !kept(&mut manifests, "b"),
            "the least recently used gave its up"
        );
        assert!(
            kept(&mut manifests, "a") && kept(&mut manifests, "c") && kept(&mut manifests, "d")
        );
        assert!(
            manifests.get("b", "h").is_some(),
            "and is known all the same"
        );
        assert_eq!(manifests.assembled, 3 * third);
        manifests.insert("a", known("h"));
        assert_eq!(manifests.assembled, 2 * third, "known again without it");
        manifests.insert(
            "huge",
            KnownManifest {
                assembled: assembled(MAX_ASSEMBLED_ENTRIES + 1),
                ..known("h")
            },
        );
        assert!(!kept(&mut manifests, "huge"), "too large to keep assembled");
        assert_eq!(manifests.assembled, 2 * third);
    }
}
