//! Reusing a sealed tree (one only this cache ever wrote, lent out read-only as an overlay's
//! lower layer): it holds exactly its manifest, so turning it into another snapshot's tree is
//! the manifest difference alone. Paths removed or changed are deleted (directories left empty
//! go too); what is new or changed is left for `warm.rs` to write. No other file is looked at.

use std::fs;
use std::io::ErrorKind;
use std::path::Path;

use loopgate_protocol::snapshot::{Manifest, PathChange};

use crate::cache::reconcile::Reconciled;
use crate::error::SnapshotError;
use crate::materialize::io_error;

/// Turn `dir`, holding exactly a manifest that differs from `target` by `changes` (its
/// [`loopgate_protocol::snapshot::diff_manifests`] to `target`), into `target` less the files still to write.
pub(crate) fn reconcile_sealed(
    dir: &Path,
    changes: &[PathChange],
    target: &Manifest,
) -> Result<Reconciled, SnapshotError> {
    let mut write = Vec::new();
    for change in changes {
        let (path, written) = match change {
            PathChange::Added { path } => (path, true),
            PathChange::Modified { path } => (path, true),
            PathChange::Removed { path } => (path, false),
        };
        if !matches!(change, PathChange::Added { .. }) {
            remove_with_empty_parents(dir, path)?;
        }
        if written {
            if let Some(index) = target.position(path) {
                write.push(index);
            }
        }
    }
    write.sort_unstable();
    Ok(Reconciled {
        kept: target.entries.len() - write.len(),
        write,
        ..Reconciled::default()
    })
}

/// Delete `dir/rel` and then each of its directories that it left empty.
fn remove_with_empty_parents(dir: &Path, rel: &str) -> Result<(), SnapshotError> {
    let path = dir.join(rel);
    match fs::remove_file(&path) {
        Ok(()) => {}
        Err(err) if err.kind() == ErrorKind::NotFound => {}
        Err(err) => return Err(io_error(&path, err)),
    }
    let mut parent = path.parent();
    while let Some(at) = parent {
        if at == dir || fs::remove_dir(at).is_err() {
            break;
        }
        parent = at.parent();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use loopgate_protocol::snapshot::{diff_manifests, sha256_hex, ManifestEntry};

    fn manifest(files: &[(&str, &str)]) -> Manifest {
        Manifest::new(
            files
                .iter()
                .map(|(path, content)| ManifestEntry {
                    path: path.to_string(),
                    mode: 0o644,
                    size: content.len() as u64,
                    sha256: sha256_hex(content.as_bytes()),
                })
                .collect(),
        )
        .unwrap()
    }

    #[test]
    fn only_the_difference_is_touched() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let old = [
            ("a", "a"),
            ("d/e/f", "f"),
            ("dir-to-file/x", "x"),
            ("same", "s"),
        ];
        for (path, content) in old {
            fs::create_dir_all(d.join(path).parent().unwrap()).unwrap();
            fs::write(d.join(path), content).unwrap();
        }
        // A file the manifest does not name is not looked at: the tree is sealed.
        fs::write(d.join("unlisted"), b"u").unwrap();
        let target = manifest(&[
            ("a", "A"),
            ("dir-to-file", "f"),
            ("n/new", "n"),
            ("same", "s"),
        ]);
        let changes = diff_manifests(&manifest(&old), &target);
        let done = reconcile_sealed(d, &changes, &target).unwrap();
        let paths: Vec<&str> = done
            .write
            .iter()
            .map(|i| target.entries[*i].path.as_str())
            .collect();
        assert_eq!(paths, ["a", "dir-to-file", "n/new"]);
        assert_eq!(done.kept, 1);
        assert!(!d.join("a").exists() && !d.join("d").exists());
        assert!(!d.join("dir-to-file").exists());
        assert!(d.join("same").exists() && d.join("unlisted").exists());
    }
}
