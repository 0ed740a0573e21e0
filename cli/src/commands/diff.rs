//! `loopgate diff RUN [--round N]`: what one round changed, as a `git diff`-style unified diff
//! from the round's base snapshot to its candidate. Manifests are checked against their ids
//! and every blob against its sha256 before anything is shown.

use std::fmt::Write as _;

use futures::StreamExt;
use loopgate_common::snapshot::{diff_manifests, Manifest, ManifestEntry, PathChange};
use loopgate_common::unified_diff::{is_binary, unified_hunks, CONTEXT_LINES};

use crate::api_client::ApiClient;
use crate::cli_args::DiffArgs;
use crate::commands::checkout::{fetch_content, fetch_manifest, pick_round, run_rounds};
use crate::errors::CliError;
use crate::exit_status::ExitStatus;
use crate::output;

/// Files fetched at once.
const PARALLEL_FILES: usize = 8;

/// One side of a changed file: its mode and content.
pub struct Side<'a> {
    pub mode: u32,
    pub content: &'a [u8],
}

fn git_mode(mode: u32) -> String {
    format!("100{:03o}", mode & 0o777)
}

/// The `git diff` text of one file; `old`/`new` are None when it was added/removed.
pub fn file_diff(path: &str, old: Option<Side<'_>>, new: Option<Side<'_>>) -> String {
    let mut out = format!("diff --git a/{path} b/{path}\n");
    let (from, to) = match (&old, &new) {
        (None, Some(n)) => {
            let _ = writeln!(out, "new file mode {}", git_mode(n.mode));
            ("/dev/null".to_string(), format!("b/{path}"))
        }
        (Some(o), None) => {
            let _ = writeln!(out, "deleted file mode {}", git_mode(o.mode));
            (format!("a/{path}"), "/dev/null".to_string())
        }
        (Some(o), Some(n)) => {
            if o.mode != n.mode {
                let _ = writeln!(
                    out,
                    "old mode {}\nnew mode {}",
                    git_mode(o.mode),
                    git_mode(n.mode)
                );
            }
            (format!("a/{path}"), format!("b/{path}"))
        }
        (None, None) => return out,
    };
    let old_bytes = old.as_ref().map(|s| s.content).unwrap_or_default();
    let new_bytes = new.as_ref().map(|s| s.content).unwrap_or_default();
    if old_bytes == new_bytes {
        return out;
    }
    if is_binary(old_bytes) || is_binary(new_bytes) {
        let _ = writeln!(out, "Binary files {from} and {to} differ");
        return out;
    }
    let hunks = unified_hunks(
        &String::from_utf8_lossy(old_bytes),
        &String::from_utf8_lossy(new_bytes),
        CONTEXT_LINES,
    );
    let _ = write!(out, "--- {from}\n+++ {to}\n{hunks}");
    out
}

/// `A path` / `M path` / `D path` lines.
pub fn name_status(changes: &[PathChange]) -> Vec<String> {
    changes
        .iter()
        .map(|change| {
            let letter = match change {
                PathChange::Added { .. } => 'A',
                PathChange::Modified { .. } => 'M',
                PathChange::Removed { .. } => 'D',
            };
            format!("{letter}\t{}", change.path())
        })
        .collect()
}

fn as_side(fetched: &Option<(u32, Vec<u8>)>) -> Option<Side<'_>> {
    fetched.as_ref().map(|(mode, content)| Side {
        mode: *mode,
        content,
    })
}

async fn side(
    client: &ApiClient,
    entry: Option<&ManifestEntry>,
) -> Result<Option<(u32, Vec<u8>)>, CliError> {
    match entry {
        Some(entry) => Ok(Some((entry.mode, fetch_content(client, entry).await?))),
        None => Ok(None),
    }
}

/// The whole diff text between two verified manifests, files in path order.
async fn render(
    client: &ApiClient,
    base: &Manifest,
    candidate: &Manifest,
) -> Result<String, CliError> {
    let changes = diff_manifests(base, candidate);
    let texts: Vec<Result<String, CliError>> =
        futures::stream::iter(changes.iter().map(|change| async move {
            let path = change.path();
            let old = side(client, base.get(path)).await?;
            let new = side(client, candidate.get(path)).await?;
            Ok(file_diff(path, as_side(&old), as_side(&new)))
        }))
        .buffered(PARALLEL_FILES)
        .collect()
        .await;
    texts
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map(|t| t.concat())
}

pub async fn diff(client: &ApiClient, args: &DiffArgs) -> Result<ExitStatus, CliError> {
    let rounds = run_rounds(client, &args.run).await?;
    let round = pick_round(&args.run, &rounds, args.round, true)?;
    let candidate_id = round.candidate.clone().unwrap_or_default();
    let base = fetch_manifest(client, &round.base_snapshot).await?;
    let candidate = fetch_manifest(client, &candidate_id).await?;
    if args.name_status {
        output::block(&name_status(&diff_manifests(&base, &candidate)))?;
        return Ok(ExitStatus::Ok);
    }
    let text = render(client, &base, &candidate).await?;
    output::note(format!(
        "round {}: {} -> {}",
        round.round,
        &round.base_snapshot[..12.min(round.base_snapshot.len())],
        &candidate_id[..12.min(candidate_id.len())]
    ));
    if !text.is_empty() {
        output::block(&text.lines().map(str::to_string).collect::<Vec<_>>())?;
    }
    Ok(ExitStatus::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(mode: u32, content: &[u8]) -> Option<Side<'_>> {
        Some(Side { mode, content })
    }

    #[test]
    fn file_diffs_look_like_git() {
        let cases: &[(Option<Side>, Option<Side>, &str)] = &[
            (
                None,
                side(0o644, b"print('hi')\n"),
                "diff --git a/f b/f\nnew file mode 100644\n--- /dev/null\n+++ b/f\n@@ -0,0 +1 @@\n+print('hi')\n",
            ),
            (
                side(0o755, b"x\n"),
                None,
                "diff --git a/f b/f\ndeleted file mode 100755\n--- a/f\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n",
            ),
            (
                side(0o644, b"a\nb\n"),
                side(0o644, b"a\nc\n"),
                "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n",
            ),
            (
                side(0o644, b"same\n"),
                side(0o755, b"same\n"),
                "diff --git a/f b/f\nold mode 100644\nnew mode 100755\n",
            ),
            (
                side(0o644, b"\0\x01"),
                side(0o644, b"\0\x02"),
                "diff --git a/f b/f\nBinary files a/f and b/f differ\n",
            ),
        ];
        for (old, new, want) in cases {
            let old = old.as_ref().map(|s| Side {
                mode: s.mode,
                content: s.content,
            });
            let new = new.as_ref().map(|s| Side {
                mode: s.mode,
                content: s.content,
            });
            assert_eq!(file_diff("f", old, new), *want);
        }
    }

    #[test]
    fn name_status_letters() {
        let changes = vec![
            PathChange::Added { path: "a".into() },
            PathChange::Modified { path: "m".into() },
            PathChange::Removed { path: "d".into() },
        ];
        assert_eq!(name_status(&changes), vec!["A\ta", "M\tm", "D\td"]);
    }
}
