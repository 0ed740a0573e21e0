//! A local stat cache for one workspace, as git's index: `(path, size, mtime, ctime, inode,
//! device) -> sha256`, so re-freezing a large tree re-hashes only files whose stat changed, plus
//! the set of blobs known to be in the store (everything materialized or frozen through this
//! cache), so unchanged files cost no store round trip either.
//!
//! Trust: the cache lives in the process that freezes (in memory, never inside the workspace),
//! so an agent working in the workspace cannot edit it. Faking a stat match (same size, inode
//! and timestamps with different bytes) needs `ctime` control, which unprivileged processes do
//! not have; even then the worst outcome is a snapshot holding the OLD content of that file,
//! never bytes that do not match their digest. Entries whose ctime/mtime fall within
//! `racy_window` of when they were recorded are re-hashed (git's "racy clean" problem).
//! "Known present" facts expire after `PRESENT_TTL`: keep the snapshot garbage-collection
//! grace period (`snapshot_gc`) well above it.

use std::collections::HashMap;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long a blob stays "known present" without asking the store.
pub const PRESENT_TTL: Duration = Duration::from_secs(3600);
/// Files changed this close to when their hash was recorded are re-hashed (sub-second
/// timestamps). Filesystems with whole-second timestamps get `COARSE_RACY_WINDOW`.
pub const RACY_WINDOW: Duration = Duration::from_millis(100);
pub const COARSE_RACY_WINDOW: Duration = Duration::from_secs(2);

/// What identifies one version of a file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
    pub inode: u64,
    pub device: u64,
}

impl FileStamp {
    pub fn of(metadata: &Metadata) -> FileStamp {
        let ns = |secs: i64, nanos: i64| i128::from(secs) * 1_000_000_000 + i128::from(nanos);
        FileStamp {
            size: metadata.len(),
            mtime_ns: ns(metadata.mtime(), metadata.mtime_nsec()),
            ctime_ns: ns(metadata.ctime(), metadata.ctime_nsec()),
            inode: metadata.ino(),
            device: metadata.dev(),
        }
    }

    /// Of a `stat` the workspace walk took.
    pub fn of_stat(stat: &loopgate_workspace_walk::FileStat) -> FileStamp {
        FileStamp {
            size: stat.size,
            mtime_ns: stat.mtime_ns,
            ctime_ns: stat.ctime_ns,
            inode: stat.inode,
            device: stat.device,
        }
    }

    fn coarse(&self) -> bool {
        self.mtime_ns % 1_000_000_000 == 0 && self.ctime_ns % 1_000_000_000 == 0
    }
}

#[derive(Debug, Clone)]
struct CachedFile {
    stamp: FileStamp,
    sha256: String,
    /// Wall clock (ns since the epoch) just before the content was read.
    recorded_at_ns: i128,
}

/// See the module docs. Cheap to create; give each workspace its own.
#[derive(Debug, Clone, Default)]
pub struct StatCache {
    files: HashMap<String, CachedFile>,
    present: HashMap<String, Instant>,
}

/// Now, in ns since the Unix epoch.
pub fn wall_clock_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
        .unwrap_or(0)
}

/// Is a hash recorded at `recorded_at_ns` for a file with `stamp` still trustworthy?
pub fn is_settled(stamp: &FileStamp, recorded_at_ns: i128) -> bool {
    let window = if stamp.coarse() {
        COARSE_RACY_WINDOW
    } else {
        RACY_WINDOW
    };
    let limit = recorded_at_ns - i128::try_from(window.as_nanos()).unwrap_or(i128::MAX);
    stamp.mtime_ns < limit && stamp.ctime_ns < limit
}

impl StatCache {
    pub fn new() -> StatCache {
        StatCache::default()
    }

    /// The cached sha256 of `path` if its stat still matches and the entry is not racy.
    pub fn lookup(&self, path: &str, stamp: &FileStamp) -> Option<&str> {
        let cached = self.files.get(path)?;
        (cached.stamp == *stamp && is_settled(stamp, cached.recorded_at_ns))
            .then_some(cached.sha256.as_str())
    }

    /// Remember `path`'s hash, read starting at `recorded_at_ns` (see `wall_clock_ns`).
    pub fn record(&mut self, path: &str, stamp: FileStamp, sha256: &str, recorded_at_ns: i128) {
        self.files.insert(
            path.to_string(),
            CachedFile {
                stamp,
                sha256: sha256.to_string(),
                recorded_at_ns,
            },
        );
    }

    /// Forget files no longer in the workspace.
    pub fn retain_paths(&mut self, keep: impl Fn(&str) -> bool) {
        self.files.retain(|path, _| keep(path));
    }

    pub fn mark_present(&mut self, sha256: &str) {
        self.mark_all_present([sha256]);
    }

    /// [`StatCache::mark_present`] for many blobs at once (one clock read; no allocation for
    /// blobs already known).
    pub fn mark_all_present<'a>(&mut self, sha256s: impl IntoIterator<Item = &'a str>) {
        let now = Instant::now();
        for sha256 in sha256s {
            match self.present.get_mut(sha256) {
                Some(at) => *at = now,
                None => {
                    self.present.insert(sha256.to_string(), now);
                }
            }
        }
    }

    pub fn is_present(&self, sha256: &str) -> bool {
        self.present
            .get(sha256)
            .is_some_and(|at| at.elapsed() < PRESENT_TTL)
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(mtime_ns: i128, ctime_ns: i128) -> FileStamp {
        FileStamp {
            size: 10,
            mtime_ns,
            ctime_ns,
            inode: 7,
            device: 1,
        }
    }

    #[test]
    fn settled_table() {
        let sec = 1_000_000_000i128;
        let at = 100 * sec + 500_000_000;
        let cases = [
            // (mtime, ctime, settled)
            (90 * sec + 1, 90 * sec + 1, true),
            (at - 50_000_000, 90 * sec + 1, false), // modified 50 ms before recording
            (90 * sec + 1, at, false),              // ctime at recording time
            (at + 1, at + 1, false),                // changed after recording
            (99 * sec, 99 * sec, false),            // whole seconds: 2 s window
            (98 * sec, 98 * sec, true),
        ];
        for (mtime, ctime, want) in cases {
            assert_eq!(
                is_settled(&stamp(mtime, ctime), at),
                want,
                "{mtime} {ctime}"
            );
        }
    }

    #[test]
    fn lookup_needs_an_exact_settled_stamp() {
        let sec = 1_000_000_000i128;
        let mut cache = StatCache::new();
        let old = stamp(10 * sec + 3, 10 * sec + 3);
        cache.record("a.txt", old, "abc", 20 * sec);
        assert_eq!(cache.lookup("a.txt", &old), Some("abc"));
        let mut grown = old;
        grown.size = 11;
        assert_eq!(cache.lookup("a.txt", &grown), None);
        let mut moved = old;
        moved.inode = 8;
        assert_eq!(cache.lookup("a.txt", &moved), None);
        assert_eq!(cache.lookup("b.txt", &old), None);
        cache.retain_paths(|p| p != "a.txt");
        assert!(cache.is_empty());
    }

    #[test]
    fn presence_is_remembered() {
        let mut cache = StatCache::new();
        assert!(!cache.is_present("x"));
        cache.mark_present("x");
        assert!(cache.is_present("x"));
        assert!(!cache.is_present("y"));
    }
}
