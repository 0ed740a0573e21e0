//! The overlay mount itself: an episode's workspace is overlayfs with a kept, verified tree as
//! its read-only lower layer and a fresh upper directory of its own. Made by the worker with
//! `mount(2)` (it needs `CAP_SYS_ADMIN` where the worker runs, i.e. a root worker), so that the
//! worker's own tools and the agent's sandbox (which binds the workspace in) see the same
//! merged tree. [`probe`] tries it once at start-up under the work dir.
//!
//! Options: `redirect_dir=off` (a renamed lower directory is copied, never recorded as a
//! redirect xattr the freeze would have to follow), `metacopy=off` (a `chmod` copies the whole
//! file up, so the upper layer holds every changed file's bytes), `index=off`, `xino=off`, and
//! the mount is `nosuid,nodev`. Overlayfs never writes a lower layer.

use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use rustix::mount::{MountFlags, UnmountFlags};

/// One overlay: the read-only `lower` tree, the `upper` and `work` directories (same
/// filesystem, both empty at mount time) and where it is mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverlayLayers {
    pub lower: PathBuf,
    pub upper: PathBuf,
    pub work: PathBuf,
}

/// Can `path` go into overlayfs mount options as it is (absolute, no separators or escapes)?
pub(crate) fn is_mountable(path: &Path) -> bool {
    path.to_str().is_some_and(|p| {
        p.starts_with('/')
            && !p
                .chars()
                .any(|c| matches!(c, ',' | ':' | '\\' | '=') || c.is_whitespace() || c.is_control())
    })
}

impl OverlayLayers {
    /// The overlayfs mount options; None when a path cannot be written into them.
    pub(crate) fn options(&self) -> Option<String> {
        [&self.lower, &self.upper, &self.work]
            .iter()
            .all(|p| is_mountable(p))
            .then(|| {
                format!(
                    "lowerdir={},upperdir={},workdir={},redirect_dir=off,metacopy=off,index=off,xino=off",
                    self.lower.display(),
                    self.upper.display(),
                    self.work.display()
                )
            })
    }
}

/// Mount `layers` on `target` (an existing directory). Blocking.
pub fn mount_overlay(layers: &OverlayLayers, target: &Path) -> io::Result<()> {
    let options = layers.options().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the overlay's directories cannot be written into mount options",
        )
    })?;
    let data = std::ffi::CString::new(options)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    rustix::mount::mount(
        "overlay",
        target,
        "overlay",
        MountFlags::NOSUID | MountFlags::NODEV,
        data.as_c_str(),
    )
    .map_err(io::Error::from)
}

/// Unmount `target`; a mount still busy (a process the agent left holds a file open) is
/// detached instead, so it goes once the last user lets go. Blocking.
pub fn unmount(target: &Path) -> io::Result<()> {
    match rustix::mount::unmount(target, UnmountFlags::empty()) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::BUSY) => {
            rustix::mount::unmount(target, UnmountFlags::DETACH).map_err(io::Error::from)
        }
        Err(err) => Err(io::Error::from(err)),
    }
}

/// Overlay mounts under `work_dir` over trees of the cache at `cache_root`, left by an earlier
/// process of this worker that was killed mid-episode (so never unmounted), detached; how
/// many. Call before the cache is opened. Blocking.
pub fn unmount_stale(work_dir: &Path, cache_root: &Path) -> usize {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    stale_mounts(&table, work_dir, cache_root)
        .iter()
        .filter(|target| rustix::mount::unmount(target.as_path(), UnmountFlags::DETACH).is_ok())
        .count()
}

/// The overlay mount points under `work_dir` whose lower layer is under `cache_root`, in a
/// `/proc/self/mountinfo` table, deepest first.
fn stale_mounts(mountinfo: &str, work_dir: &Path, cache_root: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = mountinfo
        .lines()
        .filter_map(|line| {
            let (mount, fs) = line.split_once(" - ")?;
            let target = unescape(mount.split(' ').nth(4)?);
            let mut fs = fs.split(' ');
            let is_overlay = fs.next() == Some("overlay");
            let lower = fs
                .nth(1)?
                .split(',')
                .find_map(|o| o.strip_prefix("lowerdir="))?;
            (is_overlay && Path::new(&unescape(lower)).starts_with(cache_root))
                .then(|| PathBuf::from(target))
        })
        .filter(|target| target.starts_with(work_dir) && target != work_dir)
        .collect();
    found.sort_by_key(|t| std::cmp::Reverse(t.components().count()));
    found
}

/// A mountinfo path with its octal escapes (`\040` for a space) undone.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            std::str::from_utf8(d)
                .ok()
                .and_then(|d| u8::from_str_radix(d, 8).ok())
        });
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Is `metadata` an overlayfs whiteout (a character device 0/0)?
pub(crate) fn is_whiteout(metadata: &std::fs::Metadata) -> bool {
    metadata.file_type().is_char_device() && metadata.rdev() == 0
}

/// Is the upper directory `path` opaque (it hides everything the lower had beneath it)?
/// A root mount marks it `trusted.overlay.opaque`, a `userxattr` one `user.overlay.opaque`.
pub(crate) fn is_opaque(path: &Path) -> bool {
    ["trusted.overlay.opaque", "user.overlay.opaque"]
        .iter()
        .any(|name| {
            let mut value = [0u8; 4];
            matches!(rustix::fs::lgetxattr(path, *name, &mut value[..]), Ok(n) if value[..n.min(4)].first() == Some(&b'y'))
        })
}

/// Can this process mount episode overlays under `work_dir`? Mounts a tiny one there, writes,
/// changes and deletes through it, and checks that the lower stayed as it was and the upper
/// holds the change and a whiteout. `Err` says why not (the worker then copies instead).
/// Blocking.
pub fn probe(work_dir: &Path) -> Result<(), String> {
    let root = tempfile_in(work_dir)
        .map_err(|e| format!("a probe dir under {}: {e}", work_dir.display()))?;
    let outcome = probe_in(&root);
    let _ = unmount(&root.join("merged"));
    let _ = std::fs::remove_dir_all(&root);
    outcome
}

fn tempfile_in(work_dir: &Path) -> io::Result<PathBuf> {
    let root = work_dir.join(format!(".overlay-probe-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&root)?;
    Ok(root)
}

fn probe_in(root: &Path) -> Result<(), String> {
    let layers = OverlayLayers {
        lower: root.join("lower"),
        upper: root.join("upper"),
        work: root.join("work"),
    };
    let merged = root.join("merged");
    let step = |what: &str, e: io::Error| format!("{what}: {e}");
    for dir in [&layers.lower, &layers.upper, &layers.work, &merged] {
        std::fs::create_dir(dir).map_err(|e| step("creating the probe's dirs", e))?;
    }
    std::fs::write(layers.lower.join("kept"), b"lower").map_err(|e| step("writing", e))?;
    std::fs::write(layers.lower.join("gone"), b"lower").map_err(|e| step("writing", e))?;
    mount_overlay(&layers, &merged).map_err(|e| step("mount -t overlay", e))?;
    let through = (|| {
        std::fs::write(merged.join("kept"), b"upper")?;
        std::fs::remove_file(merged.join("gone"))?;
        std::fs::read(merged.join("kept"))
    })();
    let _ = unmount(&merged);
    let read = through.map_err(|e| step("writing through the overlay", e))?;
    let lower_kept = std::fs::read(layers.lower.join("kept")).unwrap_or_default();
    let whiteout =
        std::fs::symlink_metadata(layers.upper.join("gone")).is_ok_and(|m| is_whiteout(&m));
    if read != b"upper" || lower_kept != b"lower" || !layers.lower.join("gone").exists() {
        return Err("the overlay did not keep its lower layer as it was".into());
    }
    if !whiteout {
        return Err("a deletion did not leave a whiteout in the upper layer".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::print_stderr)]
    use super::*;

    #[test]
    fn mount_options_refuse_paths_that_would_split_them() {
        let layers = |lower: &str| OverlayLayers {
            lower: lower.into(),
            upper: "/w/ep/upper".into(),
            work: "/w/ep/work".into(),
        };
        assert_eq!(
            layers("/w/trees/1").options().unwrap(),
            "lowerdir=/w/trees/1,upperdir=/w/ep/upper,workdir=/w/ep/work,\
             redirect_dir=off,metacopy=off,index=off,xino=off"
        );
        for bad in [
            "/w/a,b", "/w/a:b", "/w/a b", "relative", "/w/a=b", "/w/a\\b",
        ] {
            assert_eq!(layers(bad).options(), None, "{bad}");
        }
    }

    /// Where this process may mount (a root worker), the probe passes and leaves nothing
    /// behind; elsewhere it says why (and the test says SKIP).
    #[test]
    fn probe_passes_where_mounting_is_allowed_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        match probe(dir.path()) {
            Ok(()) => {}
            Err(why) => {
                assert!(
                    !rustix::process::geteuid().is_root(),
                    "root probe failed: {why}"
                );
                eprintln!("SKIP overlay probe: {why}");
            }
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn stale_mounts_are_the_overlays_under_the_work_dir() {
        let table = "\
59 27 0:47 / /w/ep-1 rw,nosuid - overlay overlay rw,lowerdir=/w/.cache/trees/1
60 27 0:48 / /w/ep\\0402 rw - overlay overlay rw,lowerdir=/w/.cache/trees/2
61 27 0:49 / /w/ep-1/deeper rw - overlay overlay rw,lowerdir=/w/.cache/trees/9
62 27 0:50 / /other/ep rw - overlay overlay rw,lowerdir=/w/.cache/trees/3
63 27 0:51 / /w/bind rw - ext4 /dev/sda1 rw
64 27 0:52 / /w rw - overlay overlay rw,lowerdir=/w/.cache/trees/4
65 27 0:53 / /w/other-worker rw - overlay overlay rw,lowerdir=/w/.cache-2/trees/1
";
        let found = stale_mounts(table, Path::new("/w"), Path::new("/w/.cache"));
        let want: Vec<PathBuf> = ["/w/ep-1/deeper", "/w/ep-1", "/w/ep 2"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(found, want);
    }

    #[test]
    fn an_unwritable_work_dir_fails_the_probe_with_a_reason() {
        let err = probe(Path::new("/proc/no-such-dir")).unwrap_err();
        assert!(err.contains("probe dir"), "{err}");
    }
}
