//! One file's change as `git diff` text (header, mode lines, hunks or "Binary files ...
//! differ"), for `loopgate diff` and the console's snapshot diff. Pure.

use std::fmt::Write as _;

use crate::unified_diff::{is_binary, unified_hunks, CONTEXT_LINES};

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
}
