//! What an episode changed, read from its overlay's upper layer alone: files there are new or
//! changed, whiteouts (character devices 0/0) are deletions, an opaque directory hides all the
//! lower had beneath it, and a file over a lower directory hides that directory. [`scan_upper`]
//! lists the layer (blocking, following no symlink); [`merge`] decides, without I/O, which of
//! the base's entries survive and which upper entries become files, so that the result is what
//! a full walk of the merged tree would list.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use loopgate_protocol::snapshot::{validate_relative_path, Manifest};

use crate::error::{Refusal, SnapshotError};
use crate::freeze::is_ignored;
use crate::materialize::io_error;
use crate::overlay::mount::{is_opaque, is_whiteout};

/// What the upper layer holds at one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UpperKind {
    File,
    Symlink,
    /// A deletion of whatever the lower had there.
    Whiteout,
    /// A directory; `opaque` hides all the lower had beneath it.
    Dir {
        opaque: bool,
    },
    /// A fifo, socket or device other than a whiteout.
    Special,
    /// A name that is not UTF-8 (`rel` shows it lossily).
    NonUtf8,
}

/// One entry of the upper layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UpperItem {
    pub(crate) rel: String,
    pub(crate) kind: UpperKind,
}

/// List `upper` depth first, sorted by path, leaving out what `ignore` matches (a whiteout is
/// always listed: it deletes whatever was there).
pub(crate) fn scan_upper(upper: &Path, ignore: &[String]) -> Result<Vec<UpperItem>, SnapshotError> {
    let mut items = Vec::new();
    let mut stack: Vec<(String, PathBuf)> = vec![(String::new(), upper.to_path_buf())];
    while let Some((rel_dir, dir)) = stack.pop() {
        let entries = fs::read_dir(&dir).map_err(|e| io_error(&dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| io_error(&dir, e))?;
            let path = entry.path();
            let metadata = fs::symlink_metadata(&path).map_err(|e| io_error(&path, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                let rel = join(&rel_dir, &name.to_string_lossy());
                items.push(UpperItem {
                    rel,
                    kind: UpperKind::NonUtf8,
                });
                continue;
            };
            let rel = join(&rel_dir, name);
            let file_type = metadata.file_type();
            let kind = if file_type.is_dir() {
                UpperKind::Dir {
                    opaque: is_opaque(&path),
                }
            } else if file_type.is_file() {
                UpperKind::File
            } else if file_type.is_symlink() {
                UpperKind::Symlink
            } else if is_whiteout(&metadata) {
                UpperKind::Whiteout
            } else {
                UpperKind::Special
            };
            if kind != UpperKind::Whiteout
                && is_ignored(&rel, matches!(kind, UpperKind::Dir { .. }), ignore)
            {
                continue;
            }
            if matches!(kind, UpperKind::Dir { .. }) {
                stack.push((rel.clone(), path));
            }
            items.push(UpperItem { rel, kind });
        }
    }
    items.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(items)
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// What the merged tree holds: the base's entries still visible (indexes into the base) and
/// the upper entries that are files (indexes into the items), both in path order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Merged {
    pub(crate) kept: Vec<usize>,
    pub(crate) files: Vec<usize>,
}

/// Combine `base` (the lower layer's manifest) with the upper layer's `items` under the freeze's
/// `ignore` patterns. The first upper entry a snapshot cannot hold (in path order) is refused,
/// as a walk of the merged tree would refuse it.
pub(crate) fn merge(
    base: &Manifest,
    items: &[UpperItem],
    ignore: &[String],
) -> Result<Merged, SnapshotError> {
    // Paths hidden with everything beneath them, and paths hidden only themselves.
    let mut subtree: HashSet<&str> = HashSet::new();
    let mut exact: HashSet<&str> = HashSet::new();
    let mut files = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let refused = |reason| SnapshotError::Refused {
            path: item.rel.clone(),
            reason,
        };
        match item.kind {
            UpperKind::NonUtf8 => return Err(refused(Refusal::NonUtf8Name)),
            UpperKind::Special => {
                validate_relative_path(&item.rel).map_err(|e| refused(Refusal::InvalidPath(e)))?;
                return Err(refused(Refusal::SpecialFile));
            }
            UpperKind::File | UpperKind::Symlink => {
                validate_relative_path(&item.rel).map_err(|e| refused(Refusal::InvalidPath(e)))?;
                subtree.insert(&item.rel);
                files.push(index);
            }
            UpperKind::Whiteout | UpperKind::Dir { opaque: true } => {
                subtree.insert(&item.rel);
            }
            UpperKind::Dir { opaque: false } => {
                exact.insert(&item.rel);
            }
        }
    }
    // Sorted by path, the base's files come directory by directory: whether a directory's
    // files are dropped (it or a directory above it is hidden or ignored) is decided once, when
    // the walk enters it, and each directory above it once in all.
    let mut dirs: HashMap<&str, bool> = HashMap::new();
    // A pattern ending in `/` leaves out directories only: a file is matched against the rest.
    let file_patterns: Vec<String> = ignore
        .iter()
        .filter(|pattern| !pattern.trim().ends_with('/'))
        .cloned()
        .collect();
    let mut current: Option<(&str, bool)> = None;
    let mut kept = Vec::with_capacity(base.entries.len());
    for (index, entry) in base.entries.iter().enumerate() {
        let path = entry.path.as_str();
        let parent = path.rfind('/').map_or("", |at| &path[..at]);
        let dir_dropped = match current {
            Some((dir, dropped)) if dir == parent => dropped,
            _ => {
                let dropped = !parent.is_empty()
                    && ((!subtree.is_empty() && prefixes(parent).any(|p| subtree.contains(p)))
                        || ignored_dir(parent, ignore, &mut dirs));
                current = Some((parent, dropped));
                dropped
            }
        };
        let hidden = dir_dropped
            || (!exact.is_empty() && exact.contains(path))
            || (!subtree.is_empty() && subtree.contains(path))
            || (!file_patterns.is_empty() && is_ignored(path, false, &file_patterns));
        if !hidden {
            kept.push(index);
        }
    }
    Ok(Merged { kept, files })
}

/// `a`, `a/b`, `a/b/c` for `a/b/c`.
fn prefixes(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/')
        .map(move |(at, _)| &path[..at])
        .chain(std::iter::once(path))
}

/// Would a walk leave out the directory `dir`: it or one above it is ignored? `dirs` remembers
/// the directories already decided.
fn ignored_dir<'a>(dir: &'a str, ignore: &[String], dirs: &mut HashMap<&'a str, bool>) -> bool {
    prefixes(dir).any(|prefix| {
        *dirs
            .entry(prefix)
            .or_insert_with(|| is_ignored(prefix, true, ignore))
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use loopgate_protocol::snapshot::ManifestEntry;

    fn base(paths: &[&str]) -> Manifest {
        Manifest::new(
            paths
                .iter()
                .map(|p| ManifestEntry {
                    path: p.to_string(),
                    mode: 0o644,
                    size: 1,
                    sha256: "0".repeat(64),
                })
                .collect(),
        )
        .unwrap()
    }

    fn item(rel: &str, kind: UpperKind) -> UpperItem {
        UpperItem {
            rel: rel.into(),
            kind,
        }
    }

    /// The paths of the base entries `merged` keeps.
    fn kept_paths<'a>(manifest: &'a Manifest, merged: &Merged) -> Vec<&'a str> {
        merged
            .kept
            .iter()
            .map(|i| manifest.entries[*i].path.as_str())
            .collect()
    }

    const DIR: UpperKind = UpperKind::Dir { opaque: false };
    const OPAQUE: UpperKind = UpperKind::Dir { opaque: true };

    #[test]
    fn upper_entries_table() {
        let lower = ["a.txt", "d/x", "d/y", "d/z/w", "e/f", "g", "target/o"];
        // (case, upper entries, base paths still there, upper files)
        type Case<'a> = (&'a str, Vec<UpperItem>, Vec<&'a str>, Vec<&'a str>);
        let cases: Vec<Case> = vec![
            ("nothing changed", vec![], lower[..6].to_vec(), vec![]),
            (
                "a changed file hides its lower copy",
                vec![item("a.txt", UpperKind::File)],
                vec!["d/x", "d/y", "d/z/w", "e/f", "g"],
                vec!["a.txt"],
            ),
            (
                "a whiteout is a deletion",
                vec![item("d", DIR), item("d/y", UpperKind::Whiteout)],
                vec!["a.txt", "d/x", "d/z/w", "e/f", "g"],
                vec![],
            ),
            (
                "a whiteout of a directory deletes all beneath it",
                vec![item("d", UpperKind::Whiteout)],
                vec!["a.txt", "e/f", "g"],
                vec![],
            ),
            (
                "an opaque directory shows only its upper contents",
                vec![item("d", OPAQUE), item("d/new", UpperKind::File)],
                vec!["a.txt", "e/f", "g"],
                vec!["d/new"],
            ),
            (
                "a file over a lower directory hides the directory",
                vec![item("e", UpperKind::File)],
                vec!["a.txt", "d/x", "d/y", "d/z/w", "g"],
                vec!["e"],
            ),
            (
                "a directory over a lower file hides the file",
                vec![item("g", OPAQUE), item("g/h", UpperKind::File)],
                vec!["a.txt", "d/x", "d/y", "d/z/w", "e/f"],
                vec!["g/h"],
            ),
            (
                "a copied-up directory with new files merges",
                vec![
                    item("d", DIR),
                    item("d/z", DIR),
                    item("d/z/v", UpperKind::File),
                ],
                vec!["a.txt", "d/x", "d/y", "d/z/w", "e/f", "g"],
                vec!["d/z/v"],
            ),
            (
                "a symlink is a file whose content the freeze resolves",
                vec![item("link", UpperKind::Symlink)],
                lower[..6].to_vec(),
                vec!["link"],
            ),
            (
                "a name that is a prefix of another is not its directory",
                vec![item("d", DIR), item("d/z", UpperKind::Whiteout)],
                vec!["a.txt", "d/x", "d/y", "e/f", "g"],
                vec![],
            ),
        ];
        let manifest = base(&lower);
        let ignore = vec!["target/".to_string()];
        for (case, items, want_kept, want_files) in cases {
            let merged = merge(&manifest, &items, &ignore).unwrap();
            let kept = kept_paths(&manifest, &merged);
            let files: Vec<&str> = merged
                .files
                .iter()
                .map(|i| items[*i].rel.as_str())
                .collect();
            assert_eq!(kept, want_kept, "{case}");
            assert_eq!(files, want_files, "{case}");
        }
    }

    /// The base's files come directory by directory, and a directory comes back after its
    /// subdirectories (`d` after `d/z`): each visit decides it again, hidden or ignored.
    #[test]
    fn a_directory_entered_again_is_decided_again() {
        let manifest = base(&[
            "d/target/o",
            "d/target0",
            "d/x",
            "d/z/w",
            "d/zz",
            "e/target/p/q",
            "e/y",
        ]);
        let ignore = vec!["target/".to_string(), "*.log".to_string()];
        // (case, upper entries, base paths still there)
        let cases: Vec<(&str, Vec<UpperItem>, Vec<&str>)> = vec![
            (
                "ignored directories at any depth are left out",
                vec![],
                vec!["d/target0", "d/x", "d/z/w", "d/zz", "e/y"],
            ),
            (
                "a hidden subdirectory leaves the files after it",
                vec![item("d", DIR), item("d/z", UpperKind::Whiteout)],
                vec!["d/target0", "d/x", "d/zz", "e/y"],
            ),
            (
                "a hidden file leaves its directory",
                vec![item("d", DIR), item("d/x", UpperKind::Whiteout)],
                vec!["d/target0", "d/z/w", "d/zz", "e/y"],
            ),
            (
                "a hidden directory hides its subdirectories",
                vec![item("d", UpperKind::Whiteout)],
                vec!["e/y"],
            ),
        ];
        for (case, items, want_kept) in cases {
            let merged = merge(&manifest, &items, &ignore).unwrap();
            assert_eq!(kept_paths(&manifest, &merged), want_kept, "{case}");
        }
        let logs = base(&["a.log", "b/c.log", "b/d.txt"]);
        let merged = merge(&logs, &[], &ignore).unwrap();
        assert_eq!(
            merged.kept,
            vec![2],
            "a file pattern leaves out files anywhere"
        );
    }

    #[test]
    fn what_a_snapshot_cannot_hold_is_refused_by_path() {
        let manifest = base(&["a"]);
        let cases = [
            (item("fifo", UpperKind::Special), Refusal::SpecialFile),
            (
                item("bad\u{fffd}", UpperKind::NonUtf8),
                Refusal::NonUtf8Name,
            ),
        ];
        for (bad, want) in cases {
            let err = merge(&manifest, std::slice::from_ref(&bad), &[]).unwrap_err();
            assert!(
                matches!(&err, SnapshotError::Refused { path, reason } if *path == bad.rel && *reason == want),
                "{err:?}"
            );
        }
    }

    #[test]
    fn scan_reads_whiteouts_and_leaves_ignored_dirs_out() {
        let dir = tempfile::tempdir().unwrap();
        let upper = dir.path();
        fs::create_dir_all(upper.join("src")).unwrap();
        fs::create_dir_all(upper.join("target/debug")).unwrap();
        fs::write(upper.join("src/a.rs"), b"a").unwrap();
        fs::write(upper.join("target/debug/x"), b"x").unwrap();
        std::os::unix::fs::symlink("src/a.rs", upper.join("l")).unwrap();
        let status = std::process::Command::new("mkfifo")
            .arg(upper.join("p"))
            .status()
            .unwrap();
        assert!(status.success());
        // A whiteout is a character device 0/0: only root may make one outside an overlay.
        let whiteout = rustix::process::geteuid().is_root()
            && std::process::Command::new("mknod")
                .arg(upper.join("gone"))
                .args(["c", "0", "0"])
                .status()
                .is_ok_and(|s| s.success());
        let items = scan_upper(upper, &["target/".to_string()]).unwrap();
        let mut want = vec![
            item("l", UpperKind::Symlink),
            item("p", UpperKind::Special),
            item("src", DIR),
            item("src/a.rs", UpperKind::File),
        ];
        if whiteout {
            want.insert(0, item("gone", UpperKind::Whiteout));
        }
        assert_eq!(items, want);
    }
}
