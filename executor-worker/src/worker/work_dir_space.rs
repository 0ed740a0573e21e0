//! Room in the work dir: an episode materializes a workspace, runs tools and freezes the
//! candidate there, so with less than `[executor] work_dir_min_free_bytes` free on its
//! filesystem the worker takes no work (it stays queued for this or another worker) and
//! `/readyz` says why; both ask [`WorkDirSpace::check`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use loopgate_transport::runtime::PullGate;

const MIB: u64 = 1024 * 1024;

/// The work dir and the free bytes it must keep.
#[derive(Debug, Clone)]
pub(crate) struct WorkDirSpace {
    dir: PathBuf,
    floor: u64,
}

impl WorkDirSpace {
    pub(crate) fn new(dir: &Path, floor: u64) -> WorkDirSpace {
        WorkDirSpace {
            dir: dir.to_path_buf(),
            floor,
        }
    }

    /// `Err(why)` while the work dir's filesystem has less than the floor free (or cannot be
    /// asked); always `Ok` with a floor of 0.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.floor == 0 {
            return Ok(());
        }
        let free = free_bytes(&self.dir).map_err(|e| {
            format!(
                "cannot read the free space of the work dir {}: {e}",
                self.dir.display()
            )
        })?;
        verdict(&self.dir, free, self.floor)
    }

    /// The check as a consume loop's gate.
    pub(crate) fn gate(&self) -> PullGate {
        let space = self.clone();
        Arc::new(move || space.check())
    }
}

/// Bytes an unprivileged writer may still use on the filesystem holding `dir`.
fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    let stat = rustix::fs::statvfs(dir)?;
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}

fn verdict(dir: &Path, free: u64, floor: u64) -> Result<(), String> {
    if free >= floor {
        return Ok(());
    }
    Err(format!(
        "the work dir {} has {} free, below the {} floor ([executor] work_dir_min_free_bytes)",
        dir.display(),
        human(free),
        human(floor)
    ))
}

fn human(bytes: u64) -> String {
    if bytes >= MIB {
        format!("{:.1} MiB", bytes as f64 / MIB as f64)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn below_the_floor_says_how_much_is_free() {
        let dir = Path::new("/w");
        // (free, floor) -> the reason, or None when there is room
        for (free, floor, why) in [
            (64 * MIB, 64 * MIB, None),
            (100 * MIB, 64 * MIB, None),
            (
                3 * MIB,
                64 * MIB,
                Some("the work dir /w has 3.0 MiB free, below the 64.0 MiB floor ([executor] work_dir_min_free_bytes)"),
            ),
            (
                512,
                1024,
                Some("the work dir /w has 512 bytes free, below the 1024 bytes floor ([executor] work_dir_min_free_bytes)"),
            ),
        ] {
            assert_eq!(verdict(dir, free, floor).err().as_deref(), why, "{free} {floor}");
        }
    }

    #[test]
    fn a_real_directory_has_room_and_a_zero_floor_never_refuses() {
        let dir = tempfile::tempdir().unwrap();
        assert!(WorkDirSpace::new(dir.path(), 1).check().is_ok());
        assert!(WorkDirSpace::new(dir.path(), u64::MAX).check().is_err());
        assert!(WorkDirSpace::new(Path::new("/no/such/dir"), 0)
            .check()
            .is_ok());
        let missing = WorkDirSpace::new(Path::new("/no/such/dir"), 1).check();
        assert!(missing.is_err_and(|e| e.contains("cannot read")));
    }
}
