//! The directory walk of a freeze, on all cores: threads take directories from one shared
//! queue, list them and `stat` each file relative to its directory (`statx` on the directory's
//! fd, no path walk from the root), so a warm freeze of a large tree costs about the `stat`s
//! divided by the cores. Each directory is opened beneath the root without following a
//! symlink (`beneath.rs`): one swapped for a symlink after it was listed is refused, never
//! walked into. No decisions here beyond `skip`: `listing.rs` refuses, the freezer hashes.

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard};

use cap_std::fs::MetadataExt as _;

use crate::beneath::{BeneathError, RootDir};
use crate::error::{io_error, refused, Refusal, WalkError};

/// What the walk keeps of a file's `stat`: its size and mode, and what identifies one version
/// of it (the freezer's stat cache compares these).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    pub size: u64,
    /// The `st_mode` bits (permissions included).
    pub mode: u32,
    pub nlink: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
    pub inode: u64,
    pub device: u64,
}

fn ns(secs: i64, nanos: i64) -> i128 {
    i128::from(secs) * 1_000_000_000 + i128::from(nanos)
}

impl FileStat {
    /// The size in bytes.
    pub fn len(&self) -> u64 {
        self.size
    }

    /// True for an empty file.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// Of a `std` metadata.
    pub fn of_std(meta: &fs::Metadata) -> FileStat {
        FileStat {
            size: meta.len(),
            mode: meta.mode(),
            nlink: meta.nlink(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
            inode: meta.ino(),
            device: meta.dev(),
        }
    }

    fn of_cap(meta: &cap_std::fs::Metadata) -> FileStat {
        FileStat {
            size: meta.len(),
            mode: meta.mode(),
            nlink: meta.nlink(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
            inode: meta.ino(),
            device: meta.dev(),
        }
    }
}

/// One entry the walk found (directories are descended, never returned).
#[derive(Debug)]
pub enum Found {
    /// A regular file and its `lstat`.
    File {
        rel: String,
        path: PathBuf,
        metadata: FileStat,
    },
    Symlink {
        rel: String,
        path: PathBuf,
    },
    /// A fifo, socket or device ([`special_kind`] names which).
    Special {
        rel: String,
    },
    /// A name that is not UTF-8 (`rel` shows it lossily, `path` is the real one); a directory
    /// of that name is not descended.
    NonUtf8 {
        rel: String,
        path: PathBuf,
    },
}

impl Found {
    /// The relative path, `/`-separated.
    pub fn rel(&self) -> &str {
        match self {
            Found::File { rel, .. }
            | Found::Symlink { rel, .. }
            | Found::Special { rel, .. }
            | Found::NonUtf8 { rel, .. } => rel,
        }
    }
}

/// A directory to list: its relative path ("" for the root).
struct Dir {
    rel: String,
}

#[derive(Default)]
struct Queue {
    dirs: Vec<Dir>,
    /// Threads listing a directory now (the walk ends when none is and the queue is empty).
    busy: usize,
    error: Option<WalkError>,
}

struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next directory to list, or None when the walk is over (or failed).
    fn take(&self) -> Option<Dir> {
        let mut queue = self.lock();
        loop {
            if queue.error.is_some() {
                return None;
            }
            if let Some(dir) = queue.dirs.pop() {
                queue.busy += 1;
                return Some(dir);
            }
            if queue.busy == 0 {
                self.wake.notify_all();
                return None;
            }
            queue = self.wake.wait(queue).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn done(&self, listed: Result<Vec<Dir>, WalkError>) {
        let mut queue = self.lock();
        queue.busy -= 1;
        match listed {
            Ok(dirs) => queue.dirs.extend(dirs),
            Err(err) => {
                queue.error.get_or_insert(err);
            }
        }
        self.wake.notify_all();
    }
}

/// What a special file is, in words: `fifo`, `socket`, `block device`, `character device`.
pub fn special_kind(file_type: &fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_fifo() {
        "fifo"
    } else if file_type.is_socket() {
        "socket"
    } else if file_type.is_block_device() {
        "block device"
    } else if file_type.is_char_device() {
        "character device"
    } else {
        "special file"
    }
}

fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}/{name}")
    }
}

fn lossy(parent: &str, name: &OsString) -> String {
    join(parent, &name.to_string_lossy())
}

/// List `dir` beneath `root`: its files into `found`, its subdirectories (not skipped)
/// returned.
fn list(
    root: &RootDir,
    dir: &Dir,
    skip: &(dyn Fn(&str, bool) -> bool + Sync),
    found: &mut Vec<Found>,
) -> Result<Vec<Dir>, WalkError> {
    let mut subdirs = Vec::new();
    let dir_path = root.path().join(&dir.rel);
    let entries = root.read_dir(&dir.rel).map_err(|err| match err {
        // A directory when its parent was listed, a symlink now: never walked into.
        BeneathError::Symlink { .. } => refused(dir.rel.as_str(), Refusal::SymlinkToDirectory),
        other => io_error(&dir_path, other.into()),
    })?;
    for entry in entries {
        let entry = entry.map_err(|e| io_error(&dir_path, e))?;
        let path = dir_path.join(entry.file_name());
        let file_type = entry.file_type().map_err(|e| io_error(&path, e))?;
        let name = entry.file_name();
        let Some(name_str) = name.to_str() else {
            found.push(Found::NonUtf8 {
                rel: lossy(&dir.rel, &name),
                path,
            });
            continue;
        };
        let rel = join(&dir.rel, name_str);
        if skip(&rel, file_type.is_dir()) {
            continue;
        }
        if file_type.is_dir() {
            subdirs.push(Dir { rel });
        } else if file_type.is_file() {
            // `statx` relative to the directory's fd, not following a link.
            let metadata = entry.metadata().map_err(|e| io_error(&path, e))?;
            found.push(Found::File {
                rel,
                path,
                metadata: FileStat::of_cap(&metadata),
            });
        } else if file_type.is_symlink() {
            found.push(Found::Symlink { rel, path });
        } else {
            found.push(Found::Special { rel });
        }
    }
    Ok(subdirs)
}

/// Every file, symlink, special file and non-UTF-8 name under `root` (which must be a
/// directory), in no particular order; entries for which `skip(rel, is_dir)` holds are left
/// out (a skipped directory is not descended). The first I/O error ends the walk; a directory
/// that turned into a symlink while the walk ran is refused.
pub fn walk(
    root: &Path,
    skip: &(dyn Fn(&str, bool) -> bool + Sync),
) -> Result<Vec<Found>, WalkError> {
    let beneath = RootDir::open(root).map_err(|e| io_error(root, e.into()))?;
    let shared = Shared {
        queue: Mutex::new(Queue {
            dirs: vec![Dir { rel: String::new() }],
            ..Queue::default()
        }),
        wake: Condvar::new(),
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let work = || {
        let mut found = Vec::new();
        while let Some(dir) = shared.take() {
            let listed = list(&beneath, &dir, skip, &mut found);
            shared.done(listed);
        }
        found
    };
    let parts: Vec<Vec<Found>> = if threads == 1 {
        vec![work()]
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads).map(|_| scope.spawn(work)).collect();
            handles
                .into_iter()
                .map(|h| h.join().map_err(|_| ()))
                .collect::<Result<_, ()>>()
        })
        .map_err(|()| io_error(root, std::io::Error::other("a walking thread failed")))?
    };
    if let Some(err) = shared.lock().error.take() {
        return Err(err);
    }
    Ok(parts.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn finds_every_file_once_and_skips_what_it_is_told() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..300 {
            let path = dir.path().join(format!("d{}/e{}/f{i}", i % 7, i % 3));
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, b"x").unwrap();
        }
        fs::create_dir_all(dir.path().join("skip/deep")).unwrap();
        fs::write(dir.path().join("skip/deep/no"), b"x").unwrap();
        std::os::unix::fs::symlink("d0", dir.path().join("link")).unwrap();
        let found = walk(dir.path(), &|rel, is_dir| is_dir && rel == "skip").unwrap();
        let mut rels: Vec<&str> = found.iter().map(Found::rel).collect();
        rels.sort();
        let before = rels.len();
        rels.dedup();
        assert_eq!(rels.len(), before, "no entry twice");
        assert_eq!(rels.len(), 301, "300 files and the link");
        assert!(rels.contains(&"d3/e1/f10"));
        assert!(!rels.iter().any(|r| r.starts_with("skip")));
        assert!(found
            .iter()
            .any(|f| matches!(f, Found::Symlink { rel, .. } if rel == "link")));
    }

    /// The walk lists `d` as a directory; before it is walked into, it becomes a symlink to a
    /// directory outside (swapped in `skip`, which runs between the two): refused, and nothing
    /// outside is listed.
    #[test]
    fn a_directory_swapped_for_a_symlink_is_not_walked_into() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), b"x").unwrap();
        fs::create_dir(dir.path().join("d")).unwrap();
        fs::write(dir.path().join("d/own"), b"x").unwrap();
        let swap = |rel: &str, is_dir: bool| {
            if is_dir && rel == "d" {
                fs::rename(dir.path().join("d"), dir.path().join("parked")).unwrap();
                std::os::unix::fs::symlink(outside.path(), dir.path().join("d")).unwrap();
            }
            rel == "parked"
        };
        let err = walk(dir.path(), &swap).unwrap_err();
        assert!(
            matches!(&err, WalkError::Refused { path, reason: Refusal::SymlinkToDirectory } if path == "d"),
            "{err:?}"
        );
    }

    #[test]
    fn an_unreadable_directory_is_an_error_not_a_gap() {
        let dir = tempfile::tempdir().unwrap();
        let err = walk(&dir.path().join("missing"), &|_, _| false).unwrap_err();
        assert!(matches!(err, WalkError::Io { .. }), "{err:?}");
    }
}
