//! Ignore patterns of a freeze (a gitignore-like subset): glob matching without allocation,
//! since it runs for every pattern on every entry a freeze walks, and the default set.
//!
//! A trailing `/` matches directories only; a pattern without `/` (other than a trailing one)
//! matches the entry's name at any depth; a pattern with an inner or leading `/` matches the
//! whole relative path from the workspace root. `*` matches any run of characters except `/`,
//! `?` one character.

/// Ignored unless a task says otherwise: build outputs and caches (`target/`, `node_modules/`,
/// `__pycache__/`, `.venv/`), loopgate's own state (`.loopgate/`) and `.git/`. `.git/` is
/// excluded on purpose: its object store is large and churns (a `git gc` rewrites packs), its
/// hooks are executable code that would ride into the auditor's sandbox, and history is not
/// evidence: the snapshot is the artifact, and what changed is the manifest diff between base
/// and candidate. A task that needs a repository inside its workspace can re-create it in a
/// check (`git init`).
pub const DEFAULT_IGNORES: &[&str] = &[
    ".git/",
    "target/",
    "node_modules/",
    "__pycache__/",
    ".loopgate/",
    ".venv/",
];

/// Does the glob `pattern` match all of `text`? `*` never crosses `/`.
///
/// Neither `*` nor `?` matches `/`, so a match is a segment-by-segment match: the same number
/// of `/`-separated segments, each matched on its own. No allocation: this runs for every
/// pattern on every entry a freeze walks.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let (mut patterns, mut texts) = (pattern.split('/'), text.split('/'));
    loop {
        match (patterns.next(), texts.next()) {
            (Some(p), Some(t)) if segment_match(p, t) => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

/// The char at byte `at` of `s` (always a char boundary here).
fn char_at(s: &str, at: usize) -> char {
    s[at..].chars().next().unwrap_or('\0')
}

/// Glob match of one segment (no `/` in either): greedy, backtracking to the last `*` only,
/// which is exact for `*` and `?`.
fn segment_match(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    // (pattern index after the last `*`, text index where that `*`'s match ends)
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'*' {
            pi += 1;
            star = Some((pi, ti));
            continue;
        }
        if pi < p.len() {
            let (pc, tc) = (char_at(pattern, pi), char_at(text, ti));
            if pc == '?' || pc == tc {
                pi += pc.len_utf8();
                ti += tc.len_utf8();
                continue;
            }
        }
        let Some((after_star, matched_to)) = star else {
            return false;
        };
        let next = matched_to + char_at(text, matched_to).len_utf8();
        star = Some((after_star, next));
        (pi, ti) = (after_star, next);
    }
    p[pi..].iter().all(|b| *b == b'*')
}

/// Is the entry at `rel_path` (relative, `/`-separated) ignored by any of `patterns`?
pub fn is_ignored(rel_path: &str, is_dir: bool, patterns: &[String]) -> bool {
    let name = rel_path.rsplit('/').next().unwrap_or(rel_path);
    patterns.iter().any(|raw| {
        let raw = raw.trim();
        let dir_only = raw.ends_with('/');
        let pattern = raw.trim_end_matches('/');
        if pattern.is_empty() || (dir_only && !is_dir) {
            return false;
        }
        if pattern.contains('/') {
            glob_match(pattern.trim_start_matches('/'), rel_path)
        } else {
            glob_match(pattern, name)
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn glob_table() {
        let cases: &[(&str, &str, bool)] = &[
            ("target", "target", true),
            ("target", "targets", false),
            ("*.pyc", "a.pyc", true),
            ("*.pyc", "dir/a.pyc", false),
            ("a?c", "abc", true),
            ("a?c", "a/c", false),
            ("*", "", true),
            ("build/*.o", "build/x.o", true),
            ("build/*.o", "build/sub/x.o", false),
            ("**", "a/b", false),
            ("*", "a/b", false),
            ("*/*", "a/b", true),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
            ("*a", "banana", true),
            ("*an*", "banana", true),
            ("?", "é", true),
            ("é?", "éa", true),
            ("??", "é", false),
            ("*.rs", "é.rs", true),
            ("", "", true),
            ("", "a", false),
            ("a", "", false),
            ("a/", "a/", true),
            ("*/x", "a/b/x", false),
        ];
        for (pattern, text, expected) in cases {
            assert_eq!(glob_match(pattern, text), *expected, "{pattern} vs {text}");
        }
    }

    /// A reference matcher (a wildcard DP over chars): the two must agree.
    fn reference_glob(pattern: &str, text: &str) -> bool {
        let p: Vec<char> = pattern.chars().collect();
        let t: Vec<char> = text.chars().collect();
        let mut row = vec![false; t.len() + 1];
        row[0] = true;
        for &pc in &p {
            let mut next = vec![false; t.len() + 1];
            if pc == '*' {
                next[0] = row[0];
                for j in 1..=t.len() {
                    next[j] = row[j] || (next[j - 1] && t[j - 1] != '/');
                }
            } else {
                for j in 1..=t.len() {
                    next[j] = row[j - 1] && (pc == '?' && t[j - 1] != '/' || pc == t[j - 1]);
                }
            }
            row = next;
        }
        row[t.len()]
    }

    fn strings(alphabet: &[char], max_len: usize) -> Vec<String> {
        let mut all = vec![String::new()];
        let mut last = vec![String::new()];
        for _ in 0..max_len {
            last = last
                .iter()
                .flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}")))
                .collect();
            all.extend(last.iter().cloned());
        }
        all
    }

    #[test]
    fn glob_agrees_with_the_reference_on_every_short_input() {
        let patterns = strings(&['a', 'é', '/', '*', '?'], 4);
        let texts = strings(&['a', 'é', '/', 'b'], 4);
        for pattern in &patterns {
            for text in &texts {
                assert_eq!(
                    glob_match(pattern, text),
                    reference_glob(pattern, text),
                    "{pattern:?} vs {text:?}"
                );
            }
        }
    }

    #[test]
    fn ignore_table() {
        let rules: Vec<String> = DEFAULT_IGNORES.iter().map(|s| s.to_string()).collect();
        let extra = vec![
            "*.log".to_string(),
            "/out/gen".to_string(),
            "docs/".to_string(),
        ];
        let cases: &[(&str, bool, &[String], bool)] = &[
            (".git", true, &rules, true),
            ("sub/node_modules", true, &rules, true),
            ("target", false, &rules, false), // a file named target is kept
            ("src/target.rs", false, &rules, false),
            (".venv", true, &rules, true),
            ("pkg/__pycache__", true, &rules, true),
            ("a.log", false, &extra, true),
            ("x/a.log", false, &extra, true),
            ("out/gen", false, &extra, true),
            ("x/out/gen", false, &extra, false),
            ("docs", false, &extra, false),
            ("docs", true, &extra, true),
        ];
        for (path, is_dir, patterns, expected) in cases {
            assert_eq!(is_ignored(path, *is_dir, patterns), *expected, "{path}");
        }
    }
}
