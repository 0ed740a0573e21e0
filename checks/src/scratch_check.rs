//! One acceptance check in its own scratch copy, the way every check runs (the auditor's
//! contract checks and the executor's self-checks): `<scratch>/check-<n>/` holds the copy
//! (`ws/`), the check's `HOME` (`home/`) and bubblewrap's status file; it is made usable by the
//! check user, the check runs under the sandbox in the copy (`LOOPGATE_BROWSE_RECORD` pointing
//! into its HOME), the screenshots it recorded are read, and the directory is removed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use loopgate_protocol::gui::BROWSE_RECORD_ENV;

use crate::check_base::CheckBase;
use crate::run_check::{run_check_in, CheckRun, CheckSpec};
use crate::sandbox::launch::prepare_check_dir;
use crate::sandbox::overlay::Layer;
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
    /// A tree prepared once for all the checks of an audit: each check gets a layered copy of
    /// it (an overlay with an upper layer of its own) instead of a full one.
    Layered(CheckBase),
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
    /// A layered copy: the overlay's mount options and the upper layer (what the check wrote).
    layer: Option<(String, PathBuf)>,
}

fn prepare(
    scratch: &Path,
    index: usize,
    source: &CopySource,
    run_as: Option<(u32, u32)>,
    layers: bool,
) -> std::io::Result<CheckDirs> {
    let root = scratch.join(format!("check-{index}"));
    std::fs::create_dir(&root)?;
    let mut dirs = CheckDirs {
        workspace: root.join("ws"),
        home: root.join("home"),
        status: root.join("status"),
        layer: None,
        root,
    };
    match source {
        CopySource::Tree(pristine) => {
            copy_tree(pristine, &dirs.workspace)?;
        }
        CopySource::Files(files) => {
            copy_files(files, &dirs.workspace)?;
        }
        // A sandbox that cannot layer (not the one the base was prepared for): a full copy.
        CopySource::Layered(base) if !layers => {
            copy_tree(base.tree(), &dirs.workspace)?;
        }
        CopySource::Layered(base) => {
            let layer = Layer {
                lower: base.tree().to_path_buf(),
                upper: dirs.root.join("upper"),
                work: dirs.root.join("work"),
            };
            let options = layer.options().ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "the check's directories cannot be mounted as an overlay",
                )
            })?;
            for dir in [&dirs.workspace, &layer.upper, &layer.work] {
                std::fs::create_dir(dir)?;
            }
            dirs.layer = Some((options, layer.upper));
        }
    }
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
    let (scratch, index, copy_from, run_as, layers) = (
        check.scratch.to_path_buf(),
        check.index,
        source.clone(),
        check.sandbox.run_as,
        check.sandbox.layers(),
    );
    let dirs =
        tokio::task::spawn_blocking(move || prepare(&scratch, index, &copy_from, run_as, layers))
            .await
            .map_err(|err| scratch_err(std::io::Error::other(err.to_string())))?
            .map_err(scratch_err)?;
    let record = dirs.home.join(RECORD_FILE);
    let mut extra_env = check.extra_env.to_vec();
    extra_env.push((
        BROWSE_RECORD_ENV.to_string(),
        record.to_string_lossy().into_owned(),
    ));
    let layer = dirs.layer.as_ref().map(|(options, _)| options.as_str());
    let run = run_check_in(
        &CheckSpec {
            command: check.command,
            cwd: &dirs.workspace,
            home: &dirs.home,
            path_var: check.path_var,
            timeout: check.timeout,
            sandbox: check.sandbox,
            status_file: &dirs.status,
            extra_env: &extra_env,
        },
        layer,
    )
    .await;
    let mut run = CheckRun {
        output: workspace_relative(&run.output, &dirs.workspace),
        ..run
    };
    let workspace = dirs.workspace.clone();
    // A layered copy's files are in its upper layer once the check's mount is gone.
    let files_in = dirs
        .layer
        .as_ref()
        .map_or_else(|| workspace.clone(), |(_, upper)| upper.clone());
    run.screenshots = tokio::task::spawn_blocking(move || collect(&record, &workspace, &files_in))
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
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]
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

    /// Layered copies on this host's real sandbox: each check sees the whole base, may change
    /// and add files in its copy, never in the base or another check's copy, and nothing
    /// outlives it. Skipped (said so) where bubblewrap or unprivileged overlayfs is missing.
    #[tokio::test]
    async fn layered_copies_are_private_and_leave_the_base_as_it_was() {
        let root = tempfile::tempdir().unwrap();
        // Traversable, as a work dir is, so a root worker's checks can drop to `nobody`.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        let sandbox = crate::probe(&crate::SandboxSettings::default(), root.path())
            .await
            .unwrap();
        if !sandbox.layers() {
            eprintln!(
                "SKIP layered copies: not available here ({:?})",
                sandbox.limitations
            );
            return;
        }
        let base = root.path().join("base");
        std::fs::create_dir_all(base.join("src")).unwrap();
        std::fs::write(base.join("src/a.txt"), b"a").unwrap();
        let scratch = root.path().join("scratch");
        std::fs::create_dir(&scratch).unwrap();
        let prepared = CheckBase::prepare(&base, &sandbox).unwrap().unwrap();
        let source = CopySource::Layered(prepared);
        let commands = [
            // Changes a base file, adds one, deletes one, and tries to reach the base itself.
            "test \"$(cat src/a.txt)\" = a && echo x >> src/a.txt && echo c > cache.txt \
             && rm src/a.txt && ! echo evil > ../../../base/evil.txt 2>/dev/null; exit 4",
            // The next check's copy is fresh.
            "test \"$(cat src/a.txt)\" = a && test ! -e cache.txt && test \"$(id -u)\" != 0 \
             || { id -u; ls -la; exit 9; }",
        ];
        let mut ends = Vec::new();
        for (index, command) in commands.iter().enumerate() {
            let check = ScratchCheck {
                scratch: &scratch,
                index,
                command,
                timeout: Duration::from_secs(20),
                path_var: DEFAULT_CHECK_PATH,
                sandbox: &sandbox,
                extra_env: &[],
            };
            let run = run_in_scratch_copy(&check, &source).await.unwrap();
            ends.push((
                run.end.clone(),
                String::from_utf8_lossy(&run.output).into_owned(),
            ));
        }
        assert_eq!(ends[0].0, CheckEnd::Exited(Some(4)), "{ends:?}");
        // Layered copies are only probed for when checks run unprivileged.
        assert_eq!(ends[1].0, CheckEnd::Exited(Some(0)), "{ends:?} {sandbox:?}");
        assert_eq!(std::fs::read(base.join("src/a.txt")).unwrap(), b"a");
        assert!(!base.join("cache.txt").exists() && !base.join("evil.txt").exists());
        assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
    }
}
