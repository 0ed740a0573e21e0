//! The cache's bookkeeping, without I/O: which blobs and trees it holds, how many bytes, in
//! which order they were last used, and what to evict to get back under the byte budget.

use std::collections::{BTreeMap, HashMap};

/// One thing the cache holds on disk.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Item {
    /// `blobs/<sha256>`.
    Blob(String),
    /// `trees/<slot>`: a materialized tree.
    Tree(u64),
}

#[derive(Debug, Default)]
pub(crate) struct Lru {
    /// Item -> (bytes, last use tick).
    items: HashMap<Item, (u64, u64)>,
    /// Last use tick -> item (ticks are unique).
    order: BTreeMap<u64, Item>,
    bytes: u64,
    tick: u64,
}

impl Lru {
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    #[cfg(test)]
    pub(crate) fn contains(&self, item: &Item) -> bool {
        self.items.contains_key(item)
    }

    /// Add `item` (or refresh it) as the most recently used.
    pub(crate) fn insert(&mut self, item: Item, bytes: u64) {
        self.remove(&item);
        self.tick += 1;
        self.items.insert(item.clone(), (bytes, self.tick));
        self.order.insert(self.tick, item);
        self.bytes += bytes;
    }

    /// Mark `item` used now; false when it is not held.
    pub(crate) fn touch(&mut self, item: &Item) -> bool {
        match self.items.get(item).copied() {
            Some((bytes, _)) => {
                self.insert(item.clone(), bytes);
                true
            }
            None => false,
        }
    }

    pub(crate) fn remove(&mut self, item: &Item) -> bool {
        match self.items.remove(item) {
            Some((bytes, tick)) => {
                self.order.remove(&tick);
                self.bytes -= bytes;
                true
            }
            None => false,
        }
    }

    /// Remove least recently used items until at most `budget` bytes are held; what was
    /// removed, oldest first (the caller deletes them from disk).
    pub(crate) fn evict_to(&mut self, budget: u64) -> Vec<Item> {
        let mut evicted = Vec::new();
        while self.bytes > budget {
            let Some((_, item)) = self.order.pop_first() else {
                break;
            };
            if let Some((bytes, _)) = self.items.remove(&item) {
                self.bytes -= bytes;
            }
            evicted.push(item);
        }
        evicted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(s: &str) -> Item {
        Item::Blob(s.to_string())
    }

    #[test]
    fn eviction_table() {
        // (inserts, touches, budget, evicted)
        type Case = (
            &'static [(&'static str, u64)],
            &'static [&'static str],
            u64,
            &'static [&'static str],
        );
        let cases: &[Case] = &[
            (&[("a", 10), ("b", 10), ("c", 10)], &[], 30, &[]),
            (&[("a", 10), ("b", 10), ("c", 10)], &[], 20, &["a"]),
            (&[("a", 10), ("b", 10), ("c", 10)], &["a"], 20, &["b"]),
            (
                &[("a", 10), ("b", 10), ("c", 10)],
                &["a", "b"],
                5,
                &["c", "a", "b"],
            ),
            (&[("a", 10), ("a", 5)], &[], 5, &[]),
            (&[], &["x"], 0, &[]),
        ];
        for (inserts, touches, budget, want) in cases {
            let mut lru = Lru::default();
            for (name, bytes) in *inserts {
                lru.insert(blob(name), *bytes);
            }
            for name in *touches {
                lru.touch(&blob(name));
            }
            let got = lru.evict_to(*budget);
            let want: Vec<Item> = want.iter().map(|n| blob(n)).collect();
            assert_eq!(got, want, "{inserts:?} {touches:?} {budget}");
            assert!(lru.bytes() <= *budget);
        }
    }

    #[test]
    fn trees_and_blobs_share_the_budget() {
        let mut lru = Lru::default();
        lru.insert(Item::Tree(1), 100);
        lru.insert(blob("a"), 10);
        assert!(lru.contains(&Item::Tree(1)));
        assert_eq!(lru.evict_to(50), vec![Item::Tree(1)]);
        assert!(lru.remove(&blob("a")));
        assert!(!lru.remove(&blob("a")));
        assert_eq!(lru.bytes(), 0);
    }
}
