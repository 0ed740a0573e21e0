//! One acceptance check in its own scratch copy, the way every check runs (the auditor's
//! contract checks and the executor's self-checks): `<scratch>/check-<n>/` holds the copy
//! (`ws/`), the check's `HOME` (`home/`) and bubblewrap's status file; it is made usable by the
//! check user, the check runs under the sandbox in the copy (`LOOPGATE_BROWSE_RECORD` pointing
//! into its HOME), the screenshots it recorded are read, and the directory is removed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use loopgate_common::gui::BROWSE_RECORD_ENV;

use crate::run_check::{run_check, CheckRun, CheckSpec};
use crate::sandbox::launch::prepare_check_dir;
use crate::sandbox::Sandbox;
use crate::scratch_copy::{copy_files, copy_tree, CopyFile};
use crate::screenshots::{collect, RECORD_FILE};

/// What a check's copy is made from.
#[derive(Debug, Clone)]
pub enum CopySource {
    /// A materialized snapshot (directories and regular files only).
    Tree(PathBuf),
    /// Exactly these files (what a live workspace would freeze to).
    Files(Arc<Vec<CopyFile>>),
}

/// One check to run in its own copy under `scratch`.
#[derive(Debug, Clone)]
pub struct ScratchCheck<'a> {
    /// The directory the check's own directory is made in (traverse-only for the check user).
    pub scratch: &'a Path,
    /// Names the check's directory (`check-<index>`), unique within `scratch`.
    pub index: usize,
    pub command: &'a str,
    pub timeout: Duration,
    /// `PATH` for the check.
    pub path_var: &'a str,
    pub sandbox: &'a Sandbox,
    /// Variables added to the check's scrubbed environment.
    pub extra_env: &'a [(String, String)],
}

/// The check's copy could not be made: the check never ran.
#[derive(Debug, thiserror::Error)]
#[error("preparing a check's scratch copy under {path:?}: {source}")]
pub struct ScratchCopyError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// Where one check runs: its copy, its HOME and bubblewrap's status file.
struct CheckDirs {
    root: PathBuf,
    workspace: PathBuf,
    home: PathBuf,
    status: PathBuf,
}

fn prepare(
    scratch: &Path,
    index: usize,
    source: &CopySource,
    run_as: Option<(u32, u32)>,
) -> std::io::Result<CheckDirs> {
    let root = scratch.join(format!("check-{index}"));
    std::fs::create_dir(&root)?;
    let dirs = CheckDirs {
        workspace: root.join("ws"),
        home: root.join("home"),
        status: root.join("status"),
        root,
    };
    match source {
        CopySource::Tree(pristine) => copy_tree(pristine, &dirs.workspace)?,
        CopySource::Files(files) => copy_files(files, &dirs.workspace)?,
    };
    std::fs::create_dir(&dirs.home)?;
    std::fs::write(&dirs.status, b"")?;
    prepare_check_dir(scratch, &[&dirs.root], run_as)?;
    Ok(dirs)
}

/// Copy `source` into a fresh directory under `check.scratch`, run the check there, remove the
/// directory. `Err` only when the copy could not be made; how the check ended is in the run.
pub async fn run_in_scratch_copy(
    check: &ScratchCheck<'_>,
    source: &CopySource,
) -> Result<CheckRun, ScratchCopyError> {
    let scratch_err = |source| ScratchCopyError {
        path: check.scratch.to_path_buf(),
        source,
    };
    let (scratch, index, copy_from, run_as) = (
        check.scratch.to_path_buf(),
        check.index,
        source.clone(),
        check.sandbox.run_as,
    );
    let dirs = tokio::task::spawn_blocking(move || prepare(&scratch, index, &copy_from, run_as))
        .await
        .map_err(|err| scratch_err(std::io::Error::other(err.to_string())))?
        .map_err(scratch_err)?;
    let record = dirs.home.join(RECORD_FILE);
    let mut extra_env = check.extra_env.to_vec();
    extra_env.push((
        BROWSE_RECORD_ENV.to_string(),
        record.to_string_lossy().into_owned(),
    ));
    let run = run_check(&CheckSpec {
        command: check.command,
        cwd: &dirs.workspace,
        home: &dirs.home,
        path_var: check.path_var,
        timeout: check.timeout,
        sandbox: check.sandbox,
        status_file: &dirs.status,
        extra_env: &extra_env,
    })
    .await;
    let mut run = CheckRun {
        output: workspace_relative(&run.output, &dirs.workspace),
        ..run
    };
    let workspace = dirs.workspace.clone();
    run.screenshots = tokio::task::spawn_blocking(move || collect(&record, &workspace))
        .await
        .unwrap_or_default();
    let root = dirs.root.clone();
    let removed = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&root)).await;
    if !matches!(removed, Ok(Ok(()))) {
        tracing::warn!(path = %dirs.root.display(), "removing a check's scratch copy failed");
    }
    Ok(run)
}

/// The check's output with its copy's absolute path taken out (`<copy>/hello.py` becomes
/// `hello.py`, the copy itself `.`): the path is a scratch directory that is gone once the
/// check ends, and agents that read it in evidence write their files there
/// (`check-0/ws/hello.py`).
fn workspace_relative(output: &[u8], copy: &Path) -> Vec<u8> {
    let mut out = output.to_vec();
    let shown = copy.display().to_string();
    let canonical = std::fs::canonicalize(copy)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| shown.clone());
    for path in [canonical, shown] {
        if path.len() < 2 {
            continue;
        }
        out = replace_path(&out, format!("{path}/").as_bytes(), b"");
        out = replace_path(&out, path.as_bytes(), b".");
    }
    out
}

/// `haystack` with each `needle` that is a whole path (not the start of a longer name, as
/// `/ws` is of `/wsx`) replaced by `with`.
fn replace_path(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return haystack.to_vec();
    }
    let name_byte = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.');
    let ends_name = needle.last().is_some_and(|&b| name_byte(b));
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        let whole = |end: usize| !ends_name || haystack.get(end).is_none_or(|&b| !name_byte(b));
        if haystack[i..].starts_with(needle) && whole(i + needle.len()) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::run_check::{CheckEnd, DEFAULT_CHECK_PATH};

    #[test]
    fn check_output_names_workspace_paths_relative_to_the_copy() {
        let copy = Path::new("/no/such/audit-x/check-0/ws");
        // (output, shown)
        let cases = [
            (
                "python3: can't open file '/no/such/audit-x/check-0/ws/hello.py': [Errno 2]",
                "python3: can't open file 'hello.py': [Errno 2]",
            ),
            ("cwd is /no/such/audit-x/check-0/ws\n", "cwd is .\n"),
            (
                "/no/such/audit-x/check-0/wsx stays",
                "/no/such/audit-x/check-0/wsx stays",
            ),
            ("in /no/such/audit-x/check-0/ws: ok", "in .: ok"),
            ("nothing to change", "nothing to change"),
            ("", ""),
        ];
        for (output, shown) in cases {
            let got = workspace_relative(output.as_bytes(), copy);
            assert_eq!(String::from_utf8(got).unwrap(), shown, "{output}");
        }
    }

    #[tokio::test]
    async fn a_check_writes_only_into_its_own_copy_which_is_removed() {
        let root = tempfile::tempdir().unwrap();
        let live = root.path().join("live");
        std::fs::create_dir_all(live.join("src")).unwrap();
        std::fs::write(live.join("src/a.txt"), b"a").unwrap();
        let scratch = root.path().join("scratch");
        std::fs::create_dir(&scratch).unwrap();
        let sandbox = Sandbox::unisolated("unit test");
        let sources = [
            CopySource::Tree(live.clone()),
            CopySource::Files(Arc::new(vec![CopyFile {
                path: "src/a.txt".into(),
                source: live.join("src/a.txt"),
                mode: 0o644,
            }])),
        ];
        for (index, source) in sources.iter().enumerate() {
            let check = ScratchCheck {
                scratch: &scratch,
                index,
                command:
                    "test -f src/a.txt && echo cache > cache.txt && echo x >> src/a.txt; exit 4",
                timeout: Duration::from_secs(10),
                path_var: DEFAULT_CHECK_PATH,
                sandbox: &sandbox,
                extra_env: &[],
            };
            let run = run_in_scratch_copy(&check, source).await.unwrap();
            assert_eq!(run.end, CheckEnd::Exited(Some(4)), "{source:?}");
            assert_eq!(std::fs::read(live.join("src/a.txt")).unwrap(), b"a");
            assert!(!live.join("cache.txt").exists());
            assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
        }
        let missing = CopySource::Tree(root.path().join("missing"));
        let check = ScratchCheck {
            scratch: &scratch,
            index: 9,
            command: "true",
            timeout: Duration::from_secs(5),
            path_var: DEFAULT_CHECK_PATH,
            sandbox: &sandbox,
            extra_env: &[],
        };
        let err = run_in_scratch_copy(&check, &missing).await.unwrap_err();
        assert_eq!(err.path, scratch);
    }
}
