//! Hints for a failing check that names a file the workspace does not have where the
//! check looks for it. Checks run from the workspace root, so `python3 hello.py` needs
//! `hello.py` at the root; small models write `src/hello.py` and then read `can't open file
//! 'hello.py'` without seeing why. The executor's `finish refused:` text and the evidence in its
//! next prompt both carry these hints. Pure: it reads the check's command, its output and the
//! workspace's file list.
//!
//! A hint is given only for a path that the check's output names too (`can't open file
//! 'hello.py'`, `cat: x.txt: No such file or directory`): a check that failed on an assertion
//! needed nothing it could not find. Without that rule `csv-to-json`'s check (`python3
//! to_json.py && python3 -c "import json; d = json.load(open('people.json')) ..."`) was answered,
//! on every refusal and in every round's evidence, with "the check names `json.load`, which does
//! not exist" and the same for `people.json`, which the check's own first command writes: two
//! false leads beside the real failure, an `AssertionError` showing the wrong data.

use std::collections::BTreeSet;

/// Hints for one failing check, at most this many.
const MAX_HINTS: usize = 3;

/// One line per path that the check's command names, its `output` names too, and `files`
/// (workspace-relative paths) lacks: where a file of that name is instead, or that it does not
/// exist.
pub(crate) fn missing_path_hints(command: &str, output: &str, files: &[String]) -> Vec<String> {
    let present: BTreeSet<&str> = files.iter().map(String::as_str).collect();
    let mut hints = Vec::new();
    let mut seen = BTreeSet::new();
    for token in path_tokens(command) {
        if hints.len() >= MAX_HINTS || !seen.insert(token) {
            continue;
        }
        if present.contains(token) || is_directory_of(token, files) || !output.contains(token) {
            continue;
        }
        let elsewhere: Vec<&str> = files
            .iter()
            .map(String::as_str)
            .filter(|file| file.rsplit('/').next() == token.rsplit('/').next())
            .take(3)
            .collect();
        hints.push(if elsewhere.is_empty() {
            format!(
                "hint: the check names `{token}`, which does not exist in the workspace (checks \
                 run from the workspace root)."
            )
        } else {
            format!(
                "hint: the check runs from the workspace root and needs `{token}` there, but the \
                 workspace has `{}` instead. Write the file at the path `{token}`.",
                elsewhere.join("`, `")
            )
        });
    }
    hints
}

/// Words of a shell command that look like relative file paths with an extension
/// (`hello.py`, `tests/test_app.py`): no options, variables, URLs or absolute paths.
fn path_tokens(command: &str) -> impl Iterator<Item = &str> {
    command
        .split(|c: char| c.is_whitespace() || "\"'`;|&<>()=,".contains(c))
        .map(|word| word.trim_start_matches("./"))
        .filter(|word| looks_like_file(word))
}

fn looks_like_file(word: &str) -> bool {
    if word.is_empty()
        || word.starts_with(['-', '/', '$', '.'])
        || word.contains("..")
        || word.contains("://")
        || !word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c))
    {
        return false;
    }
    let name = word.rsplit('/').next().unwrap_or(word);
    match name.rsplit_once('.') {
        Some((stem, ext)) => {
            !stem.is_empty()
                && (1..=5).contains(&ext.len())
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
                && ext.chars().any(|c| c.is_ascii_alphabetic())
        }
        None => false,
    }
}

fn is_directory_of(token: &str, files: &[String]) -> bool {
    let prefix = format!("{}/", token.trim_end_matches('/'));
    files.iter().any(|file| file.starts_with(&prefix))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]
    use super::*;

    fn files(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn hints_table() {
        let check = "test \"$(python3 hello.py)\" = 'hello, loopgate'";
        let cant_open =
            "python3: can't open file '/w/hello.py': [Errno 2] No such file or directory";
        let to_json = "python3 to_json.py && python3 -c \"import json; \
                       d = json.load(open('people.json')); assert d == [], d\"";
        let assertion = "Traceback (most recent call last):\n  File \"<string>\", line 1, in \
                         <module>\nAssertionError: [['name', 'age']]";
        // (command, its output, workspace files, expected hint fragments; empty = no hint)
        let cases: Vec<(&str, &str, Vec<String>, Vec<&str>)> = vec![
            (check, "", files(&["hello.py"]), vec![]),
            (
                check,
                cant_open,
                files(&["src/hello.py"]),
                vec!["needs `hello.py`", "has `src/hello.py`"],
            ),
            (
                check,
                cant_open,
                files(&[]),
                vec!["`hello.py`, which does not exist"],
            ),
            // The output does not name the path: the check failed on something else.
            (check, "hello, world", files(&[]), vec![]),
            (
                "python3 ./hello.py",
                cant_open,
                files(&["hello.py"]),
                vec![],
            ),
            (
                "pytest -q tests/test_app.py",
                "ERROR: file or directory not found: tests/test_app.py",
                files(&["tests/test_app.py"]),
                vec![],
            ),
            (
                "pytest -q tests",
                "no tests ran",
                files(&["tests/test_app.py"]),
                vec![],
            ),
            (
                "cat /etc/passwd.txt $HOME/a.py https://x.io/a.py ../b.py",
                "cat: /etc/passwd.txt: No such file or directory",
                files(&[]),
                vec![],
            ),
            (
                "python3 -c 'import sys; print(3.11)'",
                "3.11",
                files(&[]),
                vec![],
            ),
            (
                "sh check.sh && sh check.sh",
                "sh: 0: cannot open check.sh: No such file",
                files(&[]),
                vec!["`check.sh`"],
            ),
            // A module attribute (`json.load`) and a file the check's own command writes
            // (`people.json`) are not named by an assertion's output.
            (to_json, assertion, files(&["to_json.py"]), vec![]),
        ];
        for (command, output, ws, want) in cases {
            let hints = missing_path_hints(command, output, &ws);
            if want.is_empty() {
                assert!(hints.is_empty(), "{command} {ws:?}: {hints:?}");
                continue;
            }
            assert_eq!(hints.len(), 1, "{command} {ws:?}: {hints:?}");
            for fragment in want {
                assert!(
                    hints[0].contains(fragment),
                    "{command}: {fragment} in {hints:?}"
                );
            }
        }
    }
}
