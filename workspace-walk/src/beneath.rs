//! File access beneath a root that follows no symlink: every component of a path, the last
//! included, is opened relative to the directory before it with `O_NOFOLLOW` (`cap-std`, which
//! uses `openat2` with `RESOLVE_BENEATH` where the kernel has it and a checked component walk
//! where it does not). A path an agent planted a symlink in is refused, and since each step
//! works on the directory handle the previous one opened, swapping a file or a directory for a
//! symlink between a check and the use wins nothing: the use refuses it.
//!
//! Workers read and write trees an agent (or the artifact under audit) has touched: the tool
//! loop's file tools, the handoff file, screenshots, the freeze's reads, self-check copies, the
//! recursive `chown` that gives a workspace to the agent's user. They all go through here.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::ops::Deref;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, Metadata, OpenOptions, OpenOptionsExt, ReadDir};

/// Makes the temporary names of [`RootDir::replace`] unique within the process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A path beneath a root could not be used.
#[derive(Debug, thiserror::Error)]
pub enum BeneathError {
    /// Absolute, with `..`, or otherwise not a plain relative path.
    #[error("refusing '{path}': not a relative path inside the root")]
    NotRelative { path: String },
    /// It is a symlink, or one of its directories is (planted, or swapped in since it was
    /// checked).
    #[error("refusing '{path}': it is a symlink or goes through one")]
    Symlink { path: String },
    #[error("{op} '{path}': {source}")]
    Io {
        op: &'static str,
        path: String,
        #[source]
        source: io::Error,
    },
}

impl BeneathError {
    /// A refusal (a symlink or a path leaving the root), as opposed to an i/o failure.
    pub fn is_refusal(&self) -> bool {
        !matches!(self, BeneathError::Io { .. })
    }

    /// The i/o error's kind (`NotFound`, `AlreadyExists`, ...); None for a refusal.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            BeneathError::Io { source, .. } => Some(source.kind()),
            _ => None,
        }
    }

    /// A refusal never passes; an interrupted or timed-out call may.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.io_kind(),
            Some(io::ErrorKind::Interrupted | io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock)
        )
    }

    /// The path as given (relative to the root).
    pub fn path(&self) -> &str {
        match self {
            BeneathError::NotRelative { path }
            | BeneathError::Symlink { path }
            | BeneathError::Io { path, .. } => path,
        }
    }
}

impl From<BeneathError> for io::Error {
    fn from(err: BeneathError) -> io::Error {
        match err.io_kind() {
            Some(kind) => io::Error::new(kind, err),
            None => io::Error::other(err),
        }
    }
}

/// A directory opened once; paths relative to it resolve beneath it without following any
/// symlink. The root itself may be reached through symlinks (it is the worker's own path).
#[derive(Debug)]
pub struct RootDir {
    dir: Dir,
    path: PathBuf,
}

/// A directory on the way to a path: the root itself or one opened beneath it.
enum Parent<'a> {
    Root(&'a Dir),
    Sub(Dir),
}

impl Deref for Parent<'_> {
    type Target = Dir;
    fn deref(&self) -> &Dir {
        match self {
            Parent::Root(dir) => dir,
            Parent::Sub(dir) => dir,
        }
    }
}

/// The plain components of `rel` (`.` dropped); `..`, absolute paths and prefixes refused.
fn components(rel: &Path) -> Result<Vec<&OsStr>, BeneathError> {
    let mut parts = Vec::new();
    for component in rel.components() {
        match component {
            Component::Normal(part) => parts.push(part),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(BeneathError::NotRelative {
                    path: rel.display().to_string(),
                })
            }
        }
    }
    Ok(parts)
}

/// What a failed open of `name` in `parent` means: a symlink refused (`O_NOFOLLOW` gives
/// `ELOOP`, `O_DIRECTORY|O_NOFOLLOW` `ENOTDIR`; the entry is looked at to tell), or i/o.
fn classify(
    parent: &Dir,
    name: &OsStr,
    op: &'static str,
    shown: &Path,
    err: io::Error,
) -> BeneathError {
    let symlink = parent
        .symlink_metadata(name)
        .is_ok_and(|meta| meta.file_type().is_symlink());
    if symlink {
        BeneathError::Symlink {
            path: shown.display().to_string(),
        }
    } else {
        io_error(op, shown, err)
    }
}

fn io_error(op: &'static str, path: &Path, source: io::Error) -> BeneathError {
    BeneathError::Io {
        op,
        path: path.display().to_string(),
        source,
    }
}

fn read_only() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.read(true).follow(FollowSymlinks::No);
    options
}

impl RootDir {
    /// Open `root` (a directory).
    pub fn open(root: &Path) -> Result<RootDir, BeneathError> {
        let dir = Dir::open_ambient_dir(root, cap_std::ambient_authority())
            .map_err(|e| io_error("open", root, e))?;
        Ok(RootDir {
            dir,
            path: root.to_path_buf(),
        })
    }

    /// The path the root was opened at.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Walk `parts` from the root, each a directory opened without following a symlink.
    fn descend(&self, parts: &[&OsStr], shown: &Path) -> Result<Parent<'_>, BeneathError> {
        let mut current = Parent::Root(&self.dir);
        for part in parts {
            let next = current
                .open_dir_nofollow(part)
                .map_err(|e| classify(&current, part, "open directory", shown, e))?;
            current = Parent::Sub(next);
        }
        Ok(current)
    }

    /// The directory holding `rel` and `rel`'s last name (None for the root itself).
    fn parent_of<'p>(
        &self,
        rel: &'p Path,
    ) -> Result<(Parent<'_>, Option<&'p OsStr>), BeneathError> {
        let parts = components(rel)?;
        match parts.split_last() {
            Some((name, dirs)) => Ok((self.descend(dirs, rel)?, Some(*name))),
            None => Ok((Parent::Root(&self.dir), None)),
        }
    }

    /// `rel` with `options` (`O_NOFOLLOW` added), its directories opened without following.
    /// `O_NONBLOCK` too: it changes nothing for a regular file or a directory, and a fifo
    /// planted at the path cannot hang the worker's thread (its open or read fails instead).
    fn open_with(
        &self,
        rel: &Path,
        options: &OpenOptions,
        op: &'static str,
    ) -> Result<std::fs::File, BeneathError> {
        let (parent, name) = self.parent_of(rel)?;
        let name = name.unwrap_or(OsStr::new("."));
        let mut options = options.clone();
        options
            .follow(FollowSymlinks::No)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
        parent
            .open_with(name, &options)
            .map(cap_std::fs::File::into_std)
            .map_err(|e| classify(&parent, name, op, rel, e))
    }

    /// Open `rel` for reading (a file or a directory).
    pub fn open_file(&self, rel: impl AsRef<Path>) -> Result<std::fs::File, BeneathError> {
        self.open_with(rel.as_ref(), &read_only(), "open")
    }

    /// The whole content of file `rel`.
    pub fn read(&self, rel: impl AsRef<Path>) -> Result<Vec<u8>, BeneathError> {
        let rel = rel.as_ref();
        let mut bytes = Vec::new();
        self.open_file(rel)?
            .read_to_end(&mut bytes)
            .map_err(|e| io_error("read", rel, e))?;
        Ok(bytes)
    }

    /// Create file `rel` or truncate it, and write `bytes`; its directory must exist. A symlink
    /// at `rel` is refused, never written through.
    pub fn write(&self, rel: impl AsRef<Path>, bytes: &[u8]) -> Result<(), BeneathError> {
        let rel = rel.as_ref();
        let mut options = OpenOptions::new();
        options.write(true).create(true).truncate(true);
        let mut file = self.open_with(rel, &options, "write")?;
        file.write_all(bytes).map_err(|e| io_error("write", rel, e))
    }

    /// Put a new file with `bytes` at `rel` (its directory must exist), replacing whatever
    /// entry is there (a symlink included) by a rename: nothing is written through it.
    pub fn replace(&self, rel: impl AsRef<Path>, bytes: &[u8]) -> Result<(), BeneathError> {
        let rel = rel.as_ref();
        let (parent, name) = self.parent_of(rel)?;
        let Some(name) = name else {
            return Err(BeneathError::NotRelative {
                path: rel.display().to_string(),
            });
        };
        let mut temp = OsString::from(".");
        temp.push(name);
        temp.push(format!(
            ".lg-tmp-{}-{}",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let mut options = OpenOptions::new();
        options
            .write(true)
            .create_new(true)
            .follow(FollowSymlinks::No);
        let written = parent
            .open_with(&temp, &options)
            .and_then(|mut file| file.write_all(bytes))
            .and_then(|()| parent.rename(&temp, &parent, name));
        if let Err(err) = written {
            let _ = parent.remove_file(&temp);
            return Err(io_error("replace", rel, err));
        }
        Ok(())
    }

    /// Make directory `rel` and every missing one above it; an existing component that is a
    /// symlink (or not a directory) is refused.
    pub fn create_dir_all(&self, rel: impl AsRef<Path>) -> Result<(), BeneathError> {
        let rel = rel.as_ref();
        let mut current = Parent::Root(&self.dir);
        for part in components(rel)? {
            let opened = match current.open_dir_nofollow(part) {
                Err(err) if err.kind() == io::ErrorKind::NotFound => {
                    match current.create_dir(part) {
                        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                            return Err(io_error("create directory", rel, e))
                        }
                        _ => current.open_dir_nofollow(part),
                    }
                }
                other => other,
            };
            let next = opened.map_err(|e| classify(&current, part, "create directory", rel, e))?;
            current = Parent::Sub(next);
        }
        Ok(())
    }

    /// The `lstat` of `rel` (its directories opened without following).
    pub fn symlink_metadata(&self, rel: impl AsRef<Path>) -> Result<Metadata, BeneathError> {
        let rel = rel.as_ref();
        let (parent, name) = self.parent_of(rel)?;
        match name {
            Some(name) => parent
                .symlink_metadata(name)
                .map_err(|e| io_error("stat", rel, e)),
            None => parent.dir_metadata().map_err(|e| io_error("stat", rel, e)),
        }
    }

    /// Remove file (or symlink) `rel`; never follows it.
    pub fn remove_file(&self, rel: impl AsRef<Path>) -> Result<(), BeneathError> {
        let rel = rel.as_ref();
        let (parent, name) = self.parent_of(rel)?;
        let name = name.ok_or_else(|| BeneathError::NotRelative {
            path: rel.display().to_string(),
        })?;
        parent
            .remove_file(name)
            .map_err(|e| io_error("remove", rel, e))
    }

    /// Remove directory `rel` and everything in it; a symlink in it is removed, not followed.
    pub fn remove_dir_all(&self, rel: impl AsRef<Path>) -> Result<(), BeneathError> {
        let rel = rel.as_ref();
        let (parent, name) = self.parent_of(rel)?;
        let name = name.ok_or_else(|| BeneathError::NotRelative {
            path: rel.display().to_string(),
        })?;
        parent
            .remove_dir_all(name)
            .map_err(|e| classify(&parent, name, "remove", rel, e))
    }

    /// Directory `rel`, opened as a root of its own.
    pub fn open_dir(&self, rel: impl AsRef<Path>) -> Result<RootDir, BeneathError> {
        let rel = rel.as_ref();
        let parts = components(rel)?;
        let dir = match self.descend(&parts, rel)? {
            Parent::Root(dir) => dir.try_clone().map_err(|e| io_error("open", rel, e))?,
            Parent::Sub(dir) => dir,
        };
        Ok(RootDir {
            dir,
            path: self.path.join(rel),
        })
    }

    /// The entries of directory `rel` (names, types and `lstat`s; nothing followed).
    pub fn read_dir(&self, rel: impl AsRef<Path>) -> Result<ReadDir, BeneathError> {
        let rel = rel.as_ref();
        let parts = components(rel)?;
        self.descend(&parts, rel)?
            .entries()
            .map_err(|e| io_error("list", rel, e))
    }

    /// Give `rel` to `owner` (`uid`, `gid`); a symlink's own owner changes, never its target's.
    pub fn chown(&self, rel: impl AsRef<Path>, owner: (u32, u32)) -> Result<(), BeneathError> {
        let rel = rel.as_ref();
        let (parent, name) = self.parent_of(rel)?;
        let (uid, gid) = (
            rustix::fs::Uid::from_raw(owner.0),
            rustix::fs::Gid::from_raw(owner.1),
        );
        let result = match name {
            Some(name) => rustix::fs::chownat(
                &*parent,
                name,
                Some(uid),
                Some(gid),
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            ),
            None => rustix::fs::chownat(
                &*parent,
                "",
                Some(uid),
                Some(gid),
                rustix::fs::AtFlags::EMPTY_PATH,
            ),
        };
        result.map_err(|e| io_error("chown", rel, e.into()))
    }
}

/// Open `path`, an absolute path that holds no symlink (a canonical one, as the workspace walk
/// gives), for reading without following a symlink anywhere on it: a component swapped for one
/// since the path was found is refused.
pub fn open_no_symlinks(path: &Path) -> Result<std::fs::File, BeneathError> {
    let Ok(rel) = path.strip_prefix("/") else {
        return Err(BeneathError::NotRelative {
            path: path.display().to_string(),
        });
    };
    RootDir::open(Path::new("/"))?
        .open_file(rel)
        .map_err(|err| match err {
            BeneathError::Symlink { .. } => BeneathError::Symlink {
                path: path.display().to_string(),
            },
            BeneathError::Io { op, source, .. } => io_error(op, path, source),
            other => other,
        })
}

/// Make `path` and everything under it owned by `owner` (`uid`, `gid`), entries it owns
/// already left alone (one `lstat` each). Symlinks are left as they are and never followed,
/// nor is a directory that turns into one while the walk runs: each directory is listed
/// through the handle it was opened with, and each entry changed relative to it.
pub fn chown_tree(path: &Path, owner: (u32, u32)) -> io::Result<()> {
    use cap_std::fs::MetadataExt;
    let root = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => return Ok(()),
        Ok(meta) if !meta.is_dir() => {
            use std::os::unix::fs::MetadataExt as _;
            if (meta.uid(), meta.gid()) != owner {
                std::os::unix::fs::lchown(path, Some(owner.0), Some(owner.1))?;
            }
            return Ok(());
        }
        Ok(_) => RootDir::open(path)?,
        Err(err) => return Err(err),
    };
    let meta = root.symlink_metadata("")?;
    if (meta.uid(), meta.gid()) != owner {
        root.chown("", owner)?;
    }
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let entries = match root.read_dir(&rel) {
            Ok(entries) => entries,
            // Swapped for a symlink since it was listed: not followed, left alone.
            Err(BeneathError::Symlink { .. }) => continue,
            Err(err) => return Err(err.into()),
        };
        for entry in entries {
            let entry = entry?;
            let child = rel.join(entry.file_name());
            let meta = entry.metadata()?;
            if meta.file_type().is_symlink() {
                continue;
            }
            if (meta.uid(), meta.gid()) != owner {
                root.chown(&child, owner)?;
            }
            if meta.is_dir() {
                stack.push(child);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "beneath_tests.rs"]
mod tests;
