//! Default protected paths: the acceptance test files the contract's checks run.
//!
//! "Edit the tests until they pass" is the shortcut a contract most needs to rule out, so the
//! test files a check names are protected unless the task says otherwise. Derived once, when a
//! run is created, from the check commands and the *submitted* workspace's manifest (files the
//! executor writes later are its own work, not the user's tests), and frozen into the
//! contract's `protected_paths` with everything else the spec hash covers.
//!
//! A token of a check command counts when, after light clean-up (quotes, `./`, a pytest
//! `::node` suffix, a trailing `/`), it names
//! - a file in the manifest that looks like a test (`is_test_path`): that file is protected;
//! - a directory holding files of the manifest, and the directory looks like a test directory:
//!   the whole directory (`dir/`) is protected.
//!
//! A check that names no path but runs a test runner (`pytest`, `cargo test`, `go test`,
//! `npm test`, ...) protects every test-looking file of the manifest.
//!
//! A default the task names writable (`writable_paths`) is left out. Test plumbing (a new
//! `conftest.py`, `pytest.ini`, `jest.config.js`, ...) is not listed here at all: the auditor
//! applies a pattern rule to every change (`auditor-worker/src/audit/test_plumbing.rs`), so a
//! file the executor adds is covered too. Pure.

use std::collections::BTreeSet;

use loopgate_common::task::Task;
use loopgate_protocol::contract::Criterion;
use loopgate_protocol::snapshot::{path_in_scope, Manifest};

/// Does `task` name `path` writable (exactly, or under a writable `dir/`)? Such a path gets no
/// default protection.
pub(crate) fn names_writable(task: &Task, path: &str) -> bool {
    path_in_scope(path, &task.writable_paths)
}

/// Directory names whose content is test code.
const TEST_DIRS: &[&str] = &[
    "test",
    "tests",
    "spec",
    "specs",
    "__tests__",
    "testdata",
    "acceptance",
    "e2e",
];

/// Commands that discover tests on their own when given no path.
const TEST_RUNNERS: &[&str] = &[
    "pytest",
    "unittest",
    "nosetests",
    "tox",
    "jest",
    "vitest",
    "mocha",
    "rspec",
    "phpunit",
    "ctest",
];

/// Runners spelled as `<tool> test`.
const TEST_SUBCOMMAND_TOOLS: &[&str] = &[
    "cargo", "go", "npm", "yarn", "pnpm", "mvn", "gradle", "dotnet", "make", "bun", "deno", "mix",
];

/// Does this relative path look like test code (by directory or file name)?
pub(crate) fn is_test_path(path: &str) -> bool {
    let mut parts: Vec<&str> = path.split('/').collect();
    let Some(name) = parts.pop() else {
        return false;
    };
    if parts
        .iter()
        .any(|dir| TEST_DIRS.contains(&dir.to_ascii_lowercase().as_str()))
    {
        return true;
    }
    let lower = name.to_ascii_lowercase();
    let stem = lower.split('.').next().unwrap_or(&lower);
    stem == "conftest"
        || stem == "test"
        || stem == "tests"
        || stem.starts_with("test_")
        || stem.starts_with("test-")
        || stem.ends_with("_test")
        || stem.ends_with("-test")
        || stem.ends_with("_spec")
        || stem.ends_with("_tests")
        || lower.contains(".test.")
        || lower.contains(".spec.")
}

fn is_test_dir(dir: &str) -> bool {
    dir.split('/')
        .any(|part| TEST_DIRS.contains(&part.to_ascii_lowercase().as_str()))
}

/// Split a shell command into word-ish tokens (no expansion, quotes dropped).
fn tokens(command: &str) -> Vec<String> {
    command
        .split(|c: char| c.is_whitespace() || ";|&()<>=,`".contains(c))
        .map(|t| t.trim_matches(|c| c == '"' || c == '\''))
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// A token as a relative workspace path, if it can be one.
fn as_relative_path(token: &str) -> Option<String> {
    let token = token.split("::").next().unwrap_or(token);
    let mut path = token.trim_end_matches('/');
    while let Some(rest) = path.strip_prefix("./") {
        path = rest;
    }
    let ok = !path.is_empty()
        && !path.starts_with('/')
        && !path.starts_with('-')
        && !path.contains('$')
        && !path.contains('*')
        && path
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..");
    ok.then(|| path.to_string())
}

fn runs_a_test_runner(tokens: &[String]) -> bool {
    tokens.iter().enumerate().any(|(i, token)| {
        let program = token.rsplit('/').next().unwrap_or(token);
        TEST_RUNNERS.contains(&program)
            || program.starts_with("pytest")
            || (TEST_SUBCOMMAND_TOOLS.contains(&program)
                && tokens.get(i + 1).is_some_and(|next| next == "test"))
    })
}

/// The default protected paths for `criteria` run against `base` (exact files and `dir/`
/// prefixes, sorted, deduplicated). See the module docs.
pub(crate) fn default_protected_paths(criteria: &[Criterion], base: &Manifest) -> Vec<String> {
    let mut protected = BTreeSet::new();
    for command in criteria.iter().filter_map(|c| c.check.as_deref()) {
        let words = tokens(command);
        let mut named_any = false;
        for path in words.iter().filter_map(|w| as_relative_path(w)) {
            if base.get(&path).is_some() {
                named_any = true;
                if is_test_path(&path) {
                    protected.insert(path);
                }
                continue;
            }
            let prefix = format!("{path}/");
            let holds_files = base.entries.iter().any(|e| e.path.starts_with(&prefix));
            if holds_files {
                named_any = true;
                if is_test_dir(&path) {
                    protected.insert(prefix);
                }
            }
        }
        if !named_any && runs_a_test_runner(&words) {
            protected.extend(
                base.entries
                    .iter()
                    .filter(|e| is_test_path(&e.path))
                    .map(|e| e.path.clone()),
            );
        }
    }
    // A file under a protected directory needs no entry of its own.
    let dirs: Vec<String> = protected
        .iter()
        .filter(|p| p.ends_with('/'))
        .cloned()
        .collect();
    protected
        .into_iter()
        .filter(|p| p.ends_with('/') || !dirs.iter().any(|d| p.starts_with(d.as_str())))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]
    use super::*;
    use loopgate_protocol::snapshot::{sha256_hex, ManifestEntry};

    fn manifest(paths: &[&str]) -> Manifest {
        Manifest::new(
            paths
                .iter()
                .map(|p| ManifestEntry {
                    path: p.to_string(),
                    mode: 0o644,
                    size: 1,
                    sha256: sha256_hex(p.as_bytes()),
                })
                .collect(),
        )
        .unwrap()
    }

    fn check(command: &str) -> Criterion {
        Criterion {
            id: "c".into(),
            description: String::new(),
            check: Some(command.into()),
            blocking: true,
            timeout_secs: 10,
            source: Default::default(),
            clause: None,
        }
    }

    #[test]
    fn test_path_table() {
        let cases = [
            ("tests/test_app.py", true),
            ("test_app.py", true),
            ("app_test.go", true),
            ("src/app.test.ts", true),
            ("spec/models/user_spec.rb", true),
            ("conftest.py", true),
            ("pkg/testdata/input.txt", true),
            ("hello.py", false),
            ("src/contest.py", false),
            ("latest.txt", false),
            ("attestation.md", false),
        ];
        for (path, want) in cases {
            assert_eq!(is_test_path(path), want, "{path}");
        }
    }

    #[test]
    fn derivation_table() {
        let base = manifest(&[
            "hello.py",
            "tests/test_hello.py",
            "tests/fixtures/data.json",
            "test_cli.py",
            "scripts/run.sh",
            "pkg/util_test.go",
            "src/lib.rs",
        ]);
        let cases: &[(&str, &[&str])] = &[
            // The artifact is named but is not a test: nothing.
            ("python3 hello.py", &[]),
            // A test file by name, with ./ and a pytest node id.
            (
                "python3 -m pytest ./test_cli.py::test_main -q",
                &["test_cli.py"],
            ),
            // A test directory: the whole directory.
            ("pytest tests/", &["tests/"]),
            ("cd tests && python -m unittest", &["tests/"]),
            // A runner without paths: every test-looking file.
            (
                "pytest -q",
                &[
                    "pkg/util_test.go",
                    "test_cli.py",
                    "tests/fixtures/data.json",
                    "tests/test_hello.py",
                ],
            ),
            (
                "cargo test --quiet",
                &[
                    "pkg/util_test.go",
                    "test_cli.py",
                    "tests/fixtures/data.json",
                    "tests/test_hello.py",
                ],
            ),
            // Names a non-test script: nothing, and no runner fallback.
            ("sh scripts/run.sh", &[]),
            // Files the base lacks (the executor will write them) are not protected.
            ("python3 tests/test_new.py", &[]),
            ("test -f hello.py && grep -q hello hello.py", &[]),
        ];
        for (command, want) in cases {
            assert_eq!(
                default_protected_paths(&[check(command)], &base),
                want.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                "{command}"
            );
        }
    }

    #[test]
    fn defaults_the_task_names_writable_are_left_out() {
        let task = loopgate_common::task::parse_task_toml(
            "goal = \"g\"\nwritable_paths = [\"conftest.py\", \"fixtures/\"]\n\
             [[acceptance]]\nid = \"a\"\ncheck = \"pytest -q\"",
        )
        .unwrap();
        let cases = [
            ("conftest.py", true),
            ("fixtures/test_data.py", true),
            ("tests/conftest.py", false),
            ("tests/", false),
        ];
        for (path, want) in cases {
            assert_eq!(names_writable(&task, path), want, "{path}");
        }
    }

    #[test]
    fn files_under_protected_dirs_are_folded_and_checks_without_commands_ignored() {
        let base = manifest(&["tests/test_a.py", "tests/test_b.py"]);
        let criteria = vec![
            check("pytest tests/test_a.py"),
            check("pytest tests"),
            Criterion {
                check: None,
                ..check("")
            },
        ];
        assert_eq!(default_protected_paths(&criteria, &base), vec!["tests/"]);
        assert!(default_protected_paths(&[], &base).is_empty());
    }
}
