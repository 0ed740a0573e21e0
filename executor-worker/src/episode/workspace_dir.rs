//! The episode's directory: a fresh one under the work dir, the base snapshot materialized into
//! it, and the workspace frozen into the candidate snapshot at the end. Store trouble that may
//! pass becomes `EpisodeEnd::Retry` (JetStream redelivers), anything else a failed round.

use std::path::Path;

use loopgate_protocol::snapshot::{diff_manifests, Manifest, SnapshotId};
use loopgate_protocol::usage::Usage;
use loopgate_protocol::wire::ExecRequest;
use loopgate_snapshot::{FreezeRules, OverlayWorkspace, WorkspaceCache};

use crate::episode::env::{EpisodeEnd, EpisodeEnv};

/// `<run>-r<round>-a<attempt>-`: the episode directory's prefix (a random suffix follows).
pub(crate) fn episode_dir_prefix(req: &ExecRequest, attempt: u64) -> String {
    let run: String = req
        .run_id
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{run}-r{}-a{attempt}-", req.round)
}

/// A fresh directory for the episode under the work dir (removed when dropped).
pub(crate) fn episode_dir(
    req: &ExecRequest,
    attempt: u64,
    env: &EpisodeEnv,
) -> Result<tempfile::TempDir, EpisodeEnd> {
    tempfile::Builder::new()
        .prefix(&episode_dir_prefix(req, attempt))
        .tempdir_in(&env.work_dir)
        .map_err(|err| EpisodeEnd::Retry {
            reason: format!(
                "creating an episode dir under {}: {err}",
                env.work_dir.display()
            ),
        })
}

pub(crate) fn remove_episode_dir(dir: tempfile::TempDir) {
    if let Err(err) = dir.close() {
        tracing::warn!(error = %err, "removing the episode dir failed");
    }
}

/// The base snapshot in the episode dir: its manifest, and the overlay the dir is when
/// episodes run on overlays (`EpisodeEnv::overlays`).
#[derive(Debug)]
pub(crate) struct Materialized {
    pub(crate) base: Manifest,
    overlay: Option<OverlayWorkspace>,
}

/// The base snapshot, materialized into `dir`: mounted as an overlay over the cache's tree of
/// it when episodes run on overlays, else copied (warm through the cache when there is one).
pub(crate) async fn materialize_base(
    env: &EpisodeEnv,
    req: &ExecRequest,
    dir: &Path,
) -> Result<Materialized, EpisodeEnd> {
    let owner = env.agent.sandbox.owner();
    let materialized = match (&env.workspaces, env.overlays) {
        (Some(cache), true) => {
            let layers = layers_dir(env)?;
            env.store
                .materialize_overlay(&req.base_snapshot, dir, &layers, cache, owner)
                .await
                .map(|(overlay, report)| {
                    tracing::debug!(?report, "base mounted as an overlay");
                    Materialized {
                        base: overlay.base().clone(),
                        overlay: Some(overlay),
                    }
                })
        }
        // Materialized for the agent's user: the sandbox's chown before each command then
        // changes no ctime, and the freeze reads only what the episode changed.
        (Some(cache), false) => env
            .store
            .materialize_warm_as(&req.base_snapshot, dir, cache, owner)
            .await
            .map(|(manifest, report)| {
                tracing::debug!(?report, "base materialized warm");
                Materialized {
                    base: manifest,
                    overlay: None,
                }
            }),
        (None, _) => env
            .store
            .materialize(&req.base_snapshot, dir)
            .await
            .map(|base| Materialized {
                base,
                overlay: None,
            }),
    };
    match materialized {
        Ok(materialized) => Ok(materialized),
        Err(err) if err.is_retryable() => Err(EpisodeEnd::Retry {
            reason: format!("materializing base snapshot: {err}"),
        }),
        Err(err) => Err(EpisodeEnd::failed(
            format!("base snapshot {}: {err}", req.base_snapshot),
            Usage::default(),
        )),
    }
}

/// A fresh directory under the work dir (hidden from the agent like the rest of it) for an
/// overlay's upper and work directories; the overlay removes it when closed.
fn layers_dir(env: &EpisodeEnv) -> Result<std::path::PathBuf, EpisodeEnd> {
    tempfile::Builder::new()
        .prefix(".layers-")
        .tempdir_in(&env.work_dir)
        .map(tempfile::TempDir::keep)
        .map_err(|err| EpisodeEnd::Retry {
            reason: format!(
                "creating an overlay's layers under {}: {err}",
                env.work_dir.display()
            ),
        })
}

/// Freezes `dir` (from its upper layer alone when it is an overlay, which is then unmounted);
/// the candidate and how many paths differ from the base.
pub(crate) async fn freeze_dir(
    env: &EpisodeEnv,
    dir: &Path,
    materialized: Materialized,
    usage: Usage,
    ignore: &[String],
) -> Result<(SnapshotId, u32), EpisodeEnd> {
    let rules = FreezeRules::with_ignores(ignore);
    let Materialized { base, overlay } = materialized;
    let frozen = match (&env.workspaces, &overlay) {
        (Some(cache), Some(overlay)) => env.store.freeze_overlay(overlay, &rules, cache).await,
        (Some(cache), None) => env.store.freeze_warm(dir, &rules, cache).await,
        (None, _) => env.store.freeze(dir, &rules).await,
    };
    match overlay {
        Some(overlay) => {
            if let Err(err) = overlay.close().await {
                tracing::warn!(error = %err, "closing the episode's overlay");
            }
        }
        None => {
            if let (Ok(_), Some(cache)) = (&frozen, &env.workspaces) {
                keep_tree(cache, dir).await;
            }
        }
    }
    match frozen {
        Ok(frozen) => {
            let files_changed = diff_manifests(&base, &frozen.manifest).len();
            tracing::info!(
                candidate = %frozen.id,
                files = frozen.files,
                files_changed,
                files_hashed = frozen.files_hashed,
                bytes_uploaded = frozen.bytes_uploaded,
                "workspace frozen"
            );
            loopgate_telemetry::metrics::Metrics::new()
                .snapshot_uploaded_bytes
                .add(frozen.bytes_uploaded + frozen.manifest_bytes_uploaded, &[]);
            Ok((frozen.id, u32::try_from(files_changed).unwrap_or(u32::MAX)))
        }
        Err(err) if err.is_retryable() => Err(EpisodeEnd::Retry {
            reason: format!("freezing the workspace: {err}"),
        }),
        Err(err) => Err(EpisodeEnd::failed(
            format!("cannot freeze the workspace: {err}"),
            usage,
        )),
    }
}

/// After the freeze nothing touches the episode dir again: its tree goes back to the warm
/// cache (the next materialize vouches for every file by stat or re-hashes it) and an empty
/// directory is left for the episode's cleanup.
async fn keep_tree(cache: &WorkspaceCache, dir: &Path) {
    match cache.check_in(dir).await {
        Ok(true) => {
            if let Err(err) = tokio::fs::create_dir(dir).await {
                tracing::warn!(error = %err, "re-creating the episode dir after check-in");
            }
        }
        Ok(false) => {}
        Err(err) => tracing::warn!(error = %err, "keeping the workspace tree failed"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn dir_prefix_is_filename_safe() {
        let req: ExecRequest = serde_json::from_value(serde_json::json!({
            "run_id": "run/../x y", "generation": 1, "round": 4, "capability": "cli",
            "contract": {"goal": "g", "criteria": [], "protected_paths": [], "spec_hash": "h"},
            "increment": {"objective": "o"}, "base_snapshot": "b", "executor_profile": "p",
            "episode_secs": 5, "max_steps": 3
        }))
        .unwrap();
        assert_eq!(episode_dir_prefix(&req, 2), "run____x_y-r4-a2-");
    }
}
