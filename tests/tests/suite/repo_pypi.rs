//! A real project, end to end (issue 41): more-itertools 10.5.0 as PyPI ships its sources (the
//! sdist `scripts/install-deps.sh services` caches under `~/.cache/loopgate/pypi/`, sha256
//! pinned there), unpacked into a fresh git repository here. `loopgate submit --repo` uploads
//! exactly the committed tree, the stand-in executor adds a function and exports it, the signed
//! run completes, and `loopgate apply` writes a branch on which the package's own 800-odd
//! unittest tests and the new check pass; `--patch` applies with `git am` on the start commit
//! to the same tree. Without the cached sdist the test prints a SKIP line, and fails when `CI`
//! is set (CI installs it).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{ensure, Context};
use loopgate_test_support::{Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions};
use serde_json::{json, Value};

use super::repo_flow::{git, loopgate, text};

const WAIT: Duration = Duration::from_secs(120);
const SDIST: &str = "more-itertools-10.5.0.tar.gz";
const UNPACKED: &str = "more-itertools-10.5.0";

/// The example's `every-nth` check, run here on the start commit and on the applied branch.
const NEW_CHECK: &str = "from more_itertools import every_nth; \
assert list(every_nth(range(10), 3)) == [0, 3, 6, 9]; assert list(every_nth('abc', 5)) == ['a']";

const EVERY_NTH: &str = r#""""every_nth: every n-th item of an iterable."""

from itertools import islice

__all__ = ['every_nth']


def every_nth(iterable, n):
    """Yield every *n*-th item of *iterable*, starting with the first.

    >>> list(every_nth(range(10), 3))
    [0, 3, 6, 9]
    """
    if n < 1:
        raise ValueError('n must be at least 1')
    return islice(iterable, 0, None, n)
"#;

const INIT_OLD: &str = "from .recipes import *  # noqa\n";
const INIT_NEW: &str = "from .recipes import *  # noqa\nfrom .every_nth import every_nth  # noqa\n";

/// `examples/repo-more-itertools/task.toml` with the stand-in's profiles for its roles.
fn task() -> anyhow::Result<String> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/repo-more-itertools/task.toml");
    let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
    let roles = "manager = \"local\"\nexecutor = \"local\"";
    ensure!(text.contains(roles), "the example's roles changed");
    let task = text.replace(roles, "manager = \"mgr\"\nexecutor = \"exec\"");
    ensure!(
        task.contains(NEW_CHECK),
        "the example's check is not NEW_CHECK"
    );
    Ok(task + "self_checks = 0\n")
}

async fn model() -> anyhow::Result<StandInModel> {
    StandInModel::start(
        Script::new()
            .replies(
                "standin-manager",
                [Reply::content(
                    "Next: cli\nTask: add every_nth in more_itertools/every_nth.py and export it",
                )],
            )
            .replies(
                "standin-executor",
                [
                    Reply::tool_call(
                        "write_file",
                        json!({"path": "more_itertools/every_nth.py", "content": EVERY_NTH}),
                    ),
                    Reply::tool_call(
                        "edit_file",
                        json!({"path": "more_itertools/__init__.py", "old": INIT_OLD, "new": INIT_NEW}),
                    ),
                    Reply::tool_call("finish", json!({"summary": "added every_nth"})),
                ],
            ),
    )
    .await
}

/// The cached sdist, or `None` after a SKIP line (an error under `CI`).
fn cached_sdist() -> anyhow::Result<Option<PathBuf>> {
    let path = loopgate_test_support::cache_dir().join("pypi").join(SDIST);
    if path.is_file() {
        return Ok(Some(path));
    }
    let why = format!(
        "{} is not cached (scripts/install-deps.sh services downloads it from PyPI)",
        path.display()
    );
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        anyhow::bail!("{why}");
    }
    println!("SKIP: the real-package repository flow: {why}");
    eprintln!("SKIP: the real-package repository flow: {why}");
    Ok(None)
}

/// The sdist unpacked into `<work>/project` and committed as one commit on `main`.
fn project_from_sdist(work: &Path, sdist: &Path) -> anyhow::Result<(PathBuf, String)> {
    let out = std::process::Command::new("tar")
        .arg("xzf")
        .arg(sdist)
        .arg("-C")
        .arg(work)
        .output()?;
    ensure!(
        out.status.success(),
        "tar: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let root = work.join("project");
    std::fs::rename(work.join(UNPACKED), &root)?;
    git(&root, &["init", "-q", "-b", "main"])?;
    std::fs::write(root.join(".gitignore"), "__pycache__/\n*.egg-info/\n")?;
    git(&root, &["add", "-A"])?;
    git(
        &root,
        &["commit", "-q", "-m", "more-itertools 10.5.0 from PyPI"],
    )?;
    let start = git(&root, &["rev-parse", "HEAD"])?;
    Ok((root, start))
}

/// Runs `python3 args...` in `dir`; fails with its output unless it exits 0.
fn python(dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    let out = std::process::Command::new("python3")
        .current_dir(dir)
        .args(args)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()?;
    ensure!(
        out.status.success(),
        "python3 {args:?} in {}: {}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_package_from_pypi_in_and_a_verified_branch_out() -> anyhow::Result<()> {
    let Some(sdist) = cached_sdist()? else {
        return Ok(());
    };
    let work = tempfile::tempdir()?;
    let (root, start) = project_from_sdist(work.path(), &sdist)?;
    // The new check fails on the start commit: the run has something to do.
    ensure!(
        python(&root, &["-c", NEW_CHECK]).is_err(),
        "every_nth exists already"
    );

    let model = model().await?;
    let profiles = vec![
        Profile::new("mgr", &model.base_url(), "standin-manager"),
        Profile::new("exec", &model.base_url(), "standin-executor"),
    ];
    let mut options = StackOptions::new(profiles, 1);
    options.signed = true;
    let stack = Stack::start(options).await?;
    let keys = stack.auditor_keys_file.clone().context("a signed stack")?;
    let keys = keys.to_str().context("utf-8 path")?.to_string();
    std::fs::write(work.path().join("task.toml"), task()?)?;

    let args = ["submit", "task.toml", "--repo", "project", "--json"];
    let out = loopgate(&stack, work.path(), &args).await?;
    ensure!(out.status.success(), "{}", text(&out));
    let created: Value = serde_json::from_slice(&out.stdout).context(text(&out))?;
    let id = created["id"].as_str().context("run id")?.to_string();
    assert_eq!(created["origin"]["commit"], json!(start), "{created}");
    // Exactly the committed files left the machine.
    let base = created["base_snapshot"].as_str().context("base")?;
    let manifest = stack.get(&format!("/v1/snapshots/{base}")).await?;
    let mut uploaded: Vec<String> = manifest["entries"]
        .as_array()
        .context("entries")?
        .iter()
        .filter_map(|e| e["path"].as_str().map(str::to_string))
        .collect();
    uploaded.sort();
    let mut tracked: Vec<String> = git(&root, &["ls-files"])?
        .lines()
        .map(str::to_string)
        .collect();
    tracked.sort();
    assert_eq!(uploaded, tracked);

    let done = stack.wait_terminal(&id, WAIT).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());

    let out = loopgate(&stack, &root, &["apply", &id, "--key", &keys, "--json"]).await?;
    ensure!(out.status.success(), "{}", text(&out));
    let branch = format!("loopgate/{}", &id[..8]);
    assert_eq!(git(&root, &["rev-parse", "HEAD"])?, start, "HEAD moved");
    assert_eq!(
        git(&root, &["status", "--porcelain"])?,
        "",
        "the tree changed"
    );
    let changed = git(&root, &["diff", "--name-only", &start, &branch])?;
    assert_eq!(
        changed,
        "more_itertools/__init__.py\nmore_itertools/every_nth.py"
    );
    // On the verified branch the package's own tests and the new check pass.
    let checkout = work.path().join("checkout");
    git(
        &root,
        &[
            "worktree",
            "add",
            "-q",
            checkout.to_str().context("path")?,
            &branch,
        ],
    )?;
    python(&checkout, &["-c", NEW_CHECK])?;
    python(&checkout, &["-m", "unittest", "-q"])?;

    // `--patch` applies with `git am` on the start commit, to the branch's tree.
    let patch = work.path().join("run.patch");
    let patch_arg = patch.to_str().context("path")?;
    let out = loopgate(
        &stack,
        &root,
        &["apply", &id, "--key", &keys, "--patch", patch_arg],
    )
    .await?;
    ensure!(out.status.success(), "{}", text(&out));
    let clone = work.path().join("clone");
    git(work.path(), &["clone", "-q", "project", "clone"])?;
    git(&clone, &["checkout", "-q", &start])?;
    git(&clone, &["am", "-q", patch_arg])?;
    assert_eq!(
        git(&clone, &["rev-parse", "HEAD^{tree}"])?,
        git(&root, &["rev-parse", &format!("{branch}^{{tree}}")])?
    );
    Ok(())
}
