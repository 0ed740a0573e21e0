//! What a prompt shows of the candidate's files: excerpts of the changed (or named) text files
//! as they are in the materialized snapshot, read without following a link out of it and
//! bounded per file and in all; a binary file is named, not shown.

use std::path::{Component, Path};

use loopgate_protocol::snapshot::PathChange;
use tokio::io::AsyncReadExt;

use crate::prompt_text::MAX_PROMPT_PATHS;

/// Bytes of one changed file shown to the judge.
pub(crate) const MAX_FILE_EXCERPT_BYTES: usize = 4 * 1024;
/// Bytes of all changed files together shown to the judge.
pub(crate) const MAX_EXCERPTS_TOTAL_BYTES: usize = 12 * 1024;

/// What the judge sees of one changed file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FileView {
    /// UTF-8 text, cut to the excerpt limits when `truncated`.
    Text { text: String, truncated: bool },
    /// Not text (a NUL byte or invalid UTF-8): named, not shown.
    Binary,
    /// Not shown: the excerpt budget was spent, or it is not a readable regular file.
    NotShown,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileExcerpt {
    pub(crate) path: String,
    pub(crate) view: FileView,
}

/// The view of a file whose first `bytes` were read (up to `limit`); `full_len` is its size.
/// Text is cut back to a character boundary; a NUL byte or invalid UTF-8 before the cut is
/// binary.
fn file_view(bytes: &[u8], limit: usize, full_len: u64) -> FileView {
    let head = &bytes[..bytes.len().min(limit)];
    if head.contains(&0) {
        return FileView::Binary;
    }
    let text = match std::str::from_utf8(head) {
        Ok(text) => text,
        // Cut inside a multi-byte character at the end: keep what precedes it.
        Err(err) if err.error_len().is_none() => {
            std::str::from_utf8(&head[..err.valid_up_to()]).unwrap_or_default()
        }
        Err(_) => return FileView::Binary,
    };
    FileView::Text {
        text: text.to_string(),
        truncated: (text.len() as u64) < full_len,
    }
}

/// A path from a manifest that stays inside the workspace when joined to it.
fn is_plain_relative(path: &str) -> bool {
    let path = Path::new(path);
    !path.as_os_str().is_empty()
        && path
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// Excerpts of the added and modified files of `changes` (at most `MAX_PROMPT_PATHS`) as they
/// are in `workspace`: regular files only, never following a link out of it, each cut to
/// `MAX_FILE_EXCERPT_BYTES`, all together to `MAX_EXCERPTS_TOTAL_BYTES`.
pub(crate) async fn changed_file_excerpts(
    workspace: &Path,
    changes: &[PathChange],
) -> Vec<FileExcerpt> {
    let root = tokio::fs::canonicalize(workspace).await.ok();
    let mut left = MAX_EXCERPTS_TOTAL_BYTES;
    let mut excerpts = Vec::new();
    let paths = changes
        .iter()
        .filter(|c| !matches!(c, PathChange::Removed { .. }))
        .map(PathChange::path)
        .take(MAX_PROMPT_PATHS);
    for path in paths {
        let view = match (&root, left) {
            (Some(root), 1..) if is_plain_relative(path) => {
                read_excerpt(root, path, left.min(MAX_FILE_EXCERPT_BYTES)).await
            }
            _ => FileView::NotShown,
        };
        if let FileView::Text { text, .. } = &view {
            left = left.saturating_sub(text.len());
        }
        excerpts.push(FileExcerpt {
            path: path.to_string(),
            view,
        });
    }
    excerpts
}

/// The first `limit` bytes of `root/path` when it resolves to a regular file inside `root`.
async fn read_excerpt(root: &Path, path: &str, limit: usize) -> FileView {
    let Ok(real) = tokio::fs::canonicalize(root.join(path)).await else {
        return FileView::NotShown;
    };
    if !real.starts_with(root) {
        return FileView::NotShown;
    }
    let Ok(file) = tokio::fs::File::open(&real).await else {
        return FileView::NotShown;
    };
    let full_len = match file.metadata().await {
        Ok(meta) if meta.is_file() => meta.len(),
        _ => return FileView::NotShown,
    };
    let mut bytes = Vec::with_capacity(limit.min(MAX_FILE_EXCERPT_BYTES));
    let cap = u64::try_from(limit).unwrap_or(u64::MAX);
    match file.take(cap).read_to_end(&mut bytes).await {
        Ok(_) => file_view(&bytes, limit, full_len),
        Err(_) => FileView::NotShown,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn file_view_cases() {
        let cases: &[(&[u8], usize, u64, FileView)] = &[
            (
                b"print('hi')\n",
                100,
                12,
                FileView::Text {
                    text: "print('hi')\n".into(),
                    truncated: false,
                },
            ),
            (
                b"abcdef",
                3,
                6,
                FileView::Text {
                    text: "abc".into(),
                    truncated: true,
                },
            ),
            // "é" is two bytes; a cut between them keeps the text before it.
            (
                "aé".as_bytes(),
                2,
                3,
                FileView::Text {
                    text: "a".into(),
                    truncated: true,
                },
            ),
            (b"\x7fELF\0\x01", 100, 6, FileView::Binary),
            (b"\xff\xfe\xfdabc", 100, 6, FileView::Binary),
            (
                b"",
                100,
                0,
                FileView::Text {
                    text: String::new(),
                    truncated: false,
                },
            ),
        ];
        for (bytes, limit, len, want) in cases {
            assert_eq!(&file_view(bytes, *limit, *len), want, "{bytes:?}");
        }
    }

    #[test]
    fn only_plain_relative_paths_are_read() {
        for (path, ok) in [
            ("hello.py", true),
            ("src/./main.rs", true),
            ("../etc/passwd", false),
            ("/etc/passwd", false),
            ("a/../../b", false),
            ("", false),
        ] {
            assert_eq!(is_plain_relative(path), ok, "{path}");
        }
    }

    #[tokio::test]
    async fn excerpts_skip_binary_links_out_and_stop_at_the_budget() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(ws.join("a.txt"), "x".repeat(MAX_FILE_EXCERPT_BYTES + 10)).unwrap();
        std::fs::write(ws.join("bin"), b"\0\x01\x02").unwrap();
        std::fs::write(dir.path().join("secret"), "outside").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), ws.join("link")).unwrap();
        for name in ["b.txt", "c.txt", "d.txt"] {
            std::fs::write(ws.join(name), "y".repeat(MAX_FILE_EXCERPT_BYTES)).unwrap();
        }
        let added = |p: &str| PathChange::Added { path: p.into() };
        let changes = vec![
            added("a.txt"),
            added("bin"),
            added("link"),
            PathChange::Removed {
                path: "gone.txt".into(),
            },
            added("b.txt"),
            added("c.txt"),
            added("d.txt"),
            added("../secret"),
        ];
        let excerpts = changed_file_excerpts(&ws, &changes).await;
        let views: Vec<(&str, &FileView)> = excerpts
            .iter()
            .map(|e| (e.path.as_str(), &e.view))
            .collect();
        assert_eq!(views.len(), 7, "{views:?}");
        assert!(matches!(
            views[0],
            ("a.txt", FileView::Text { truncated: true, text }) if text.len() == MAX_FILE_EXCERPT_BYTES
        ));
        assert_eq!(views[1], ("bin", &FileView::Binary));
        assert_eq!(views[2], ("link", &FileView::NotShown));
        assert!(matches!(
            views[3],
            (
                "b.txt",
                FileView::Text {
                    truncated: false,
                    ..
                }
            )
        ));
        assert!(matches!(
            views[4],
            (
                "c.txt",
                FileView::Text {
                    truncated: false,
                    ..
                }
            )
        ));
        assert_eq!(views[5], ("d.txt", &FileView::NotShown), "budget spent");
        assert_eq!(views[6], ("../secret", &FileView::NotShown));
        let shown: usize = excerpts
            .iter()
            .map(|e| match &e.view {
                FileView::Text { text, .. } => text.len(),
                _ => 0,
            })
            .sum();
        assert!(shown <= MAX_EXCERPTS_TOTAL_BYTES);
    }
}
