//! Blocking half of a warm materialize: turn a directory that holds a known tree into one that
//! holds exactly the target manifest's files, except for the files still to be written. A file
//! is kept when its path, content and mode already match: its content is known from the stat
//! cache (stat unchanged since it was verified) or re-hashed; anything else is deleted or left
//! for `warm.rs` to replace (a rename over it, never a write through it). Entries that are not
//! regular files (symlinks, fifos) and anything not in the target are removed, so a hostile
//! agent's leftovers do not survive into the next materialize.

use std::fs;
use std::path::Path;

use loopgate_protocol::snapshot::Manifest;
use loopgate_workspace_walk::{walk, Found};

use crate::cache::workspace_cache::TreeState;
use crate::error::SnapshotError;
use crate::freeze::hash_file;
use crate::materialize::io_error;
use crate::stat_cache::{wall_clock_ns, FileStamp, StatCache};

/// What `reconcile` left to do and what it verified.
#[derive(Debug, Default)]
pub(crate) struct Reconciled {
    /// Indexes into the target's entries still to be written.
    pub(crate) write: Vec<usize>,
    /// Stat cache for the files kept.
    pub(crate) stat: StatCache,
    pub(crate) kept: usize,
    /// Kept files whose stat did not vouch for them and were re-hashed.
    pub(crate) rehashed: usize,
}

/// Reconcile `dir` (holding `old`, or whatever it holds when `old` is None) with `target`.
pub(crate) fn reconcile(
    dir: &Path,
    old: Option<TreeState>,
    target: &Manifest,
) -> Result<Reconciled, SnapshotError> {
    let mut stat = old.map(|t| t.stat).unwrap_or_default();
    let mut kept = vec![false; target.entries.len()];
    let mut removed_any = false;
    let mut rehashed = 0;
    // A directory where the target has a file: removed whole, not descended.
    let doomed = std::sync::Mutex::new(Vec::new());
    let skip = |rel: &str, is_dir: bool| {
        let doom = is_dir && target.position(rel).is_some();
        if doom {
            doomed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(dir.join(rel));
        }
        doom
    };
    // Listed and `stat`ed on all cores; decided here, one entry at a time.
    let found = walk(dir, &skip)?;
    for path in doomed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        fs::remove_dir_all(&path).map_err(|e| io_error(&path, e))?;
        removed_any = true;
    }
    for item in found {
        let (rel, path, metadata) = match item {
            Found::File {
                rel,
                path,
                metadata,
            } => (rel, path, metadata),
            // A name no snapshot can hold: whatever it is, it goes.
            Found::NonUtf8 { path, .. } => {
                let is_dir = fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
                let removed = if is_dir {
                    fs::remove_dir_all(&path)
                } else {
                    fs::remove_file(&path)
                };
                removed.map_err(|e| io_error(&path, e))?;
                removed_any = true;
                continue;
            }
            Found::Symlink { rel, .. } | Found::Special { rel, .. } => {
                let path = dir.join(&rel);
                fs::remove_file(&path).map_err(|e| io_error(&path, e))?;
                removed_any = true;
                continue;
            }
        };
        let Some(index) = target.position(&rel) else {
            fs::remove_file(&path).map_err(|e| io_error(&path, e))?;
            removed_any = true;
            continue;
        };
        let want = &target.entries[index];
        // A second hard link could be written through from outside the tree: rewrite it.
        if metadata.mode & 0o7777 != want.mode & 0o777
            || metadata.len() != want.size
            || metadata.nlink != 1
        {
            continue;
        }
        let stamp = FileStamp::of_stat(&metadata);
        let vouched = stat.lookup(&rel, &stamp) == Some(want.sha256.as_str());
        if !vouched {
            let recorded_at = wall_clock_ns();
            match hash_file(&path, &rel, want.size) {
                Ok((sha256, _)) if sha256 == want.sha256 => {
                    stat.record(&rel, stamp, &sha256, recorded_at);
                    rehashed += 1;
                }
                _ => continue,
            }
        }
        kept[index] = true;
    }
    if removed_any {
        remove_empty_dirs(dir);
    }
    stat.retain_paths(|path| target.position(path).is_some_and(|index| kept[index]));
    let write: Vec<usize> = (0..kept.len()).filter(|i| !kept[*i]).collect();
    Ok(Reconciled {
        kept: kept.len() - write.len(),
        write,
        stat,
        rehashed,
    })
}

/// Remove directories left empty under `dir` (deepest first); non-empty ones stay.
fn remove_empty_dirs(dir: &Path) {
    let dirs = walkdir::WalkDir::new(dir)
        .follow_links(false)
        .min_depth(1)
        .contents_first(true)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_dir());
    for entry in dirs {
        let _ = fs::remove_dir(entry.path());
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use loopgate_protocol::snapshot::{sha256_hex, ManifestEntry};
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Arc;

    fn entry(path: &str, content: &[u8]) -> ManifestEntry {
        ManifestEntry {
            path: path.into(),
            mode: 0o644,
            size: content.len() as u64,
            sha256: sha256_hex(content),
        }
    }

    fn write(dir: &Path, rel: &str, content: &[u8]) {
        let path = dir.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, content).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    }

    #[test]
    fn keeps_matches_and_clears_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(d, "same.txt", b"same");
        write(d, "changed.txt", b"old");
        write(d, "gone/deep/x.txt", b"x");
        write(d, "target/debug/junk", b"junk");
        write(d, "file-was-dir/inner", b"i");
        std::os::unix::fs::symlink("/etc/passwd", d.join("link")).unwrap();
        // Names no snapshot can hold, a file and a directory.
        use std::os::unix::ffi::OsStrExt;
        let bad_file = d.join(std::ffi::OsStr::from_bytes(b"bad\xff"));
        fs::write(&bad_file, b"b").unwrap();
        let bad_dir = d.join(std::ffi::OsStr::from_bytes(b"dir\xfe"));
        fs::create_dir(&bad_dir).unwrap();
        fs::write(bad_dir.join("inner"), b"i").unwrap();
        let target = Manifest::new(vec![
            entry("same.txt", b"same"),
            entry("changed.txt", b"new"),
            entry("file-was-dir", b"f"),
            entry("link", b"l"),
            entry("new/file.txt", b"n"),
        ])
        .unwrap();
        let done = reconcile(d, None, &target).unwrap();
        let to_write: Vec<&str> = done
            .write
            .iter()
            .map(|i| target.entries[*i].path.as_str())
            .collect();
        assert_eq!(
            to_write,
            vec!["changed.txt", "file-was-dir", "link", "new/file.txt"]
        );
        assert_eq!((done.kept, done.rehashed), (1, 1));
        assert!(!d.join("gone").exists());
        assert!(!d.join("target").exists());
        assert!(!d.join("file-was-dir").exists());
        assert!(d.join("link").symlink_metadata().is_err());
        assert!(bad_file.symlink_metadata().is_err() && bad_dir.symlink_metadata().is_err());
        assert_eq!(fs::read(d.join("changed.txt")).unwrap(), b"old");
        assert_eq!(done.stat.len(), 1);
    }

    #[test]
    fn chmods_and_hard_links_are_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(d, "a", b"aaa");
        write(d, "b", b"bbb");
        let target = Manifest::new(vec![entry("a", b"aaa"), entry("b", b"bbb")]).unwrap();
        let mut stat = StatCache::new();
        for name in ["a", "b"] {
            let stamp = FileStamp::of(&fs::metadata(d.join(name)).unwrap());
            // Recorded long after the write: settled.
            stat.record(
                name,
                stamp,
                &sha256_hex(b"aaa"),
                wall_clock_ns() + 10_000_000_000,
            );
        }
        fs::set_permissions(d.join("b"), fs::Permissions::from_mode(0o755)).unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::hard_link(d.join("a"), outside.path().join("a")).unwrap();
        let old = TreeState {
            manifest: Arc::new(target.clone()),
            stat,
            sealed: false,
        };
        let done = reconcile(d, Some(old), &target).unwrap();
        assert_eq!(
            done.write,
            vec![0, 1],
            "hard-linked a, chmodded b: rewritten"
        );

        fs::remove_file(outside.path().join("a")).unwrap();
        let target_a = Manifest::new(vec![entry("a", b"aaa")]).unwrap();
        let old = TreeState {
            manifest: Arc::new(target_a.clone()),
            stat: done.stat,
            sealed: false,
        };
        let again = reconcile(d, Some(old), &target_a).unwrap();
        assert_eq!((again.kept, again.write.len()), (1, 0));
    }
}
