//! A small tmpfs mounted on a fresh temp dir, for full-disk tests: [`Tmpfs::fill`] writes a
//! ballast file until the filesystem is full, [`Tmpfs::free`] removes it. Mounting needs root
//! (or CAP_SYS_ADMIN): where it is refused, [`Tmpfs::mount`] prints a SKIP line and gives
//! `None`, except under `CI`, where that is an error (the test must run there).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

const BALLAST: &str = "ballast";
const CHUNK: usize = 1024 * 1024;

/// A mounted tmpfs, unmounted (lazily) on drop.
pub struct Tmpfs {
    dir: TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (mount(8)'s `size=`, e.g. `"16m"`) for the test `what`.
    #[allow(clippy::print_stdout)] // the SKIP line is this function's report
    pub fn mount(size: &str, what: &str) -> anyhow::Result<Option<Tmpfs>> {
        let dir = tempfile::Builder::new()
            .prefix("loopgate-tmpfs-")
            .tempdir()?;
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(dir.path())
            .output();
        let refused = match out {
            Ok(out) if out.status.success() => return Ok(Some(Tmpfs { dir })),
            Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_string(),
            Err(e) => format!("cannot run mount: {e}"),
        };
        if std::env::var_os("CI").is_some() {
            anyhow::bail!("{what}: mounting a tmpfs was refused under CI: {refused}");
        }
        println!("SKIP: {what}: mounting a tmpfs needs root or CAP_SYS_ADMIN ({refused})");
        Ok(None)
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Bytes still free on the tmpfs.
    pub fn free_bytes(&self) -> anyhow::Result<u64> {
        let stat = rustix::fs::statvfs(self.dir.path())?;
        Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
    }

    /// Writes the ballast file until a write fails for want of space; the bytes left free.
    pub fn fill(&self) -> anyhow::Result<u64> {
        let path = self.ballast();
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        let chunk = vec![0u8; CHUNK];
        let mut size = CHUNK;
        while size > 0 {
            match file.write(&chunk[..size]) {
                Ok(0) => size /= 2,
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(28) => size /= 2,
                Err(e) => return Err(e.into()),
            }
        }
        let _ = file.sync_all();
        self.free_bytes()
    }

    /// Removes the ballast file.
    pub fn free(&self) -> anyhow::Result<()> {
        match std::fs::remove_file(self.ballast()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn ballast(&self) -> PathBuf {
        self.dir.path().join(BALLAST)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn fills_up_and_frees() {
        let Some(disk) = Tmpfs::mount("2m", "tmpfs::fills_up_and_frees").unwrap() else {
            return;
        };
        let empty = disk.free_bytes().unwrap();
        assert!(empty > 1024 * 1024, "{empty}");
        assert_eq!(disk.fill().unwrap(), 0);
        let err = std::fs::write(disk.path().join("more"), b"x".repeat(8192)).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(28), "{err}");
        disk.free().unwrap();
        assert_eq!(disk.free_bytes().unwrap(), empty);
        let path = disk.path().to_path_buf();
        drop(disk);
        assert!(!path.exists());
    }
}
