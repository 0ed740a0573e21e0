//! Copying a file into or out of the cache: a reflink (`FICLONE`: a copy-on-write clone, the
//! two files share blocks until one is written, so writing the copy never changes the original)
//! where the filesystem allows, a plain copy otherwise. Never a hard link: an agent or a check
//! writing through one would rewrite the cache.

use std::fs;
use std::io;
use std::path::Path;

/// Create `dest` (must not exist) with the bytes of `src`; true when it was a reflink.
pub(crate) fn reflink_or_copy(src: &Path, dest: &Path) -> io::Result<bool> {
    let mut target = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dest)?;
    clone_into(src, &mut target)
}

/// Fill `target` (a new, empty file) with the bytes of `src`; true when it was a reflink.
pub(crate) fn clone_into(src: &Path, target: &mut fs::File) -> io::Result<bool> {
    let mut source = fs::File::open(src)?;
    if rustix::fs::ioctl_ficlone(&*target, &source).is_ok() {
        return Ok(true);
    }
    // Not supported here (ext4, tmpfs, across filesystems): copy. `io::copy` between files
    // uses copy_file_range, which some filesystems turn into a clone on their own.
    io::copy(&mut source, target)?;
    Ok(false)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn copies_are_independent() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        fs::write(&a, b"original").unwrap();
        reflink_or_copy(&a, &b).unwrap();
        fs::write(&b, b"changed").unwrap();
        assert_eq!(fs::read(&a).unwrap(), b"original");
        assert!(reflink_or_copy(&a, &b).is_err(), "dest must not exist");
    }
}
