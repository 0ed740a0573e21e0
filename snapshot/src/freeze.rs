//! Blocking half of freezing: walk a workspace, apply ignore rules, refuse what can't be stored,
//! hash every file. No network here; `SnapshotStore::freeze` runs this on `spawn_blocking`.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use loopgate_protocol::snapshot::ManifestEntry;
use loopgate_workspace_walk::{list_workspace, open_no_symlinks, BeneathError};
use sha2::{Digest, Sha256};

pub use crate::error::Refusal;
use crate::error::SnapshotError;
use crate::stat_cache::{wall_clock_ns, FileStamp, StatCache};

pub use loopgate_workspace_walk::{glob_match, is_ignored, normalize_mode, DEFAULT_IGNORES};

pub const DEFAULT_MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;
pub const DEFAULT_MAX_TOTAL_BYTES: u64 = 2 * 1024 * 1024 * 1024;

/// What to leave out of a snapshot and how big it may get.
///
/// Ignore patterns are a gitignore-like subset (`loopgate_workspace_walk`'s `ignore`); the
/// defaults are [`DEFAULT_IGNORES`] (build outputs and caches, `.loopgate/` and `.git/`, with
/// the reasons there). Per-task patterns are added with [`FreezeRules::with_ignores`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreezeRules {
    pub ignore: Vec<String>,
    pub max_file_bytes: u64,
    pub max_total_bytes: u64,
}

impl Default for FreezeRules {
    fn default() -> Self {
        FreezeRules {
            ignore: DEFAULT_IGNORES.iter().map(|s| s.to_string()).collect(),
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_total_bytes: DEFAULT_MAX_TOTAL_BYTES,
        }
    }
}

impl FreezeRules {
    /// The defaults plus a task's own patterns (blank ones are dropped, duplicates kept once).
    pub fn with_ignores<S: AsRef<str>>(patterns: &[S]) -> FreezeRules {
        let mut rules = FreezeRules::default();
        for pattern in patterns {
            let pattern = pattern.as_ref().trim();
            if !pattern.is_empty() && !rules.ignore.iter().any(|p| p == pattern) {
                rules.ignore.push(pattern.to_string());
            }
        }
        rules
    }
}

/// One file found by the walk: its manifest entry and where to read its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkedFile {
    pub entry: ManifestEntry,
    /// The file to read content from (the symlink's resolved target for in-workspace links).
    pub source: PathBuf,
    /// The source's stat when it was walked.
    pub stamp: FileStamp,
    /// False when the sha256 came from a stat cache instead of reading the file.
    pub hashed: bool,
    /// When the content was read (for the stat cache), ns since the Unix epoch.
    pub recorded_at_ns: i128,
}

fn refused(path: impl Into<String>, reason: Refusal) -> SnapshotError {
    SnapshotError::Refused {
        path: path.into(),
        reason,
    }
}

fn io_error(path: &Path, source: std::io::Error) -> SnapshotError {
    SnapshotError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// sha256 and byte count of a file, streaming; refuses if it grows past `limit`.
pub fn hash_file(path: &Path, rel: &str, limit: u64) -> Result<(String, u64), SnapshotError> {
    let file = fs::File::open(path).map_err(|e| io_error(path, e))?;
    hash_open(file, path, rel, limit)
}

/// Open a walked file's `source` (canonical) without following a symlink anywhere on it: the
/// walk saw a regular file there, so a symlink now means it was swapped since.
pub(crate) fn open_walked(source: &Path, rel: &str) -> Result<fs::File, SnapshotError> {
    open_no_symlinks(source).map_err(|err| match err {
        BeneathError::Io { source: e, .. } => io_error(source, e),
        _ => SnapshotError::ChangedDuringFreeze {
            path: rel.to_string(),
        },
    })
}

/// As [`hash_file`], for a file the walk found (see [`open_walked`]).
fn hash_walked(source: &Path, rel: &str, limit: u64) -> Result<(String, u64), SnapshotError> {
    hash_open(open_walked(source, rel)?, source, rel, limit)
}

fn hash_open(
    mut file: fs::File,
    path: &Path,
    rel: &str,
    limit: u64,
) -> Result<(String, u64), SnapshotError> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut size: u64 = 0;
    loop {
        let n = file.read(&mut buf).map_err(|e| io_error(path, e))?;
        if n == 0 {
            break;
        }
        size += n as u64;
        if size > limit {
            return Err(refused(rel, Refusal::FileTooLarge { size, limit }));
        }
        hasher.update(&buf[..n]);
    }
    Ok((hex::encode(hasher.finalize()), size))
}

/// Walk `root`, returning every file to store, sorted by path. Refuses (with the offending
/// relative path) anything a snapshot must not contain.
pub fn walk_workspace(root: &Path, rules: &FreezeRules) -> Result<Vec<WalkedFile>, SnapshotError> {
    walk_workspace_cached(root, rules, None)
}

/// As [`walk_workspace`], taking the sha256 of files whose stat matches `cache` from it.
pub fn walk_workspace_cached(
    root: &Path,
    rules: &FreezeRules,
    cache: Option<&StatCache>,
) -> Result<Vec<WalkedFile>, SnapshotError> {
    let files = list_files(root, rules, cache)?;
    hash_listed(files, rules)
}

/// The walk's files with their stats, sha256 filled in only where `cache` vouched for them.
fn list_files(
    root: &Path,
    rules: &FreezeRules,
    cache: Option<&StatCache>,
) -> Result<Vec<WalkedFile>, SnapshotError> {
    let listing = list_workspace(root, &rules.ignore)?;
    let mut files = Vec::with_capacity(listing.size_hint().0);
    let mut total: u64 = 0;
    for listed in listing {
        let listed = listed?;
        let mode = listed.mode();
        let (rel, source, metadata) = (listed.rel.as_str(), listed.source, listed.metadata);
        if metadata.len() > rules.max_file_bytes {
            return Err(refused(
                rel,
                Refusal::FileTooLarge {
                    size: metadata.len(),
                    limit: rules.max_file_bytes,
                },
            ));
        }
        let stamp = FileStamp::of_stat(&metadata);
        let cached = cache
            .and_then(|c| c.lookup(rel, &stamp))
            .map(str::to_string);
        // Files the cache cannot vouch for are hashed after the walk, on all cores.
        let (sha256, size, hashed) = match cached {
            Some(sha256) => (sha256, metadata.len(), false),
            None => (String::new(), metadata.len(), true),
        };
        total += size;
        if total > rules.max_total_bytes {
            return Err(SnapshotError::TotalTooLarge {
                limit: rules.max_total_bytes,
            });
        }
        files.push(WalkedFile {
            entry: ManifestEntry {
                path: rel.to_string(),
                mode,
                size,
                sha256,
            },
            source,
            stamp,
            hashed,
            recorded_at_ns: 0,
        });
    }
    Ok(files)
}

/// Hash what the cache did not vouch for (each file re-opened without following a symlink),
/// check the total again, sort by path.
pub(crate) fn hash_listed(
    mut files: Vec<WalkedFile>,
    rules: &FreezeRules,
) -> Result<Vec<WalkedFile>, SnapshotError> {
    hash_pending(&mut files, rules.max_file_bytes)?;
    let total: u64 = files.iter().map(|f| f.entry.size).sum();
    if total > rules.max_total_bytes {
        return Err(SnapshotError::TotalTooLarge {
            limit: rules.max_total_bytes,
        });
    }
    files.sort_by(|a, b| a.entry.path.cmp(&b.entry.path));
    Ok(files)
}

/// Fewer files than this per thread are not worth a thread.
const FILES_PER_THREAD: usize = 16;

/// Hash the files marked `hashed` (sha256 still empty), spread over the machine's cores.
fn hash_pending(files: &mut [WalkedFile], limit: u64) -> Result<(), SnapshotError> {
    let pending: Vec<usize> = (0..files.len()).filter(|i| files[*i].hashed).collect();
    if pending.is_empty() {
        return Ok(());
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = cores.min(pending.len().div_ceil(FILES_PER_THREAD)).max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let hash_one = |i: usize| {
        let file = &files[i];
        let recorded_at = wall_clock_ns();
        (
            i,
            recorded_at,
            hash_walked(&file.source, &file.entry.path, limit),
        )
    };
    let work = || {
        let mut done = Vec::new();
        loop {
            let at = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(&i) = pending.get(at) else {
                return done;
            };
            let result = hash_one(i);
            let failed = result.2.is_err();
            done.push(result);
            if failed {
                return done;
            }
        }
    };
    let results: Vec<_> = if threads == 1 {
        work()
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads).map(|_| scope.spawn(work)).collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_default())
                .collect()
        })
    };
    if results.len() < pending.len() && results.iter().all(|r| r.2.is_ok()) {
        // A hashing thread panicked: treat as an i/o failure, not a silent gap.
        return Err(SnapshotError::Io {
            path: String::new(),
            source: std::io::Error::other("a hashing thread failed"),
        });
    }
    let mut results = results;
    results.sort_by_key(|r| r.0);
    for (i, recorded_at, result) in results {
        let (sha256, size) = result?;
        let file = &mut files[i];
        file.entry.sha256 = sha256;
        file.entry.size = size;
        file.recorded_at_ns = recorded_at;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn task_ignores_extend_the_defaults() {
        let rules = FreezeRules::with_ignores(&["dist/", " ", "target/", "*.log"]);
        assert_eq!(rules.ignore.len(), DEFAULT_IGNORES.len() + 2);
        assert!(is_ignored("dist", true, &rules.ignore));
        assert!(is_ignored("x/y.log", false, &rules.ignore));
        assert!(is_ignored(".git", true, &rules.ignore));
    }

    /// Between the walk and the read, a file and a directory of the workspace become symlinks
    /// to files outside it: the freeze refuses, and no outside byte is hashed or read.
    #[test]
    fn a_file_swapped_for_a_symlink_after_the_walk_is_not_followed() {
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), b"outside secret").unwrap();
        fs::write(outside.path().join("b.txt"), b"outside b").unwrap();
        for swap_dir in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            fs::create_dir(dir.path().join("d")).unwrap();
            fs::write(dir.path().join("a.txt"), b"one").unwrap();
            fs::write(dir.path().join("d/b.txt"), b"two").unwrap();
            let rules = FreezeRules::default();
            let listed = list_files(dir.path(), &rules, None).unwrap();
            assert_eq!(listed.len(), 2);
            if swap_dir {
                fs::remove_dir_all(dir.path().join("d")).unwrap();
                std::os::unix::fs::symlink(outside.path(), dir.path().join("d")).unwrap();
            } else {
                fs::remove_file(dir.path().join("a.txt")).unwrap();
                std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("a.txt"))
                    .unwrap();
            }
            let err = hash_listed(listed, &rules).unwrap_err();
            let swapped = if swap_dir { "d/b.txt" } else { "a.txt" };
            assert!(
                matches!(&err, SnapshotError::ChangedDuringFreeze { path } if path == swapped),
                "swap_dir {swap_dir}: {err:?}"
            );
        }
    }

    #[test]
    fn walk_takes_settled_hashes_from_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.txt"), b"one").unwrap();
        fs::write(dir.path().join("b.txt"), b"two").unwrap();
        let first = walk_workspace(dir.path(), &FreezeRules::default()).unwrap();
        assert!(first.iter().all(|f| f.hashed));
        let mut cache = StatCache::new();
        // Recorded well after the files were written: settled.
        let later = wall_clock_ns() + 10_000_000_000;
        for f in &first {
            cache.record(&f.entry.path, f.stamp, &f.entry.sha256, later);
        }
        let second =
            walk_workspace_cached(dir.path(), &FreezeRules::default(), Some(&cache)).unwrap();
        assert!(second.iter().all(|f| !f.hashed));
        assert_eq!(
            second.iter().map(|f| &f.entry).collect::<Vec<_>>(),
            first.iter().map(|f| &f.entry).collect::<Vec<_>>()
        );
        fs::write(dir.path().join("b.txt"), b"three").unwrap();
        let third =
            walk_workspace_cached(dir.path(), &FreezeRules::default(), Some(&cache)).unwrap();
        let hashed: Vec<_> = third
            .iter()
            .filter(|f| f.hashed)
            .map(|f| f.entry.path.as_str())
            .collect();
        assert_eq!(hashed, vec!["b.txt"]);
        assert_eq!(
            third[1].entry.sha256,
            loopgate_protocol::snapshot::sha256_hex(b"three")
        );
    }

    #[test]
    fn mode_table() {
        for (mode, expected) in [
            (0o644, 0o644),
            (0o600, 0o644),
            (0o755, 0o755),
            (0o700, 0o755),
            (0o641, 0o755),
        ] {
            assert_eq!(normalize_mode(mode), expected, "{mode:o}");
        }
    }

    #[test]
    fn walk_skips_ignored_and_refuses_specials() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join(".git/objects")).unwrap();
        fs::write(dir.path().join(".git/objects/x"), b"git").unwrap();
        fs::create_dir_all(dir.path().join("src")).unwrap();
        fs::write(dir.path().join("src/main.rs"), b"fn main() {}").unwrap();
        fs::write(dir.path().join("run.sh"), b"#!/bin/sh").unwrap();
        fs::set_permissions(dir.path().join("run.sh"), fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::symlink("src/main.rs", dir.path().join("link.rs")).unwrap();

        let files = walk_workspace(dir.path(), &FreezeRules::default()).unwrap();
        let paths: Vec<_> = files
            .iter()
            .map(|f| (f.entry.path.as_str(), f.entry.mode))
            .collect();
        assert_eq!(
            paths,
            vec![
                ("link.rs", 0o644),
                ("run.sh", 0o755),
                ("src/main.rs", 0o644)
            ]
        );
        assert_eq!(files[0].entry.sha256, files[2].entry.sha256);

        let fifo = dir.path().join("pipe");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let err = walk_workspace(dir.path(), &FreezeRules::default()).unwrap_err();
        assert!(
            matches!(&err, SnapshotError::Refused { path, reason: Refusal::SpecialFile } if path == "pipe"),
            "{err:?}"
        );
    }

    #[test]
    fn walk_refuses_names_that_are_not_utf8() {
        use std::os::unix::ffi::OsStrExt;
        for (name, inside) in [(&b"bad\xff"[..], false), (&b"dir\xfe"[..], true)] {
            let dir = tempfile::tempdir().unwrap();
            fs::write(dir.path().join("ok.txt"), b"ok").unwrap();
            let odd = dir.path().join(std::ffi::OsStr::from_bytes(name));
            if inside {
                fs::create_dir(&odd).unwrap();
                fs::write(odd.join("inner"), b"i").unwrap();
            } else {
                fs::write(&odd, b"b").unwrap();
            }
            let err = walk_workspace(dir.path(), &FreezeRules::default()).unwrap_err();
            assert!(
                matches!(
                    &err,
                    SnapshotError::Refused {
                        reason: Refusal::NonUtf8Name,
                        ..
                    }
                ),
                "{err:?}"
            );
        }
    }

    #[test]
    fn walk_enforces_size_limits() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a"), vec![1u8; 100]).unwrap();
        fs::write(dir.path().join("b"), vec![2u8; 100]).unwrap();
        let rules = FreezeRules {
            max_file_bytes: 50,
            ..FreezeRules::default()
        };
        let err = walk_workspace(dir.path(), &rules).unwrap_err();
        assert!(matches!(
            err,
            SnapshotError::Refused {
                reason: Refusal::FileTooLarge {
                    size: 100,
                    limit: 50
                },
                ..
            }
        ));
        let rules = FreezeRules {
            max_total_bytes: 150,
            ..FreezeRules::default()
        };
        let err = walk_workspace(dir.path(), &rules).unwrap_err();
        assert!(matches!(err, SnapshotError::TotalTooLarge { limit: 150 }));
    }

    #[test]
    fn walk_refuses_directory_and_dangling_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("d")).unwrap();
        std::os::unix::fs::symlink("d", dir.path().join("dlink")).unwrap();
        let err = walk_workspace(dir.path(), &FreezeRules::default()).unwrap_err();
        assert!(matches!(
            err,
            SnapshotError::Refused {
                reason: Refusal::SymlinkToDirectory,
                ..
            }
        ));
        fs::remove_file(dir.path().join("dlink")).unwrap();
        std::os::unix::fs::symlink("missing", dir.path().join("gone")).unwrap();
        let err = walk_workspace(dir.path(), &FreezeRules::default()).unwrap_err();
        assert!(
            matches!(&err, SnapshotError::Refused { path, reason: Refusal::DanglingSymlink { .. } } if path == "gone"),
            "{err:?}"
        );
    }
}
