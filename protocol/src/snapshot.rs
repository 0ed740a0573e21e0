//! Snapshot manifest format: the frozen artifact's identity.
//!
//! A snapshot is a manifest of entries `{path, mode, size, sha256}` sorted by path plus one blob
//! per distinct file content. The snapshot id is the sha256 of the manifest's canonical JSON.
//! Paths are relative, `/`-separated, normalized and never leave the workspace.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Hex sha256 of a manifest's canonical bytes.
pub type SnapshotId = String;

/// Manifest format version; bump when the canonical form changes.
pub const MANIFEST_VERSION: u32 = 1;

/// One file of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ManifestEntry {
    pub path: String,
    /// Unix permission bits (0o644 = 420, 0o755 = 493). Only regular files are stored.
    pub mode: u32,
    pub size: u64,
    pub sha256: String,
}

/// A snapshot's manifest; the snapshot id is the sha256 of its canonical JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Manifest {
    pub v: u32,
    pub entries: Vec<ManifestEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotPathError {
    #[error("path is empty")]
    Empty,
    #[error("path '{0}' is absolute")]
    Absolute(String),
    #[error("path '{0}' has a '..' component")]
    ParentComponent(String),
    #[error("path '{0}' is not normalized (empty or '.' component, or backslash)")]
    NotNormalized(String),
    #[error("path '{0}' appears twice in the manifest")]
    Duplicate(String),
    /// A path is both a file and a directory above another path (`a` and `a/b`): such a tree
    /// can never be written out.
    #[error("'{file}' is a file, but '{nested}' puts it as a directory")]
    FileAndDirectory { file: String, nested: String },
    #[error("manifest version {0} is not supported (expected {MANIFEST_VERSION})")]
    UnsupportedVersion(u32),
    #[error("entry '{path}' has malformed sha256 '{sha256}'")]
    BadDigest { path: String, sha256: String },
}

/// Validate one manifest path: relative, `/`-separated, no `..`, no `.`, no empty components.
pub fn validate_relative_path(path: &str) -> Result<(), SnapshotPathError> {
    if path.is_empty() {
        return Err(SnapshotPathError::Empty);
    }
    if path.starts_with('/') {
        return Err(SnapshotPathError::Absolute(path.to_string()));
    }
    if path.contains('\\') || path.contains('\0') {
        return Err(SnapshotPathError::NotNormalized(path.to_string()));
    }
    for component in path.split('/') {
        match component {
            ".." => return Err(SnapshotPathError::ParentComponent(path.to_string())),
            "" | "." => return Err(SnapshotPathError::NotNormalized(path.to_string())),
            _ => {}
        }
    }
    Ok(())
}

/// The first pair of paths where one is a file and also a directory above the other (`a` and
/// `a/b`), or `None`. Paths are taken as given (validate each one first).
pub fn file_and_directory_conflict<'a>(
    paths: impl IntoIterator<Item = &'a str> + Clone,
) -> Option<SnapshotPathError> {
    let files: std::collections::HashSet<&str> = paths.clone().into_iter().collect();
    paths.into_iter().find_map(|path| {
        path.match_indices('/')
            .map(|(at, _)| &path[..at])
            .find(|parent| files.contains(parent))
            .map(|parent| SnapshotPathError::FileAndDirectory {
                file: parent.to_string(),
                nested: path.to_string(),
            })
    })
}

/// [`file_and_directory_conflict`] for paths in sorted (byte) order, in one pass and without
/// hashing: between a file `a` and a path below it, `a/...`, sort only paths that start with
/// `a` and a byte below `/`, so the earlier paths that may still be a directory of a later one
/// are a chain of prefixes, and only the longest can be.
fn sorted_file_and_directory_conflict<'a>(
    paths: impl IntoIterator<Item = &'a str>,
) -> Option<SnapshotPathError> {
    let mut open: Vec<&str> = Vec::new();
    for path in paths {
        while let Some(&file) = open.last() {
            match path.as_bytes().get(file.len()) {
                Some(&next) if next <= b'/' && path.starts_with(file) => break,
                // Every later path sorts after anything `file` could be a directory of.
                _ => {
                    open.pop();
                }
            }
        }
        if let Some(&file) = open.last() {
            if path.as_bytes().get(file.len()) == Some(&b'/') {
                return Some(SnapshotPathError::FileAndDirectory {
                    file: file.to_string(),
                    nested: path.to_string(),
                });
            }
        }
        open.push(path);
    }
    None
}

pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl Manifest {
    /// Build a manifest, sorting entries by path and validating every path.
    pub fn new(mut entries: Vec<ManifestEntry>) -> Result<Self, SnapshotPathError> {
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        let manifest = Manifest {
            v: MANIFEST_VERSION,
            entries,
        };
        manifest.validate()?;
        Ok(manifest)
    }

    pub fn empty() -> Self {
        Manifest {
            v: MANIFEST_VERSION,
            entries: Vec::new(),
        }
    }

    /// Check everything a reader must not trust blindly: version, paths, digests, order.
    pub fn validate(&self) -> Result<(), SnapshotPathError> {
        if self.v != MANIFEST_VERSION {
            return Err(SnapshotPathError::UnsupportedVersion(self.v));
        }
        let mut previous: Option<&str> = None;
        let mut sorted = true;
        for entry in &self.entries {
            validate_relative_path(&entry.path)?;
            if !is_sha256_hex(&entry.sha256) {
                return Err(SnapshotPathError::BadDigest {
                    path: entry.path.clone(),
                    sha256: entry.sha256.clone(),
                });
            }
            if previous == Some(entry.path.as_str()) {
                return Err(SnapshotPathError::Duplicate(entry.path.clone()));
            }
            sorted &= previous.is_none_or(|p| p < entry.path.as_str());
            previous = Some(entry.path.as_str());
        }
        let paths = self.entries.iter().map(|e| e.path.as_str());
        let conflict = if sorted {
            sorted_file_and_directory_conflict(paths)
        } else {
            file_and_directory_conflict(paths)
        };
        match conflict {
            Some(conflict) => Err(conflict),
            None => Ok(()),
        }
    }

    /// Canonical bytes: compact JSON of the sorted manifest. The snapshot id hashes these.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        // Serializing plain structs of strings and integers cannot fail.
        if self.is_sorted() {
            // The usual case (`Manifest::new` sorts): no copy of a large manifest.
            return serde_json::to_vec(self).unwrap_or_default();
        }
        let mut sorted = self.clone();
        sorted.entries.sort_by(|a, b| a.path.cmp(&b.path));
        serde_json::to_vec(&sorted).unwrap_or_default()
    }

    /// Are the entries in path order (as `Manifest::new` leaves them)?
    pub fn is_sorted(&self) -> bool {
        self.entries.is_sorted_by(|a, b| a.path <= b.path)
    }

    pub fn id(&self) -> SnapshotId {
        sha256_hex(&self.canonical_bytes())
    }

    pub fn total_bytes(&self) -> u64 {
        self.entries.iter().map(|e| e.size).sum()
    }

    pub fn get(&self, path: &str) -> Option<&ManifestEntry> {
        self.position(path).map(|i| &self.entries[i])
    }

    /// The index of `path`'s entry (entries sorted, as `Manifest::new` leaves them).
    pub fn position(&self, path: &str) -> Option<usize> {
        self.entries
            .binary_search_by(|e| e.path.as_str().cmp(path))
            .ok()
    }
}

/// How one path differs between a base and a candidate snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PathChange {
    Added { path: String },
    Removed { path: String },
    Modified { path: String },
}

impl PathChange {
    pub fn path(&self) -> &str {
        match self {
            PathChange::Added { path }
            | PathChange::Removed { path }
            | PathChange::Modified { path } => path,
        }
    }
}

/// Paths added, removed or modified (content or mode) from `base` to `candidate`, sorted.
pub fn diff_manifests(base: &Manifest, candidate: &Manifest) -> Vec<PathChange> {
    let mut changes = Vec::new();
    let (mut i, mut j) = (0, 0);
    let (a, b) = (&base.entries, &candidate.entries);
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x.path == y.path => {
                if x.sha256 != y.sha256 || x.mode != y.mode {
                    changes.push(PathChange::Modified {
                        path: y.path.clone(),
                    });
                }
                i += 1;
                j += 1;
            }
            (Some(x), Some(y)) if x.path < y.path => {
                changes.push(PathChange::Removed {
                    path: x.path.clone(),
                });
                i += 1;
            }
            (Some(_), Some(y)) => {
                changes.push(PathChange::Added {
                    path: y.path.clone(),
                });
                j += 1;
            }
            (Some(x), None) => {
                changes.push(PathChange::Removed {
                    path: x.path.clone(),
                });
                i += 1;
            }
            (None, Some(y)) => {
                changes.push(PathChange::Added {
                    path: y.path.clone(),
                });
                j += 1;
            }
            (None, None) => break,
        }
    }
    changes
}

/// Does `path` fall under one of the glob-free scope prefixes? A scope entry is either an exact
/// file path or a directory prefix ending in `/`; `*` or `.` means the whole workspace.
pub fn path_in_scope(path: &str, scope: &[String]) -> bool {
    scope.iter().any(|s| {
        let s = s.trim();
        s == "*" || s == "." || s == path || (s.ends_with('/') && path.starts_with(s))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, content: &[u8]) -> ManifestEntry {
        ManifestEntry {
            path: path.into(),
            mode: 0o644,
            size: content.len() as u64,
            sha256: sha256_hex(content),
        }
    }

    #[test]
    fn path_validation_table() {
        let cases: &[(&str, bool)] = &[
            ("a.txt", true),
            ("dir/a.txt", true),
            ("", false),
            ("/etc/passwd", false),
            ("../x", false),
            ("a/../../x", false),
            ("a//b", false),
            ("./a", false),
            ("a\\b", false),
            ("..foo", true),
        ];
        for (path, ok) in cases {
            assert_eq!(validate_relative_path(path).is_ok(), *ok, "{path}");
        }
    }

    #[test]
    fn id_is_order_independent_and_content_sensitive() {
        let m1 = Manifest::new(vec![entry("b", b"2"), entry("a", b"1")]).unwrap();
        let m2 = Manifest::new(vec![entry("a", b"1"), entry("b", b"2")]).unwrap();
        let m3 = Manifest::new(vec![entry("a", b"1"), entry("b", b"3")]).unwrap();
        assert_eq!(m1.id(), m2.id());
        assert_ne!(m1.id(), m3.id());
        assert!(is_sha256_hex(&m1.id()));
    }

    #[test]
    fn duplicates_and_bad_digests_rejected() {
        assert!(matches!(
            Manifest::new(vec![entry("a", b"1"), entry("a", b"2")]),
            Err(SnapshotPathError::Duplicate(_))
        ));
        let mut bad = entry("a", b"1");
        bad.sha256 = "xyz".into();
        assert!(matches!(
            Manifest::new(vec![bad]),
            Err(SnapshotPathError::BadDigest { .. })
        ));
    }

    #[test]
    fn a_path_cannot_be_a_file_and_a_directory() {
        // (paths, the conflict found as (file, nested))
        let cases: &[(&[&str], Option<(&str, &str)>)] = &[
            (&["a", "b"], None),
            (&["a", "a/b"], Some(("a", "a/b"))),
            (&["a", "a-x", "a/b/c"], Some(("a", "a/b/c"))),
            (&["a/b", "a/b/c"], Some(("a/b", "a/b/c"))),
            (&["ab", "a/b"], None),
            (&["a/b", "a/c", "a.txt"], None),
            (&["a", "a!", "a-b", "a-b/c"], Some(("a-b", "a-b/c"))),
            (&["a", "a-b", "a.c", "a/x"], Some(("a", "a/x"))),
            (&["a", "a-b", "b", "b0", "b/x"], Some(("b", "b/x"))),
            (&["a", "a-b/c", "a-b/d", "a/z"], Some(("a", "a/z"))),
            (&["x/a", "x/a-b", "x/a.c", "x/ab/c", "y"], None),
        ];
        for (paths, expected) in cases {
            let found = file_and_directory_conflict(paths.iter().copied());
            let mut sorted = paths.to_vec();
            sorted.sort();
            assert_eq!(
                sorted_file_and_directory_conflict(sorted.iter().copied()),
                found,
                "sorted {paths:?}"
            );
            let expected = expected.map(|(file, nested)| SnapshotPathError::FileAndDirectory {
                file: file.into(),
                nested: nested.into(),
            });
            assert_eq!(found, expected, "{paths:?}");
            let manifest = Manifest::new(paths.iter().map(|p| entry(p, b"x")).collect());
            assert_eq!(manifest.err(), expected, "{paths:?}");
        }
    }

    #[test]
    fn diff_reports_each_kind() {
        let base = Manifest::new(vec![
            entry("keep", b"k"),
            entry("mod", b"1"),
            entry("gone", b"g"),
        ])
        .unwrap();
        let cand = Manifest::new(vec![
            entry("keep", b"k"),
            entry("mod", b"2"),
            entry("new", b"n"),
        ])
        .unwrap();
        let changes = diff_manifests(&base, &cand);
        assert_eq!(
            changes,
            vec![
                PathChange::Removed {
                    path: "gone".into()
                },
                PathChange::Modified { path: "mod".into() },
                PathChange::Added { path: "new".into() },
            ]
        );
    }

    #[test]
    fn scope_matching() {
        let scope = vec!["src/".to_string(), "README.md".to_string()];
        assert!(path_in_scope("src/a.rs", &scope));
        assert!(path_in_scope("README.md", &scope));
        assert!(!path_in_scope("tests/a.rs", &scope));
        assert!(path_in_scope("anything", &["*".to_string()]));
    }
}
