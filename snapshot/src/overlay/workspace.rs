//! [`SnapshotStore::materialize_overlay`] and [`SnapshotStore::freeze_overlay`]: an episode's
//! workspace as an overlay over a sealed tree of the cache, and its freeze from the upper
//! layer alone (see `mod.rs`).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use loopgate_protocol::snapshot::{Manifest, ManifestEntry};
use loopgate_workspace_walk::chown_tree;

use crate::cache::{LowerLease, TreeUse, WarmReport, WorkspaceCache};
use crate::error::{Refusal, SnapshotError};
use crate::freeze::{hash_listed, normalize_mode, FreezeRules, WalkedFile};
use crate::materialize::{blocking_failed, io_error};
use crate::overlay::mount::{mount_overlay, unmount, OverlayLayers};
use crate::overlay::upper::{merge, scan_upper, UpperKind};
use crate::stat_cache::{FileStamp, StatCache};
use crate::store::{FreezeOutcome, SnapshotStore};
use crate::upload::outcome;

/// An episode's workspace, mounted: the merged tree at [`OverlayWorkspace::path`], its changes
/// in the upper layer. [`OverlayWorkspace::close`] unmounts it and removes the layers; dropping
/// it unmounts too. The lower tree goes back to the cache when the last overlay on it is gone.
#[derive(Debug)]
pub struct OverlayWorkspace {
    merged: PathBuf,
    layers: PathBuf,
    upper: PathBuf,
    /// Shared with the freeze's blocking walk, not copied for it.
    base: Arc<Manifest>,
    /// The base manifest's pages and groups: stored, since its head was just read (the
    /// collection deletes a head before the objects it names), so a freeze need not look
    /// them up again.
    base_objects: Vec<String>,
    lease: LowerLease,
    mounted: bool,
}

impl OverlayWorkspace {
    /// The merged tree: the workspace the episode works in.
    pub fn path(&self) -> &Path {
        &self.merged
    }

    /// The read-only lower tree (the base snapshot's files).
    pub fn lower(&self) -> &Path {
        self.lease.path()
    }

    /// The upper layer: what the episode changed.
    pub fn upper(&self) -> &Path {
        &self.upper
    }

    /// The base snapshot's manifest: what the lower tree holds.
    pub fn base(&self) -> &Manifest {
        &self.base
    }

    /// Unmount the overlay and remove its upper and work directories. Blocking work runs off
    /// the async threads.
    pub async fn close(mut self) -> Result<(), SnapshotError> {
        self.mounted = false;
        let (merged, layers) = (self.merged.clone(), self.layers.clone());
        tokio::task::spawn_blocking(move || {
            unmount(&merged).map_err(|e| io_error(&merged, e))?;
            fs::remove_dir_all(&layers).map_err(|e| io_error(&layers, e))
        })
        .await
        .map_err(|e| blocking_failed("unmount", e))?
    }
}

impl Drop for OverlayWorkspace {
    fn drop(&mut self) {
        if self.mounted {
            if let Err(err) = unmount(&self.merged) {
                tracing::warn!(path = %self.merged.display(), error = %err, "unmounting an episode overlay");
            }
            let _ = fs::remove_dir_all(&self.layers);
        }
    }
}

impl SnapshotStore {
    /// Mount snapshot `id` on `merged` (an existing empty directory) as an overlay: the lower
    /// layer is a sealed tree of `cache` holding exactly the snapshot (one already kept is
    /// shared; else the closest kept tree is brought to it, or it is written, every written
    /// file verified as in [`SnapshotStore::materialize_warm`]), the upper and work directories
    /// are made in `layers` (created; on `merged`'s side of the worker, never inside it).
    /// `owner`: the user the agent runs as, who gets the tree and the upper layer's root.
    pub async fn materialize_overlay(
        &self,
        id: &str,
        merged: &Path,
        layers: &Path,
        cache: &WorkspaceCache,
        owner: Option<(u32, u32)>,
    ) -> Result<(OverlayWorkspace, WarmReport), SnapshotError> {
        // Shared by the workspace (its base), the cache's record of the lower tree and the
        // cache's known manifests.
        let (manifest, pages, groups) = self.manifest_with_pages_via(id, Some(cache)).await?;
        let (lease, report) = match cache.lend_held(&manifest) {
            Some(lease) => {
                let report = WarmReport {
                    reused_tree: true,
                    files_kept: manifest.entries.len(),
                    ..WarmReport::default()
                };
                (lease, report)
            }
            None => self.lower_tree(&manifest, &pages, cache, owner).await?,
        };
        let layers_at = OverlayLayers {
            lower: lease.path().to_path_buf(),
            upper: layers.join("upper"),
            work: layers.join("work"),
        };
        let (target, at) = (merged.to_path_buf(), layers_at.clone());
        let root = layers.to_path_buf();
        tokio::task::spawn_blocking(move || {
            fs::create_dir_all(&root).map_err(|e| io_error(&root, e))?;
            for dir in [&at.upper, &at.work] {
                fs::create_dir(dir).map_err(|e| io_error(dir, e))?;
            }
            fs::set_permissions(&at.upper, fs::Permissions::from_mode(0o755))
                .map_err(|e| io_error(&at.upper, e))?;
            if let Some((uid, gid)) = owner {
                std::os::unix::fs::lchown(&at.upper, Some(uid), Some(gid))
                    .map_err(|e| io_error(&at.upper, e))?;
            }
            mount_overlay(&at, &target).map_err(|e| io_error(&target, e))
        })
        .await
        .map_err(|e| blocking_failed("mount", e))??;
        let workspace = OverlayWorkspace {
            merged: merged.to_path_buf(),
            layers: layers.to_path_buf(),
            upper: layers_at.upper,
            base: manifest,
            base_objects: pages.into_iter().chain(groups).collect(),
            lease,
            mounted: true,
        };
        Ok((workspace, report))
    }

    /// A new sealed tree in the cache holding `manifest`, lent out.
    async fn lower_tree(
        &self,
        manifest: &Arc<Manifest>,
        pages: &[String],
        cache: &WorkspaceCache,
        owner: Option<(u32, u32)>,
    ) -> Result<(LowerLease, WarmReport), SnapshotError> {
        let (slot, dir) = cache.new_tree_slot();
        let written = self
            .materialize_manifest_as(manifest, pages, &dir, cache, owner, TreeUse::SealedLower)
            .await;
        let tree = cache.take_checkout(&dir);
        let (report, tree) = match (written, tree) {
            (Ok(report), Some(tree)) => (report, tree),
            (written, _) => {
                let path = dir.clone();
                let _ = tokio::task::spawn_blocking(move || fs::remove_dir_all(path)).await;
                return Err(written.err().unwrap_or_else(|| SnapshotError::Store {
                    op: "lower tree",
                    reason: "the materialized tree was not recorded".into(),
                }));
            }
        };
        if let Some(owner) = owner {
            // Its directories too, so the agent may create files in them (in its upper layer).
            let path = dir.clone();
            tokio::task::spawn_blocking(move || chown_tree(&path, owner))
                .await
                .map_err(|e| blocking_failed("chown", e))?
                .map_err(|e| io_error(&dir, e))?;
        }
        Ok((cache.lend_new(slot, tree), report))
    }

    /// Freeze `workspace` from its upper layer alone: the base's entries it did not change,
    /// delete or hide, plus every file it holds (hashed). The snapshot is the one a full walk of
    /// the merged tree under `rules` would give. The changed files' blobs go into `cache` for
    /// the next materialize.
    pub async fn freeze_overlay(
        &self,
        workspace: &OverlayWorkspace,
        rules: &FreezeRules,
        cache: &WorkspaceCache,
    ) -> Result<FreezeOutcome, SnapshotError> {
        let (upper, merged, base, walk_rules) = (
            workspace.upper.clone(),
            workspace.merged.clone(),
            workspace.base.clone(),
            rules.clone(),
        );
        let OverlayFiles { kept, changed } =
            tokio::task::spawn_blocking(move || overlay_files(&upper, &merged, &base, &walk_rules))
                .await
                .map_err(|e| blocking_failed("walk", e))??;
        let base = &workspace.base;
        // The base's pages and groups are stored (its head was just read), and so is a changed
        // file holding what the base held at its path: neither is looked up.
        let mut known = StatCache::new();
        known.mark_all_present(workspace.base_objects.iter().map(String::as_str));
        known.mark_all_present(
            changed
                .iter()
                .filter(|f| {
                    base.get(&f.entry.path)
                        .is_some_and(|e| e.sha256 == f.entry.sha256)
                })
                .map(|f| f.entry.sha256.as_str()),
        );
        let uploaded = self.upload_blobs(&changed, &known).await?;
        let entries = kept
            .iter()
            .map(|&index| base.entries[index].clone())
            .chain(changed.iter().map(|f| f.entry.clone()))
            .collect();
        let manifest = Arc::new(Manifest::new(entries).map_err(SnapshotError::InvalidManifest)?);
        let written = self.write_manifest(&manifest, Some(&known)).await?;
        crate::manifests::hold_pages(cache, &manifest, &written);
        let files_hashed = changed.len();
        let keep = cache.clone();
        let _ = tokio::task::spawn_blocking(move || {
            for file in changed {
                keep.insert_blob(&file.entry.sha256, &file.source, file.entry.size);
            }
        })
        .await;
        Ok(outcome(manifest, written, &uploaded, files_hashed))
    }
}

/// What a freeze from the upper layer is made of: the base's entries still visible (indexes
/// into it, in path order) and the upper layer's files, hashed, in path order.
struct OverlayFiles {
    kept: Vec<usize>,
    changed: Vec<WalkedFile>,
}

/// The files of the merged tree (see [`SnapshotStore::freeze_overlay`]): the base's kept and the
/// upper layer's, hashed, within the rules' size caps. Blocking.
fn overlay_files(
    upper: &Path,
    merged: &Path,
    base: &Manifest,
    rules: &FreezeRules,
) -> Result<OverlayFiles, SnapshotError> {
    let items = scan_upper(upper, &rules.ignore)?;
    let plan = merge(base, &items, &rules.ignore)?;
    let root = fs::canonicalize(merged).map_err(|e| io_error(merged, e))?;
    let upper = fs::canonicalize(upper).map_err(|e| io_error(upper, e))?;
    let mut files = Vec::with_capacity(plan.files.len());
    for index in plan.files {
        let item = &items[index];
        let (source, metadata) = match item.kind {
            UpperKind::Symlink => resolve_symlink(&root, &item.rel)?,
            _ => {
                let path = upper.join(&item.rel);
                let metadata = fs::symlink_metadata(&path).map_err(|e| io_error(&path, e))?;
                (path, metadata)
            }
        };
        if metadata.len() > rules.max_file_bytes {
            return Err(SnapshotError::Refused {
                path: item.rel.clone(),
                reason: Refusal::FileTooLarge {
                    size: metadata.len(),
                    limit: rules.max_file_bytes,
                },
            });
        }
        use std::os::unix::fs::MetadataExt;
        files.push(WalkedFile {
            entry: ManifestEntry {
                path: item.rel.clone(),
                mode: normalize_mode(metadata.mode()),
                size: metadata.len(),
                sha256: String::new(),
            },
            source,
            stamp: FileStamp::of(&metadata),
            hashed: true,
            recorded_at_ns: 0,
        });
    }
    let changed = hash_listed(files, rules)?;
    let total = plan
        .kept
        .iter()
        .map(|&index| base.entries[index].size)
        .chain(changed.iter().map(|f| f.entry.size))
        .sum::<u64>();
    if total > rules.max_total_bytes {
        return Err(SnapshotError::TotalTooLarge {
            limit: rules.max_total_bytes,
        });
    }
    Ok(OverlayFiles {
        kept: plan.kept,
        changed,
    })
}

/// An upper-layer symlink stands for the merged tree's file it points to, if that is a regular
/// file inside the tree (as a walk of the merged tree would have it).
fn resolve_symlink(root: &Path, rel: &str) -> Result<(PathBuf, fs::Metadata), SnapshotError> {
    let link = root.join(rel);
    let refused = |reason| SnapshotError::Refused {
        path: rel.to_string(),
        reason,
    };
    let target = fs::read_link(&link)
        .map(|t| t.display().to_string())
        .unwrap_or_default();
    let resolved = match fs::canonicalize(&link) {
        Ok(resolved) => resolved,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(refused(Refusal::DanglingSymlink { target }))
        }
        Err(e) => return Err(io_error(&link, e)),
    };
    if !resolved.starts_with(root) {
        return Err(refused(Refusal::SymlinkOutside { target }));
    }
    let metadata = fs::metadata(&resolved).map_err(|e| io_error(&resolved, e))?;
    if metadata.is_dir() {
        return Err(refused(Refusal::SymlinkToDirectory));
    }
    if !metadata.is_file() {
        return Err(refused(Refusal::SpecialFile));
    }
    Ok((resolved, metadata))
}
