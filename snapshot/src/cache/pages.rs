//! Parsed manifest pages by digest, so a warm materialize fetches only the pages of a manifest
//! it has not seen (a one-file change is one new page and the index, not ~one page per 128
//! files). Pages are content-addressed: a page is held only after its bytes were checked
//! against its digest (fetched) or computed here (frozen), and a manifest reassembled from held
//! pages is still checked against its id, exactly as one fetched whole.
//!
//! Bounded by entries, least recently used first out. No I/O.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use loopgate_protocol::snapshot::ManifestEntry;

/// At most this many entries are held over all pages (about 40 MiB of paths and digests).
pub(crate) const MAX_PAGE_ENTRIES_HELD: usize = 256 * 1024;

pub(crate) type Page = Arc<[ManifestEntry]>;

#[derive(Debug, Default)]
pub(crate) struct PageCache {
    /// Page digest -> (page, last use tick).
    pages: HashMap<String, (Page, u64)>,
    /// Last use tick -> page digest (ticks are unique).
    order: BTreeMap<u64, String>,
    entries: usize,
    tick: u64,
    limit: usize,
}

impl PageCache {
    pub(crate) fn new(limit: usize) -> PageCache {
        PageCache {
            limit,
            ..PageCache::default()
        }
    }

    /// The page with digest `sha256`, if held (marked used).
    pub(crate) fn get(&mut self, sha256: &str) -> Option<Page> {
        let (page, tick) = self.pages.get_mut(sha256)?;
        self.order.remove(tick);
        self.tick += 1;
        *tick = self.tick;
        self.order.insert(self.tick, sha256.to_string());
        Some(page.clone())
    }

    #[cfg(test)]
    pub(crate) fn contains(&self, sha256: &str) -> bool {
        self.pages.contains_key(sha256)
    }

    /// Hold `page` (verified against `sha256` by the caller); evicts to stay within the limit.
    pub(crate) fn insert(&mut self, sha256: &str, page: Page) {
        if page.len() > self.limit || self.get(sha256).is_some() {
            return;
        }
        self.tick += 1;
        self.entries += page.len();
        self.pages.insert(sha256.to_string(), (page, self.tick));
        self.order.insert(self.tick, sha256.to_string());
        while self.entries > self.limit {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            if let Some((page, _)) = self.pages.remove(&oldest) {
                self.entries -= page.len();
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn entries(&self) -> usize {
        self.entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(n: usize) -> Page {
        (0..n)
            .map(|i| ManifestEntry {
                path: format!("f{i}"),
                mode: 0o644,
                size: 0,
                sha256: String::new(),
            })
            .collect()
    }

    #[test]
    fn least_recently_used_pages_go_first() {
        let mut cache = PageCache::new(10);
        cache.insert("a", page(4));
        cache.insert("b", page(4));
        assert!(cache.get("a").is_some());
        cache.insert("c", page(4));
        assert!(cache.contains("a") && cache.contains("c"));
        assert!(!cache.contains("b"), "b was used least recently");
        assert_eq!(cache.entries(), 8);
        cache.insert("huge", page(11));
        assert!(!cache.contains("huge"), "a page over the limit is not held");
        cache.insert("a", page(4));
        assert_eq!(cache.entries(), 8, "holding a page twice counts it once");
    }
}
