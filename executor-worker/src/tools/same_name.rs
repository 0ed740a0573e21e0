//! Files elsewhere in the workspace with the name a tool call used. Small models invent a
//! directory (`src/wordcount.py` for the workspace's `wordcount.py`) and then edit a file the
//! checks never import; a tool result that names the file that does exist turns that turn
//! around. The walk is bounded (entries and results) and skips hidden and build directories,
//! so a big workspace costs a tool call no more than a small one.

use std::path::Path;

use loopgate_workspace_walk::RootDir;

/// Directory entries looked at, at most.
const MAX_ENTRIES: usize = 5_000;
/// Paths returned, at most.
const MAX_FOUND: usize = 3;
/// Directories never entered.
const SKIPPED_DIRS: [&str; 4] = ["node_modules", "target", "__pycache__", "venv"];

/// Workspace-relative paths (`/`-separated, sorted) of the files other than `rel` whose file
/// name is `rel`'s; empty when `rel` has no file name. Directories are listed beneath `root`
/// without following a symlink.
pub(crate) fn files_named_like(root: &RootDir, rel: &str) -> Vec<String> {
    let rel = rel.trim().trim_start_matches("./");
    let Some(name) = Path::new(rel).file_name().and_then(|n| n.to_str()) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut seen = 0usize;
    let mut stack = vec![String::new()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = root.read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_ENTRIES {
                found.sort();
                found.truncate(MAX_FOUND);
                return found;
            }
            let Ok(entry_name) = entry.file_name().into_string() else {
                continue;
            };
            let path = if dir.is_empty() {
                entry_name.clone()
            } else {
                format!("{dir}/{entry_name}")
            };
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if !entry_name.starts_with('.') && !SKIPPED_DIRS.contains(&entry_name.as_str()) {
                    stack.push(path);
                }
            } else if kind.is_file() && entry_name == name && path != rel {
                found.push(path);
            }
        }
    }
    found.sort();
    found.truncate(MAX_FOUND);
    found
}

/// `a.py`, `` `a.py` and `b/a.py` `` as a tool result lists them.
pub(crate) fn listed(paths: &[String]) -> String {
    let quoted: Vec<String> = paths.iter().map(|p| format!("`{p}`")).collect();
    match quoted.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::fs;

    #[test]
    fn finds_the_same_name_elsewhere_and_skips_hidden_and_build_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for path in [
            "wordcount.py",
            "lib/wordcount.py",
            ".git/wordcount.py",
            "node_modules/x/wordcount.py",
            "other.py",
        ] {
            let file = root.join(path);
            fs::create_dir_all(file.parent().unwrap()).unwrap();
            fs::write(file, "x").unwrap();
        }
        // (the path the model used, what the result names)
        let cases: [(&str, &[&str]); 5] = [
            ("src/wordcount.py", &["lib/wordcount.py", "wordcount.py"]),
            ("./src/wordcount.py", &["lib/wordcount.py", "wordcount.py"]),
            ("wordcount.py", &["lib/wordcount.py"]),
            ("missing.py", &[]),
            ("", &[]),
        ];
        for (rel, want) in cases {
            let beneath = RootDir::open(root).unwrap();
            assert_eq!(files_named_like(&beneath, rel), want, "{rel}");
        }
    }

    #[test]
    fn listed_table() {
        let cases: [(&[&str], &str); 4] = [
            (&[], ""),
            (&["a.py"], "`a.py`"),
            (&["a.py", "b/a.py"], "`a.py` and `b/a.py`"),
            (&["a", "b", "c"], "`a`, `b` and `c`"),
        ];
        for (paths, want) in cases {
            let paths: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
            assert_eq!(listed(&paths), want);
        }
    }
}
