//! `[snapshot]` in every daemon's config file (manager, executor, auditor): how large a stored
//! snapshot a reader accepts. The snapshot bucket is written by executors, so its objects and
//! manifests are untrusted input: a manifest with more entries, or files adding up to more
//! bytes, than these caps is refused with an error naming the cap, before it is reassembled
//! in full or written to disk.

use serde::{Deserialize, Serialize};

use crate::config::error::ConfigError;

/// `[snapshot] max_manifest_entries` when unset: about 70 times the largest tree measured
/// (the cargo registry sources, 14,412 files, docs/benchmarks.md); such a manifest takes about
/// 200 MB in memory.
pub const DEFAULT_MAX_MANIFEST_ENTRIES: u64 = 1_000_000;
/// `[snapshot] max_tree_bytes` when unset: 8 GiB, four times the 2 GiB a freeze ever stores
/// (`loopgate_snapshot::DEFAULT_MAX_TOTAL_BYTES`), so every snapshot a loopgate freeze makes is
/// read, and about 34 times the cargo registry sources (244 MB).
pub const DEFAULT_MAX_TREE_BYTES: u64 = 8 << 30;

/// `[snapshot]` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotSection {
    /// Most entries (files) a snapshot's manifest may list (default 1,000,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_manifest_entries: Option<u64>,
    /// Most bytes a snapshot's files may add up to (default 8 GiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tree_bytes: Option<u64>,
}

/// The resolved `[snapshot]` caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotLimits {
    pub max_manifest_entries: u64,
    pub max_tree_bytes: u64,
}

impl Default for SnapshotLimits {
    fn default() -> Self {
        SnapshotLimits {
            max_manifest_entries: DEFAULT_MAX_MANIFEST_ENTRIES,
            max_tree_bytes: DEFAULT_MAX_TREE_BYTES,
        }
    }
}

impl SnapshotSection {
    /// The caps, defaults for what is unset; zero is refused (it would refuse every snapshot).
    pub fn resolve(&self) -> Result<SnapshotLimits, ConfigError> {
        let defaults = SnapshotLimits::default();
        let max_manifest_entries = self
            .max_manifest_entries
            .unwrap_or(defaults.max_manifest_entries);
        if max_manifest_entries == 0 {
            return Err(ConfigError::invalid(
                "snapshot.max_manifest_entries",
                "must be positive",
            ));
        }
        let max_tree_bytes = self.max_tree_bytes.unwrap_or(defaults.max_tree_bytes);
        if max_tree_bytes == 0 {
            return Err(ConfigError::invalid(
                "snapshot.max_tree_bytes",
                "must be positive",
            ));
        }
        Ok(SnapshotLimits {
            max_manifest_entries,
            max_tree_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_keys_take_the_defaults_and_zero_is_refused() {
        assert_eq!(
            SnapshotSection::default().resolve(),
            Ok(SnapshotLimits::default())
        );
        let set = SnapshotSection {
            max_manifest_entries: Some(10),
            max_tree_bytes: Some(1 << 20),
        };
        assert_eq!(
            set.resolve(),
            Ok(SnapshotLimits {
                max_manifest_entries: 10,
                max_tree_bytes: 1 << 20
            })
        );
        for bad in [
            SnapshotSection {
                max_manifest_entries: Some(0),
                ..SnapshotSection::default()
            },
            SnapshotSection {
                max_tree_bytes: Some(0),
                ..SnapshotSection::default()
            },
        ] {
            assert!(bad.resolve().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn unknown_keys_are_refused() {
        let parsed: Result<SnapshotSection, _> = toml::from_str("max_entries = 3\n");
        assert!(parsed.is_err());
        let parsed: SnapshotSection =
            toml::from_str("max_manifest_entries = 3\nmax_tree_bytes = 4\n").unwrap_or_default();
        assert_eq!(parsed.max_manifest_entries, Some(3));
        assert_eq!(parsed.max_tree_bytes, Some(4));
    }
}
