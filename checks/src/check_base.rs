//! The audited tree prepared once per audit as the read-only lower layer of every check's
//! layered copy (`sandbox/overlay.rs`): the checks of one audit then each get an empty upper
//! layer of their own instead of a full copy of the tree, so a check's copy costs about the
//! same for ten files as for ten thousand. Each check still runs on its own private copy (its
//! writes land in its own upper layer, removed with it) and the tree itself is never written:
//! overlayfs does not write a lower layer and the sandbox sees the host, the tree included,
//! read-only.

use std::io;
use std::path::{Path, PathBuf};

use crate::sandbox::launch::chown_tree;
use crate::sandbox::overlay::is_mountable;
use crate::sandbox::Sandbox;

/// Trees with at least this many files are layered: below it a full copy is cheaper than the
/// overlay's extra namespace and mount (measured by `check-bench`, see docs/benchmarks.md).
pub const LAYER_MIN_FILES: usize = 200;
/// ... or at least this many bytes.
pub const LAYER_MIN_BYTES: u64 = 8 * 1024 * 1024;

/// Is a tree of `files` files and `bytes` bytes worth layering rather than copying per check?
pub fn worth_layering(files: usize, bytes: u64) -> bool {
    files >= LAYER_MIN_FILES || bytes >= LAYER_MIN_BYTES
}

/// A tree prepared for layered check copies (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckBase {
    tree: PathBuf,
}

impl CheckBase {
    /// Prepare `tree` (a materialized snapshot: directories and regular files) as the lower
    /// layer of every check's copy under `sandbox`: when checks drop to the check user, every
    /// entry is made that user's (entries it owns already are left alone: a warm tree costs one
    /// `lstat` per entry), since overlayfs copies a file up only for its owner. `None` when the
    /// sandbox cannot layer or the tree's path cannot be mounted: copy per check instead.
    /// Blocking.
    pub fn prepare(tree: &Path, sandbox: &Sandbox) -> io::Result<Option<CheckBase>> {
        if !sandbox.layers() {
            return Ok(None);
        }
        let tree = tree.canonicalize()?;
        if !is_mountable(&tree) {
            return Ok(None);
        }
        if let Some(owner) = sandbox.run_as {
            chown_tree(&tree, owner)?;
        }
        Ok(Some(CheckBase { tree }))
    }

    /// The tree every check's copy is layered over.
    pub fn tree(&self) -> &Path {
        &self.tree
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn layering_threshold_table() {
        let cases = [
            (1, 100, false),
            (LAYER_MIN_FILES - 1, LAYER_MIN_BYTES - 1, false),
            (LAYER_MIN_FILES, 0, true),
            (3, LAYER_MIN_BYTES, true),
        ];
        for (files, bytes, want) in cases {
            assert_eq!(worth_layering(files, bytes), want, "{files} {bytes}");
        }
    }

    #[test]
    fn an_unlayered_sandbox_prepares_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let sandbox = Sandbox::unisolated("unit test");
        assert_eq!(CheckBase::prepare(dir.path(), &sandbox).unwrap(), None);
    }
}
