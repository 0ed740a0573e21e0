//! Snapshot benchmark (prints a table; not a test).
//!
//! One generated tree (default 10,000 files, ~100 MB, source-like text), one real nats-server.
//! Freeze it, commit it with git; change one file; then measure, on that same tree:
//! - loopgate's second freeze (stat cache from the first freeze: re-hashes and uploads only
//!   what changed, plus the manifest pages that changed),
//! - `git add -A && git commit` (bytes = new objects written to .git/objects),
//! - `tar` of the whole tree uploaded as one object to the same object store.
//!
//! Then change another file and freeze from a cold process (no stat cache: every file
//! re-hashed and looked up in the store; still only what changed is uploaded).
//!
//! `cargo run --release -p loopgate-bench --bin snapshot_bench [-- FILES TOTAL_MB] [--json PATH]`
//!
//! `--json PATH` also writes the numbers there (read by `bench-report`).

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use loopgate_bench::{dir_bytes, generate_tree, human_bytes, millis, Table};
use loopgate_snapshot::{FreezeOutcome, FreezeRules, SnapshotStore, StatCache};
use loopgate_test_support::NatsServer;
use loopgate_transport::{Bus, BusOptions};
use serde_json::json;

const SEED: u64 = 0x05ee_d100_941e;

fn git(dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@loopgate.invalid")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@loopgate.invalid")
        .output()
        .context("running git")?;
    if !out.status.success() {
        bail!("git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

/// `git add -A && git commit`: time, and bytes of objects it added to .git/objects.
fn git_commit(dir: &Path, message: &str) -> anyhow::Result<(Duration, u64)> {
    let objects = dir.join(".git/objects");
    let before = dir_bytes(&objects).unwrap_or(0);
    let started = Instant::now();
    git(dir, &["add", "-A"])?;
    git(dir, &["commit", "-q", "-m", message])?;
    let took = started.elapsed();
    Ok((took, dir_bytes(&objects)?.saturating_sub(before)))
}

/// tar the tree (without .git) and upload the archive as one object: time and bytes.
async fn tar_and_upload(bus: &Bus, dir: &Path) -> anyhow::Result<(Duration, u64)> {
    let store = bus
        .jetstream()
        .get_object_store(loopgate_protocol::subjects::SNAPSHOT_BUCKET)
        .await?;
    let started = Instant::now();
    let out = Command::new("tar")
        .args(["--exclude=.git", "-cf", "-", "."])
        .current_dir(dir)
        .output()
        .context("running tar")?;
    if !out.status.success() {
        bail!("tar: {}", String::from_utf8_lossy(&out.stderr));
    }
    let mut reader: &[u8] = &out.stdout;
    store
        .put("bench/workspace.tar", &mut reader)
        .await
        .map_err(|e| anyhow::anyhow!("uploading the tar: {e}"))?;
    Ok((started.elapsed(), out.stdout.len() as u64))
}

async fn timed_freeze(
    store: &SnapshotStore,
    dir: &Path,
    cache: &mut StatCache,
) -> anyhow::Result<(Duration, FreezeOutcome)> {
    let started = Instant::now();
    let outcome = store
        .freeze_cached(dir, &FreezeRules::default(), cache)
        .await?;
    Ok((started.elapsed(), outcome))
}

fn loopgate_row(label: &str, took: Duration, outcome: &FreezeOutcome) -> Vec<String> {
    vec![
        label.to_string(),
        millis(took),
        human_bytes(outcome.bytes_uploaded + outcome.manifest_bytes_uploaded),
        format!(
            "{} blob(s) {} + manifest {}; {} file(s) hashed",
            outcome.blobs_uploaded,
            human_bytes(outcome.bytes_uploaded),
            human_bytes(outcome.manifest_bytes_uploaded),
            outcome.files_hashed
        ),
    ]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut json_out: Option<std::path::PathBuf> = None;
    let mut positional = Vec::new();
    let mut raw = std::env::args().skip(1);
    while let Some(arg) = raw.next() {
        if arg == "--json" {
            json_out = Some(raw.next().context("--json needs a path")?.into());
        } else {
            positional.push(arg);
        }
    }
    let mut args = positional.into_iter();
    let files: usize = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(10_000);
    let total_mb: u64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(100);

    let work = tempfile::tempdir()?;
    let tree = work.path().join("tree");
    eprintln!(
        "generating {files} files, ~{total_mb} MB under {}",
        tree.display()
    );
    let paths = generate_tree(&tree, files, total_mb * 1024 * 1024, SEED)?;
    let tree_bytes = dir_bytes(&tree)?;

    let nats = NatsServer::start().await?;
    let options = BusOptions {
        request_timeout: Duration::from_secs(30),
        ..BusOptions::default()
    };
    let bus = Bus::connect(&nats.url(), "loopgate", options).await?;
    bus.ensure_topology().await?;
    let store = SnapshotStore::from_jetstream(bus.jetstream(), bus.request_timeout()).await?;

    eprintln!("first freeze and first commit");
    let mut cache = StatCache::new();
    let (first_took, first) = timed_freeze(&store, &tree, &mut cache).await?;
    git(&tree, &["init", "-q"])?;
    let (git_first_took, git_first_bytes) = git_commit(&tree, "first")?;

    // Change one file (append a line), as one round of an agent might.
    let victim = tree.join(&paths[paths.len() / 2]);
    let mut content = std::fs::read(&victim)?;
    content.extend_from_slice(b"let changed_by_the_benchmark = 1;\n");
    std::fs::write(&victim, &content)?;

    eprintln!("second freeze (stat cache), second commit, tar + upload");
    let (second_took, second) = timed_freeze(&store, &tree, &mut cache).await?;
    let (git_took, git_bytes) = git_commit(&tree, "second")?;
    let (tar_took, tar_bytes) = tar_and_upload(&bus, &tree).await?;

    eprintln!("another one-file change, frozen by a cold process");
    let other = tree.join(&paths[paths.len() / 3]);
    let mut content = std::fs::read(&other)?;
    content.extend_from_slice(b"let changed_by_the_benchmark = 2;\n");
    std::fs::write(&other, &content)?;
    let (cold_took, cold) = timed_freeze(&store, &tree, &mut StatCache::new()).await?;

    println!(
        "\nSnapshot benchmark: {files} files, {} of source-like text; one file changed \
         (+{} bytes). nats-server {} on loopback, same machine.\n",
        human_bytes(tree_bytes),
        b"let changed_by_the_benchmark = 1;\n".len(),
        nats.url()
    );
    let mut table = Table::new(&[
        "second snapshot, one file changed",
        "time",
        "bytes uploaded / written",
        "detail",
    ]);
    table.row(loopgate_row(
        "loopgate freeze (stat cache)",
        second_took,
        &second,
    ));
    table.row(vec![
        "git add -A && git commit".into(),
        millis(git_took),
        human_bytes(git_bytes),
        "new objects in .git/objects (zlib)".into(),
    ]);
    table.row(vec![
        "tar + upload whole tree".into(),
        millis(tar_took),
        human_bytes(tar_bytes),
        "one object in the same bucket".into(),
    ]);
    table.row(loopgate_row(
        "loopgate freeze, cold process (next change)",
        cold_took,
        &cold,
    ));
    println!("{}", table.render());
    let mut reference = Table::new(&["first snapshot (reference)", "time", "bytes", "detail"]);
    reference.row(loopgate_row("loopgate freeze", first_took, &first));
    reference.row(vec![
        "git add -A && git commit".into(),
        millis(git_first_took),
        human_bytes(git_first_bytes),
        "objects in .git/objects".into(),
    ]);
    println!("{}", reference.render());
    if let Some(path) = json_out {
        let freeze = |label: &str, took: Duration, o: &FreezeOutcome| {
            json!({"label": label, "ms": ms(took), "bytes": o.bytes_uploaded + o.manifest_bytes_uploaded,
                "blobs_uploaded": o.blobs_uploaded, "manifest_bytes": o.manifest_bytes_uploaded,
                "files_hashed": o.files_hashed})
        };
        let other = |label: &str, took: Duration, bytes: u64| json!({"label": label, "ms": ms(took), "bytes": bytes});
        let doc = json!({
            "bench": "snapshot",
            "files": files,
            "tree_bytes": tree_bytes,
            "changed_bytes": b"let changed_by_the_benchmark = 1;\n".len(),
            "second_snapshot": [
                freeze("loopgate freeze (stat cache)", second_took, &second),
                other("git add -A && git commit", git_took, git_bytes),
                other("tar + upload whole tree", tar_took, tar_bytes),
                freeze("loopgate freeze, cold process (next change)", cold_took, &cold),
            ],
            "first_snapshot": [
                freeze("loopgate freeze", first_took, &first),
                other("git add -A && git commit", git_first_took, git_first_bytes),
            ],
        });
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, serde_json::to_string_pretty(&doc)? + "\n")?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

fn ms(took: Duration) -> f64 {
    (took.as_secs_f64() * 1e6).round() / 1e3
}
