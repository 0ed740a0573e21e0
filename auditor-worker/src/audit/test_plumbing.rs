//! Test plumbing: the files a test runner reads on its own, before or around the tests, that
//! can decide what a test run reports whatever the tests say. A new root `conftest.py` whose
//! hook marks every report passed makes `pytest -q` exit 0 over failing tests; a
//! `sitecustomize.py` or a `.pth` file runs at interpreter start; a runner's configuration can
//! point it at no tests, or at a setup file that stubs them. So adding, changing or deleting one
//! is an integrity finding on every audit, like a protected path, unless the task's author names
//! it writable (`writable_paths`): a pattern rule over every change, not a list taken from the
//! starting workspace.
//!
//! Matched by file name at any depth (runners read them at the root, next to the tests, and
//! for `conftest.py` in every directory they collect from), ignoring case. `setup.cfg` and
//! `pyproject.toml` count as a whole file: their test sections (`[tool:pytest]`,
//! `[tool.pytest.ini_options]`, tox's, coverage's, an entry point registering a pytest plugin)
//! are not told apart from the rest. Pure.

/// Why `path` is test plumbing (the runner that reads it), if it is.
pub(crate) fn test_plumbing(path: &str) -> Option<&'static str> {
    let name = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
    let starts = |prefixes: &[&str]| prefixes.iter().any(|p| name.starts_with(p));
    match name.as_str() {
        "conftest.py" => Some("pytest loads it as a plugin"),
        "sitecustomize.py" | "usercustomize.py" => Some("Python imports it at start-up"),
        "pytest.ini" | ".pytest.ini" | "pytest.toml" | ".pytest.toml" => {
            Some("pytest's configuration")
        }
        "tox.ini" => Some("tox's and pytest's configuration"),
        "setup.cfg" | "pyproject.toml" => Some("it may configure pytest, tox or coverage"),
        ".mocharc" => Some("mocha's configuration"),
        _ if name.ends_with(".pth") => Some("Python's site module runs it at start-up"),
        _ if starts(&["jest.config."]) => Some("jest's configuration"),
        _ if starts(&["vitest.config.", "vitest.workspace."]) => Some("vitest's configuration"),
        _ if starts(&[".mocharc."]) => Some("mocha's configuration"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::verdict_rules::{mechanical_verdicts, plumbing_changes};
    use loopgate_protocol::contract::Contract;
    use loopgate_protocol::snapshot::PathChange;
    use loopgate_protocol::verdict::Integrity;

    fn contract(protected: &[&str], writable: &[&str]) -> Contract {
        let mut c = Contract {
            goal: "g".into(),
            criteria: Vec::new(),
            protected_paths: protected.iter().map(|s| s.to_string()).collect(),
            rubric: None,
            writable_paths: writable.iter().map(|s| s.to_string()).collect(),
            spec_hash: String::new(),
        };
        c.spec_hash = c.compute_hash();
        c
    }

    /// Every kind of change to test plumbing is a violation, wherever the starting workspace
    /// had it or not, unless the task's author names the path writable.
    #[test]
    fn plumbing_changes_are_violations_unless_named_writable() {
        let added = |p: &str| PathChange::Added { path: p.into() };
        let modified = |p: &str| PathChange::Modified { path: p.into() };
        let removed = |p: &str| PathChange::Removed { path: p.into() };
        type Case = (
            PathChange,
            &'static [&'static str],
            &'static [&'static str],
            Integrity,
        );
        let cases: Vec<Case> = vec![
            (added("conftest.py"), &[], &[], Integrity::Violation),
            (
                added("tests/deep/conftest.py"),
                &[],
                &[],
                Integrity::Violation,
            ),
            (modified("pyproject.toml"), &[], &[], Integrity::Violation),
            (removed("pytest.ini"), &[], &[], Integrity::Violation),
            (added("site.pth"), &[], &[], Integrity::Violation),
            (modified("jest.config.js"), &[], &[], Integrity::Violation),
            (added("app.py"), &[], &[], Integrity::Clean),
            // Named writable by the author: exactly, or under a writable directory.
            (
                added("conftest.py"),
                &[],
                &["conftest.py"],
                Integrity::Clean,
            ),
            (
                added("tests/conftest.py"),
                &[],
                &["tests/"],
                Integrity::Clean,
            ),
            (
                added("conftest.py"),
                &[],
                &["tests/conftest.py"],
                Integrity::Violation,
            ),
            // A writable path lifts a protected directory's protection for itself only.
            (
                added("tests/conftest.py"),
                &["tests/"],
                &["tests/conftest.py"],
                Integrity::Clean,
            ),
            (
                modified("tests/test_a.py"),
                &["tests/"],
                &["tests/conftest.py"],
                Integrity::Violation,
            ),
        ];
        for (change, protected, writable, want) in cases {
            let c = contract(protected, writable);
            let changes = vec![change];
            let (verdicts, gaps) = mechanical_verdicts(&c, &[], &changes, &[]);
            assert_eq!(
                verdicts.integrity, want,
                "{changes:?} {writable:?}: {gaps:?}"
            );
            let plumbing = plumbing_changes(&c, &changes);
            if want == Integrity::Violation && protected.is_empty() {
                assert_eq!(plumbing.len(), 1, "{changes:?}");
                assert!(
                    gaps.iter()
                        .any(|g| g.starts_with("test plumbing changed: ")),
                    "{gaps:?}"
                );
            }
        }
    }

    #[test]
    fn test_plumbing_table() {
        let cases: &[(&str, bool)] = &[
            ("conftest.py", true),
            ("tests/conftest.py", true),
            ("a/b/c/conftest.py", true),
            ("Conftest.py", true),
            ("sitecustomize.py", true),
            ("lib/usercustomize.py", true),
            ("evil.pth", true),
            ("site-packages/x.pth", true),
            ("pytest.ini", true),
            (".pytest.ini", true),
            ("pytest.toml", true),
            ("tox.ini", true),
            ("setup.cfg", true),
            ("pyproject.toml", true),
            ("pkg/pyproject.toml", true),
            ("jest.config.js", true),
            ("jest.config.ts", true),
            ("web/jest.config.mjs", true),
            ("vitest.config.ts", true),
            ("vitest.config.mts", true),
            ("vitest.workspace.ts", true),
            (".mocharc", true),
            (".mocharc.yml", true),
            (".mocharc.json", true),
            ("test/.mocharc.cjs", true),
            // Ordinary code and tests are the contract's business (protected paths).
            ("app.py", false),
            ("test_app.py", false),
            ("tests/test_conftest.py", false),
            ("conftest.py.bak", false),
            ("myconftest.py", false),
            ("setup.py", false),
            ("jest.setup.js", false),
            ("jestconfig.js", false),
            ("vite.config.ts", false),
            ("docs/pth", false),
            (".pth", true),
            ("package.json", false),
            ("README.md", false),
        ];
        for (path, want) in cases {
            assert_eq!(test_plumbing(path).is_some(), *want, "{path}");
        }
    }
}
