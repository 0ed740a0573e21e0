//! Your repository in, a verified branch out (issue 41), against a real git repository made
//! here with the `git` binary and a stack whose auditor signs its reports:
//!
//! - `loopgate submit --repo` uploads the tree of HEAD only: an untracked `.env` and an
//!   ignored `build/` never reach the starting snapshot, and the run records the start commit
//!   and tree (`origin`, shown by `loopgate status`);
//! - `loopgate apply` on the completed run creates `loopgate/<short id>` with the expected
//!   tree, the start commit as parent and the `Loopgate-Certificate:` trailer, and leaves HEAD,
//!   the index and the working tree byte-identical;
//! - `--patch` writes a file `git am` applies on the start commit, to the same tree, and so
//!   does the console's download, `GET /v1/runs/{id}/patch`;
//! - an edited certificate (the stored report changed after signing) and a tampered blob
//!   (overwritten in the snapshot bucket) make `apply` exit 6 and create nothing, and so does
//!   a run that has not completed: no ref and no object (`git count-objects -v`) written;
//! - the console (headless Chromium, behind a token) shows a run's start commit and, once it
//!   completed, the `loopgate apply` command line and a patch download.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use anyhow::{ensure, Context};
use loopgate_manager::run_store::RunStore;
use loopgate_test_support::{Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions};
use loopgate_transport::{Bus, BusOptions};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const WAIT: Duration = Duration::from_secs(90);
const NOT_VERIFIED: i32 = 6;
const GREETING: &str = "print('hello, loopgate')\n";

const TASK: &str = r#"
goal = "Make hello.py print exactly: hello, loopgate"
[[acceptance]]
id = "prints-greeting"
description = "python3 hello.py prints the greeting"
check = "test \"$(python3 hello.py)\" = 'hello, loopgate'"
blocking = true
[roles]
manager = "mgr"
executor = "exec"
[budget]
max_rounds = 3
self_checks = 0
"#;

async fn model() -> anyhow::Result<StandInModel> {
    StandInModel::start(
        Script::new()
            .replies(
                "standin-manager",
                [Reply::content("Next: cli\nTask: fix hello.py")],
            )
            .replies(
                "standin-executor",
                [
                    Reply::tool_call(
                        "write_file",
                        json!({"path": "hello.py", "content": GREETING}),
                    ),
                    Reply::tool_call("finish", json!({"summary": "fixed hello.py"})),
                ],
            ),
    )
    .await
}

pub(super) fn git(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=Tester",
            "-c",
            "user.email=tester@example.com",
        ])
        .args(args)
        .output()?;
    ensure!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?.trim().to_string())
}

fn write(root: &Path, rel: &str, content: &str) -> anyhow::Result<()> {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().context("a parent")?)?;
    Ok(std::fs::write(path, content)?)
}

/// A project with a committed `hello.py` that prints the wrong thing, an executable, a
/// `.gitignore`d `build/` with output in it and an untracked `.env`.
fn project(root: &Path) -> anyhow::Result<()> {
    git(root, &["init", "-q", "-b", "main"])?;
    write(root, "hello.py", "print('hi')\n")?;
    write(root, "README.md", "# hello\n")?;
    write(root, "scripts/check.sh", "#!/bin/sh\npython3 hello.py\n")?;
    std::fs::set_permissions(
        root.join("scripts/check.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )?;
    write(root, ".gitignore", "build/\n")?;
    git(root, &["add", "-A"])?;
    git(root, &["commit", "-q", "-m", "start"])?;
    write(root, ".env", "API_KEY=do-not-upload\n")?;
    write(root, "build/out.txt", "built\n")?;
    Ok(())
}

/// HEAD, the index and every file of the working tree (`.git/` aside), byte for byte.
fn repo_state(root: &Path) -> anyhow::Result<BTreeMap<String, Vec<u8>>> {
    let mut state = BTreeMap::new();
    for name in ["HEAD", "index"] {
        state.insert(
            format!(".git/{name}"),
            std::fs::read(root.join(".git").join(name))?,
        );
    }
    for entry in walkdir::WalkDir::new(root) {
        let entry = entry?;
        let rel = entry
            .path()
            .strip_prefix(root)?
            .to_string_lossy()
            .to_string();
        if rel.starts_with(".git") && !rel.starts_with(".gitignore") || !entry.file_type().is_file()
        {
            continue;
        }
        state.insert(rel, std::fs::read(entry.path())?);
    }
    Ok(state)
}

pub(super) async fn loopgate(stack: &Stack, dir: &Path, args: &[&str]) -> anyhow::Result<Output> {
    let bin = loopgate_test_support::workspace_bin("loopgate")?;
    Ok(tokio::process::Command::new(bin)
        .current_dir(dir)
        .args(["--server", &stack.http])
        .args(args)
        .env_remove("LOOPGATE_TRUSTED_KEYS")
        .env("XDG_CONFIG_HOME", "/nonexistent/loopgate-tests")
        .output()
        .await?)
}

pub(super) fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n{}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `HSET key field value` on the stack's Redis (no password on this stack), in RESP.
async fn redis_hset(port: u16, key: &str, field: &str, value: &str) -> anyhow::Result<()> {
    let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let parts = ["HSET", key, field, value];
    let mut command = format!("*{}\r\n", parts.len()).into_bytes();
    for part in parts {
        command.extend(format!("${}\r\n{part}\r\n", part.len()).as_bytes());
    }
    conn.write_all(&command).await?;
    let mut reply = [0u8; 64];
    let n = conn.read(&mut reply).await?;
    ensure!(
        reply[..n].starts_with(b":"),
        "HSET answered {:?}",
        String::from_utf8_lossy(&reply[..n])
    );
    Ok(())
}

/// The stack, the project and the run, as the phases of the test share them.
struct Flow {
    stack: Stack,
    work: tempfile::TempDir,
    root: std::path::PathBuf,
    /// The trusted auditor key file (`--key`).
    keys: String,
    start: String,
    id: String,
}

impl Flow {
    /// `loopgate apply RUN --key KEYS ARGS...` in the project.
    async fn apply(&self, args: &[&str]) -> anyhow::Result<Output> {
        let mut all = vec!["apply", &self.id, "--key", &self.keys];
        all.extend_from_slice(args);
        loopgate(&self.stack, &self.root, &all).await
    }

    fn trailer(&self, dir: &Path, rev: &str) -> anyhow::Result<String> {
        let format = "--format=%(trailers:key=Loopgate-Certificate,valueonly)";
        git(dir, &["log", "-1", format, rev])
    }
}

/// A signed stack, the project, and a run submitted from it with `--repo`: only the commit's
/// tree left the machine, and the run recorded the start commit.
async fn submit_from_repository(model: &StandInModel) -> anyhow::Result<Flow> {
    let profiles = vec![
        Profile::new("mgr", &model.base_url(), "standin-manager"),
        Profile::new("exec", &model.base_url(), "standin-executor"),
    ];
    let mut options = StackOptions::new(profiles, 1);
    options.signed = true;
    let stack = Stack::start(options).await?;
    let keys = stack.auditor_keys_file.clone().context("a signed stack")?;
    let keys = keys.to_str().context("utf-8 path")?.to_string();
    let work = tempfile::tempdir()?;
    let root = work.path().join("project");
    std::fs::create_dir(&root)?;
    project(&root)?;
    let start = git(&root, &["rev-parse", "HEAD"])?;
    std::fs::write(work.path().join("task.toml"), TASK)?;
    let args = ["submit", "task.toml", "--repo", "project", "--json"];
    let out = loopgate(&stack, work.path(), &args).await?;
    ensure!(out.status.success(), "{}", text(&out));
    let created: Value = serde_json::from_slice(&out.stdout).context(text(&out))?;
    let id = created["id"].as_str().context("run id")?.to_string();
    assert_eq!(created["origin"]["commit"], json!(start), "{created}");
    let start_tree = git(&root, &["rev-parse", "HEAD^{tree}"])?;
    assert_eq!(created["origin"]["tree"], json!(start_tree), "{created}");
    let base = created["base_snapshot"].as_str().context("base")?;
    let manifest = stack.get(&format!("/v1/snapshots/{base}")).await?;
    let uploaded: Vec<(&str, u64)> = manifest["entries"]
        .as_array()
        .context("entries")?
        .iter()
        .filter_map(|e| Some((e["path"].as_str()?, e["mode"].as_u64()?)))
        .collect();
    let tracked = [
        (".gitignore", 0o644),
        ("README.md", 0o644),
        ("hello.py", 0o644),
        ("scripts/check.sh", 0o755),
    ];
    assert_eq!(uploaded, tracked, "no .env, no build/: {manifest}");
    Ok(Flow {
        stack,
        work,
        root,
        keys,
        start,
        id,
    })
}

/// `apply` on the completed run: one commit on `loopgate/<short id>` with the tree git itself
/// makes, HEAD, the index and the working tree untouched. Returns the expected tree and the
/// certificate digest.
async fn apply_makes_a_branch(f: &Flow) -> anyhow::Result<(String, String)> {
    let (root, id, start) = (&f.root, &f.id, &f.start);
    let before = repo_state(root)?;
    let branch = format!("loopgate/{}", &id[..8]);
    let out = f.apply(&["--json"]).await?;
    ensure!(out.status.success(), "{}", text(&out));
    let applied: Value = serde_json::from_slice(&out.stdout).context(text(&out))?;
    assert_eq!(
        repo_state(root)?,
        before,
        "HEAD, the index or the working tree changed"
    );
    assert_eq!(git(root, &["rev-parse", "HEAD"])?, *start);
    assert_eq!(git(root, &["rev-parse", &format!("{branch}^")])?, *start);
    let commit = applied["commit"].as_str().context("commit")?;
    assert_eq!(git(root, &["rev-parse", &branch])?, commit);
    let shown = git(root, &["show", &format!("{branch}:hello.py")])?;
    assert_eq!(shown + "\n", GREETING);
    assert_eq!(
        git(root, &["diff", "--name-only", start, &branch])?,
        "hello.py"
    );
    let digest = applied["certificate_digest"].as_str().context("digest")?;
    assert_eq!(f.trailer(root, &branch)?, digest);
    let body = git(root, &["log", "-1", "--format=%B", &branch])?;
    let goal = "Make hello.py print exactly: hello, loopgate";
    assert!(body.contains(goal) && body.contains(id.as_str()), "{body}");
    // The expected tree, made by git itself: the start tree with the fixed hello.py.
    let clone = f.work.path().join("clone");
    git(f.work.path(), &["clone", "-q", "project", "clone"])?;
    git(&clone, &["checkout", "-q", start])?;
    std::fs::write(clone.join("hello.py"), GREETING)?;
    git(&clone, &["add", "hello.py"])?;
    let expected_tree = git(&clone, &["write-tree"])?;
    let tree = git(root, &["rev-parse", &format!("{branch}^{{tree}}")])?;
    assert_eq!(tree, expected_tree);
    // Applying again refuses: the branch exists; no object is written.
    let before = untouched(root)?;
    let out = f.apply(&[]).await?;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("exists already"), "{}", text(&out));
    assert_eq!(untouched(root)?, before);
    Ok((expected_tree, digest.to_string()))
}

/// `apply --patch` and the console's `GET /v1/runs/{id}/patch` both apply with `git am` on the
/// start commit, to the expected tree, with the trailer.
async fn patches_apply_with_git_am(f: &Flow, tree: &str, digest: &str) -> anyhow::Result<()> {
    let before = repo_state(&f.root)?;
    let clone = f.work.path().join("clone");
    let patch = f.work.path().join("run.patch");
    let patch_arg = patch.to_str().context("path")?;
    let out = f.apply(&["--patch", patch_arg]).await?;
    ensure!(out.status.success(), "{}", text(&out));
    assert_eq!(repo_state(&f.root)?, before);
    let served = reqwest::get(format!("{}/v1/runs/{}/patch", f.stack.http, f.id)).await?;
    ensure!(
        served.status().is_success(),
        "patch route: {}",
        served.status()
    );
    let served_patch = f.work.path().join("served.patch");
    std::fs::write(&served_patch, served.text().await?)?;
    for file in [patch.as_path(), served_patch.as_path()] {
        git(&clone, &["checkout", "-q", "-f", &f.start])?;
        git(&clone, &["am", "-q", file.to_str().context("path")?])?;
        assert_eq!(
            git(&clone, &["rev-parse", "HEAD^{tree}"])?,
            tree,
            "{file:?}"
        );
        assert_eq!(git(&clone, &["rev-parse", "HEAD^"])?, f.start, "{file:?}");
        assert_eq!(f.trailer(&clone, "HEAD")?, digest, "{file:?}");
    }
    Ok(())
}

/// What a refused `apply` must leave as it was: every ref, the object store's counts
/// (`git count-objects -v`: loose objects, packs, their sizes), HEAD, the index and the
/// working tree.
fn untouched(root: &Path) -> anyhow::Result<(String, String, BTreeMap<String, Vec<u8>>)> {
    Ok((
        git(root, &["for-each-ref"])?,
        git(root, &["count-objects", "-v"])?,
        repo_state(root)?,
    ))
}

/// `apply RUN --branch NAME` exits 6 naming `check`, and writes nothing into the repository:
/// no ref, no object.
async fn apply_is_refused_for(
    f: &Flow,
    run: &str,
    branch: &str,
    check: &str,
) -> anyhow::Result<()> {
    let before = untouched(&f.root)?;
    let args = ["apply", run, "--key", &f.keys, "--branch", branch];
    let out = loopgate(&f.stack, &f.root, &args).await?;
    assert_eq!(out.status.code(), Some(NOT_VERIFIED), "{}", text(&out));
    assert!(text(&out).contains(check), "{}", text(&out));
    let after = untouched(&f.root)?;
    assert_eq!(after.0, before.0, "apply created a ref");
    assert_eq!(after.1, before.1, "apply wrote objects");
    assert_eq!(after.2, before.2);
    Ok(())
}

/// `apply --branch NAME` on the flow's run exits 6 naming `check`, and writes nothing.
async fn apply_is_refused(f: &Flow, branch: &str, check: &str) -> anyhow::Result<()> {
    apply_is_refused_for(f, &f.id, branch, check).await
}

/// A second run from the repository, not completed (its manager has no reply left): `apply`
/// exits 6 and writes nothing.
async fn an_unfinished_run_is_refused(f: &Flow) -> anyhow::Result<()> {
    let args = ["submit", "task.toml", "--repo", "project", "--json"];
    let out = loopgate(&f.stack, f.work.path(), &args).await?;
    ensure!(out.status.success(), "{}", text(&out));
    let created: Value = serde_json::from_slice(&out.stdout).context(text(&out))?;
    let id = created["id"].as_str().context("run id")?;
    apply_is_refused_for(f, id, "unfinished", "not_completed").await
}

/// An edited certificate (the stored report changed after it was signed), then a tampered
/// blob (hello.py overwritten in the snapshot bucket): `apply` refuses both.
async fn tampering_is_refused(f: &Flow, snapshot: &str) -> anyhow::Result<()> {
    let store = RunStore::connect(&f.stack.redis.url(), Duration::from_secs(5)).await?;
    let stored = store
        .report(&f.id, snapshot)
        .await?
        .context("the stored report")?;
    let mut edited: Value = serde_json::from_str(&stored)?;
    edited["evidence"][0]["exit_code"] = json!(1);
    let (port, reports) = (f.stack.redis.port(), format!("lg:run:{}:reports", f.id));
    redis_hset(port, &reports, snapshot, &edited.to_string()).await?;
    apply_is_refused(f, "edited", "signature").await?;
    redis_hset(port, &reports, snapshot, &stored).await?;

    let manifest = f.stack.get(&format!("/v1/snapshots/{snapshot}")).await?;
    let entry = manifest["entries"]
        .as_array()
        .context("entries")?
        .iter()
        .find(|e| e["path"] == "hello.py")
        .context("hello.py in the final snapshot")?;
    let sha = entry["sha256"].as_str().context("sha256")?;
    let bus = Bus::connect(&f.stack.nats.url(), "loopgate", BusOptions::default()).await?;
    let bucket = bus
        .jetstream()
        .get_object_store(loopgate_protocol::subjects::SNAPSHOT_BUCKET)
        .await?;
    let mut tampered: &[u8] = b"print('hello, l00pgate')\n";
    bucket
        .put(format!("blob/{sha}").as_str(), &mut tampered)
        .await?;
    apply_is_refused(f, "tampered", "blob").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_in_and_a_verified_branch_out() -> anyhow::Result<()> {
    let model = model().await?;
    let f = submit_from_repository(&model).await?;
    let done = f.stack.wait_terminal(&f.id, WAIT).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", f.stack.logs());
    let out = loopgate(&f.stack, f.work.path(), &["status", &f.id]).await?;
    let status = text(&out);
    let origin = format!("started from commit main @ {}", &f.start[..12]);
    assert!(status.contains(&origin), "{status}");
    assert!(
        status.contains(&format!("loopgate apply {}", f.id)),
        "{status}"
    );

    let (tree, digest) = apply_makes_a_branch(&f).await?;
    patches_apply_with_git_am(&f, &tree, &digest).await?;
    let snapshot = done["snapshot"].as_str().context("snapshot")?;
    tampering_is_refused(&f, snapshot).await?;
    an_unfinished_run_is_refused(&f).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_the_start_commit_and_the_way_back() -> anyhow::Result<()> {
    use super::console::{assert_no_page_errors, click, open_console, wait_js, TOKEN};
    let model = model().await?;
    let mut options = StackOptions::new(
        vec![
            Profile::new("mgr", &model.base_url(), "standin-manager"),
            Profile::new("exec", &model.base_url(), "standin-executor"),
        ],
        1,
    );
    options.token = Some(TOKEN.to_string());
    let stack = Stack::start(options).await?;
    let (commit, tree) = ("1a2b3c4d5e6f".repeat(4)[..40].to_string(), "f".repeat(40));
    let body = json!({
        "task": loopgate_common::task::parse_task_file_toml(TASK)?,
        "workspace": {"files": [{"path": "hello.py", "content_b64": "cHJpbnQoJ2hpJykK"}]},
        "origin": {"commit": commit, "tree": tree, "ref_name": "refs/heads/main"},
    });
    let (status, created) = stack.post_raw("/v1/runs", &body).await?;
    ensure!(status == 201, "{status} {created}");
    let id = created["id"].as_str().context("run id")?.to_string();
    let done = stack.wait_terminal(&id, WAIT).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());

    let mut s = open_console(&stack.http, &format!("#/runs/{id}")).await?;
    let origin = wait_js(
        &mut s,
        "document.getElementById('run-origin')?.textContent",
        "the start commit",
    )
    .await?;
    assert_eq!(origin, json!(format!("main @ {}", &commit[..12])));
    let command = wait_js(
        &mut s,
        "document.getElementById('apply-command')?.textContent",
        "the apply command",
    )
    .await?;
    assert_eq!(command, json!(format!("loopgate apply {id} --repo PATH")));
    click(&mut s, "Download patch").await?;
    // What the button fetches, with the tab's token: the mbox `git am` reads.
    let fetched = format!(
        "fetch('/v1/runs/{id}/patch', {{headers: {{Authorization: 'Bearer ' + sessionStorage.getItem('loopgate.token')}}}}).then((r) => r.text())"
    );
    let patch = s.evaluate(&fetched).await?;
    let patch = patch.as_str().context("the patch text")?;
    assert!(
        patch.starts_with("From 0000000000000000000000000000000000000000 "),
        "{patch}"
    );
    assert!(patch.contains("+print('hello, loopgate')"), "{patch}");
    assert_no_page_errors(&s);
    Ok(())
}
