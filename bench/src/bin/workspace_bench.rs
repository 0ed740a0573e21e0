//! Issue 19 benchmark: warm workspaces against git on real trees (prints tables; not a test).
//!
//! Trees: the unpacked crate sources of the cargo registry (`~/.cargo/registry/src`, copied;
//! nobody here wrote them) and the generated source-like tree of `snapshot_bench`. For each, in
//! one process and one run: a 1-file change, a 100-file change, and a 1-file change with a
//! churning ignored build directory (`target/`, rewritten every round). Each measured:
//! - freeze (stat cache from the materialize/previous freeze) vs `git add -A && git commit`;
//! - warm materialize of the change (kept tree + manifest difference) vs `git checkout` of the
//!   same commit in the existing worktree;
//! - cold materialize (empty cache, empty directory) vs `git worktree add`;
//! - bytes uploaded vs bytes changed (sizes of the changed files);
//! - where this process may mount overlays (root), the same change on an overlay episode: the
//!   freeze from the upper layer vs the same `git commit`, and the warm materialize of the
//!   change (the base's sealed tree brought to it, mounted) vs the same `git checkout`.
//!
//! `--overlay-loop N` (root) measures only N overlay rounds in a row on the registry tree
//! instead: the mean warm materialize and freeze per round.
//!
//! `cargo run --release -p loopgate-bench --bin workspace-bench [-- --json PATH]
//!  [--registry DIR] [--files N] [--mb N] [--churn-files N] [--overlay-loop N]`

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use loopgate_bench::{generate_tree, human_bytes, Rng, Table};
use loopgate_snapshot::stat_cache::{wall_clock_ns, RACY_WINDOW};
use loopgate_snapshot::{FreezeRules, SnapshotStore, WorkspaceCache};
use loopgate_test_support::NatsServer;
use loopgate_transport::{Bus, BusOptions};
use serde_json::{json, Value};

const SEED: u64 = 0x1919_0019;
const CACHE_BYTES: u64 = 8 * 1024 * 1024 * 1024;

fn git(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
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
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn timed<T>(f: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<(Duration, T)> {
    let started = Instant::now();
    let value = f()?;
    Ok((started.elapsed(), value))
}

/// Copy regular files (no symlinks, no nested .gitignore/.git, UTF-8 names) from `from`.
fn copy_real_tree(from: &Path, to: &Path) -> anyhow::Result<usize> {
    let mut files = 0;
    for entry in walkdir::WalkDir::new(from).follow_links(false) {
        let entry = entry?;
        let rel = entry.path().strip_prefix(from)?;
        let Some(rel_str) = rel.to_str() else {
            continue;
        };
        let name = entry.file_name().to_string_lossy();
        if entry.file_type().is_dir() {
            continue;
        }
        if !entry.file_type().is_file()
            || name == ".gitignore"
            || rel_str.split('/').any(|c| {
                matches!(
                    c,
                    ".git" | "target" | "node_modules" | "__pycache__" | ".venv" | ".loopgate"
                )
            })
        {
            continue;
        }
        let dest = to.join(rel);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::copy(entry.path(), &dest)?;
        files += 1;
    }
    Ok(files)
}

fn tracked_files(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = walkdir::WalkDir::new(root)
        .into_iter()
        .filter_entry(|e| {
            let n = e.file_name().to_string_lossy();
            n != ".git" && n != "target"
        })
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| e.path().strip_prefix(root).ok().map(Path::to_path_buf))
        .filter(|p| p.as_os_str() != ".gitignore")
        .collect();
    files.sort();
    files
}

/// Append a line to each of `rels` under every root in `roots`; bytes of the changed files.
fn change(roots: &[&Path], rels: &[PathBuf], tag: &str) -> anyhow::Result<u64> {
    let mut bytes = 0;
    for root in roots {
        bytes = 0;
        for rel in rels {
            let path = root.join(rel);
            let mut content = std::fs::read(&path)?;
            content.extend_from_slice(format!("\n// changed by the benchmark: {tag}\n").as_bytes());
            std::fs::write(&path, &content)?;
            bytes += content.len() as u64;
        }
    }
    Ok(bytes)
}

/// (Re)write the ignored build dir: `files` files of ~8 KiB.
fn churn(roots: &[&Path], files: usize, round: u64) -> anyhow::Result<()> {
    for root in roots {
        let mut rng = Rng::new(SEED + round);
        for i in 0..files {
            let path = root.join(format!("target/debug/deps/obj{:03}/unit{i}.o", i % 64));
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let content: Vec<u8> = (0..8192).map(|_| rng.next_u64() as u8).collect();
            std::fs::write(path, content)?;
        }
    }
    Ok(())
}

async fn wait_settled() {
    // Files written just before a stat record are racy and re-hashed once; benchmarks measure
    // the steady state, so let the clock pass the window first.
    let until = wall_clock_ns() + 2 * RACY_WINDOW.as_nanos() as i128;
    while wall_clock_ns() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `/proc/loadavg`'s first three fields (other work on the machine skews the numbers).
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

fn ratio(a: Duration, b: Duration) -> f64 {
    ((a.as_secs_f64() / b.as_secs_f64().max(1e-9)) * 100.0).round() / 100.0
}

struct Bench {
    store: SnapshotStore,
    work: PathBuf,
    churn_files: usize,
    /// Overlay episodes can be measured here (the mount probe passed).
    overlays: bool,
}

/// Where one scenario's overlay round runs: its own cache (of sealed trees), the base.
struct OverlayRound<'a> {
    dir: &'a Path,
    cache: &'a WorkspaceCache,
    rules: &'a FreezeRules,
    base: &'a str,
}

impl Bench {
    async fn tree(&self, name: &str, source: &Path) -> anyhow::Result<Vec<Value>> {
        let root = self.work.join(name);
        let repo = root.join("repo");
        std::fs::create_dir_all(&repo)?;
        let files = copy_real_tree(source, &repo)?;
        std::fs::write(repo.join(".gitignore"), "target/\n")?;
        eprintln!("[{name}] {files} files; first commit and first freeze");
        git(&repo, &["init", "-q"])?;
        git(&repo, &["config", "core.autocrlf", "false"])?;
        git(&repo, &["add", "-A"])?;
        git(&repo, &["commit", "-q", "-m", "a"])?;
        let rules = FreezeRules::with_ignores(&[".gitignore"]);
        let seed = self.store.freeze(&repo, &rules).await?;
        let cache = WorkspaceCache::open(&root.join("cache"), CACHE_BYTES)?;
        let ws = root.join("ws");
        self.store.materialize_warm(&seed.id, &ws, &cache).await?;
        wait_settled().await;
        self.store.freeze_warm(&ws, &rules, &cache).await?;
        let overlays = self.overlays.then(|| root.join("overlay"));
        let ov_cache = match &overlays {
            Some(dir) => Some(WorkspaceCache::open(&dir.join("cache"), CACHE_BYTES)?),
            None => None,
        };
        let paths = tracked_files(&repo);
        let mut rows = Vec::new();
        let mut rng = Rng::new(SEED);
        for (scenario, count, with_churn) in [
            ("1-file change", 1usize, false),
            ("100-file change", 100, false),
            ("1-file change + churning target/", 1, true),
        ] {
            let base_commit = git(&repo, &["rev-parse", "HEAD"])?;
            let base_id = self.store.freeze_warm(&ws, &rules, &cache).await?.id;
            if with_churn {
                churn(&[&repo, &ws], self.churn_files, 1)?;
                // git sees the ignored dir once before the measured round, as loopgate does.
                git(&repo, &["status", "--porcelain"])?;
                self.store.freeze_warm(&ws, &rules, &cache).await?;
            }
            wait_settled().await;
            let chosen: Vec<PathBuf> = (0..count)
                .map(|_| paths[rng.below(paths.len() as u64) as usize].clone())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            let changed_bytes = change(&[&repo, &ws], &chosen, scenario)?;
            if with_churn {
                churn(&[&repo, &ws], self.churn_files, 2)?;
            }
            // Freeze vs commit.
            let started = Instant::now();
            let frozen = self.store.freeze_warm(&ws, &rules, &cache).await?;
            let freeze_took = started.elapsed();
            let (commit_took, _) = timed(|| {
                git(&repo, &["add", "-A"])?;
                git(&repo, &["commit", "-q", "-m", scenario])
            })?;
            let change_commit = git(&repo, &["rev-parse", "HEAD"])?;
            // Warm materialize base -> change vs git checkout in the existing worktree: the
            // loopgate tree is put back to the base first (itself a warm materialize, change ->
            // base) and git's worktree too.
            assert!(cache.check_in(&ws).await?);
            let back = root.join("ws-back");
            let started = Instant::now();
            self.store.materialize_warm(&base_id, &back, &cache).await?;
            let revert_took = started.elapsed();
            assert!(cache.check_in(&back).await?);
            let (git_revert_took, _) = timed(|| git(&repo, &["checkout", "-q", &base_commit]))?;
            if with_churn {
                churn(&[&repo], self.churn_files, 3)?;
            }
            wait_settled().await;
            let started = Instant::now();
            let (_, warm) = self.store.materialize_warm(&frozen.id, &ws, &cache).await?;
            let warm_took = started.elapsed();
            let (checkout_took, _) = timed(|| git(&repo, &["checkout", "-q", &change_commit]))?;
            git(&repo, &["checkout", "-q", "-B", "main", &change_commit])?;
            // Cold: an empty cache into an empty directory vs git worktree add.
            let cold_cache = WorkspaceCache::open(&root.join("cold-cache"), CACHE_BYTES)?;
            let cold_dir = root.join("cold");
            let started = Instant::now();
            self.store
                .materialize_warm(&frozen.id, &cold_dir, &cold_cache)
                .await?;
            let cold_took = started.elapsed();
            let wt = root.join("wt");
            let (worktree_took, _) = timed(|| {
                git(
                    &repo,
                    &[
                        "worktree",
                        "add",
                        "-q",
                        "--detach",
                        wt.to_str().unwrap_or("wt"),
                        &change_commit,
                    ],
                )
            })?;
            git(
                &repo,
                &["worktree", "remove", "--force", wt.to_str().unwrap_or("wt")],
            )?;
            std::fs::remove_dir_all(&cold_dir)?;
            std::fs::remove_dir_all(root.join("cold-cache"))?;
            let uploaded = frozen.bytes_uploaded + frozen.manifest_bytes_uploaded;
            let overlay = match (&overlays, &ov_cache) {
                (Some(dir), Some(ov_cache)) => {
                    let churn_files = with_churn.then_some(self.churn_files);
                    let round = OverlayRound {
                        dir,
                        cache: ov_cache,
                        rules: &rules,
                        base: &base_id,
                    };
                    self.overlay_round(&round, &chosen, scenario, churn_files, &frozen.id)
                        .await?
                }
                _ => json!({}),
            };
            eprintln!("[{name}] {scenario}: overlay {overlay}");
            eprintln!("[{name}] {scenario}: freeze {freeze_took:?} vs commit {commit_took:?}; warm {warm_took:?} vs checkout {checkout_took:?}; cold {cold_took:?} vs worktree add {worktree_took:?}; {warm:?}");
            rows.push(json!({
                "tree": name, "files": files, "scenario": scenario,
                "files_changed": chosen.len(), "bytes_changed": changed_bytes,
                "freeze_ms": ms(freeze_took), "git_commit_ms": ms(commit_took),
                "files_hashed": frozen.files_hashed,
                "bytes_uploaded": uploaded, "blob_bytes_uploaded": frozen.bytes_uploaded,
                "manifest_bytes_uploaded": frozen.manifest_bytes_uploaded,
                "warm_ms": ms(warm_took), "git_checkout_ms": ms(checkout_took),
                "warm_revert_ms": ms(revert_took), "git_checkout_revert_ms": ms(git_revert_took),
                "warm_files_written": warm.files_written, "warm_files_rehashed": warm.files_rehashed,
                "cold_ms": ms(cold_took), "git_worktree_add_ms": ms(worktree_took),
                "freeze_vs_commit": ratio(freeze_took, commit_took),
                "warm_vs_checkout": ratio(warm_took, checkout_took),
                "cold_vs_worktree_add": ratio(cold_took, worktree_took),
                "uploaded_vs_changed": ((uploaded as f64 / changed_bytes.max(1) as f64) * 100.0).round() / 100.0,
                "overlay": overlay,
            }));
        }
        let _ = std::fs::remove_dir_all(&root);
        Ok(rows)
    }
}

impl Bench {
    /// The same change on an overlay episode: mount the base (its tree already held, as an
    /// executor holds the base of its next round), change the same files (and churn the same
    /// ignored dir), freeze from the upper layer (timed), unmount; then the warm materialize of
    /// the change (timed): the base's sealed tree brought to it by the manifest difference and
    /// mounted. Checks that the overlay freeze gives the copy path's snapshot.
    async fn overlay_round(
        &self,
        round: &OverlayRound<'_>,
        chosen: &[PathBuf],
        scenario: &str,
        churn_files: Option<usize>,
        expected: &str,
    ) -> anyhow::Result<Value> {
        let merged = round.dir.join("ws");
        let layers = round.dir.join("layers");
        std::fs::create_dir_all(&merged)?;
        let (ws, held) = self
            .store
            .materialize_overlay(round.base, &merged, &layers, round.cache, None)
            .await?;
        if let Some(files) = churn_files {
            churn(&[&merged], files, 2)?;
        }
        change(&[&merged], chosen, scenario)?;
        let started = Instant::now();
        let frozen = self
            .store
            .freeze_overlay(&ws, round.rules, round.cache)
            .await?;
        let freeze_took = started.elapsed();
        ws.close().await?;
        if frozen.id != expected {
            bail!(
                "overlay freeze {} differs from the copy path's {expected}",
                frozen.id
            );
        }
        let started = Instant::now();
        let (next, warm) = self
            .store
            .materialize_overlay(&frozen.id, &merged, &layers, round.cache, None)
            .await?;
        let warm_took = started.elapsed();
        next.close().await?;
        Ok(json!({
            "freeze_ms": ms(freeze_took), "files_hashed": frozen.files_hashed,
            "warm_ms": ms(warm_took), "warm_files_written": warm.files_written,
            "warm_reused_tree": warm.reused_tree, "base_was_held": held.reused_tree,
        }))
    }
}

impl Bench {
    /// `--overlay-loop N`: N overlay rounds in a row on the registry tree, each the warm
    /// materialize of the last round's snapshot (its base's sealed tree brought to it), a
    /// 1-file change and its freeze from the upper layer; prints the mean of each. A steady
    /// figure to profile (`perf record`) rather than the tables' single rounds.
    async fn overlay_loop(&self, registry: &Path, rounds: usize) -> anyhow::Result<()> {
        if !self.overlays {
            bail!("--overlay-loop needs overlay mounts here (see the probe's reason above)");
        }
        if !registry.is_dir() {
            bail!(
                "--overlay-loop: no {} (run cargo fetch)",
                registry.display()
            );
        }
        let root = self.work.join("loop");
        let repo = root.join("repo");
        std::fs::create_dir_all(&repo)?;
        let files = copy_real_tree(registry, &repo)?;
        let rules = FreezeRules::with_ignores(&[".gitignore"]);
        let seed = self.store.freeze(&repo, &rules).await?;
        let paths = tracked_files(&repo);
        let cache = WorkspaceCache::open(&root.join("cache"), CACHE_BYTES)?;
        let (merged, layers) = (root.join("ws"), root.join("layers"));
        std::fs::create_dir_all(&merged)?;
        let (ws, _) = self
            .store
            .materialize_overlay(&seed.id, &merged, &layers, &cache, None)
            .await?;
        ws.close().await?;
        let mut current = seed.id;
        let mut rng = Rng::new(SEED);
        let (mut warm, mut freeze) = (Duration::ZERO, Duration::ZERO);
        for round in 0..rounds {
            let started = Instant::now();
            let (ws, _) = self
                .store
                .materialize_overlay(&current, &merged, &layers, &cache, None)
                .await?;
            warm += started.elapsed();
            let chosen = [paths[rng.below(paths.len() as u64) as usize].clone()];
            change(&[&merged], &chosen, &format!("round {round}"))?;
            let started = Instant::now();
            let frozen = self.store.freeze_overlay(&ws, &rules, &cache).await?;
            freeze += started.elapsed();
            ws.close().await?;
            current = frozen.id;
        }
        let per_round = |total: Duration| ms(total) / rounds as f64;
        println!(
            "overlay loop on {} ({files} files), {rounds} rounds: warm materialize {:.2} ms, \
             freeze {:.2} ms per round",
            registry.display(),
            per_round(warm),
            per_round(freeze)
        );
        Ok(())
    }
}

/// The overlay rows: the same git figures, against overlay episodes.
fn render_overlay(rows: &[Value]) -> String {
    let mut table = Table::new(&[
        "tree / scenario",
        "overlay freeze / git commit",
        "overlay warm / git checkout",
        "files hashed",
    ]);
    for r in rows
        .iter()
        .filter(|r| r["overlay"]["freeze_ms"].is_number())
    {
        let o = &r["overlay"];
        let pair = |a: &Value, b: &Value| {
            let x = a.as_f64().unwrap_or(0.0) / b.as_f64().unwrap_or(1.0).max(1e-9);
            format!("{a} / {b} ms = {:.2}x", x)
        };
        table.row(vec![
            format!(
                "{} ({} files): {}",
                r["tree"].as_str().unwrap_or(""),
                r["files"],
                r["scenario"].as_str().unwrap_or("")
            ),
            pair(&o["freeze_ms"], &r["git_commit_ms"]),
            pair(&o["warm_ms"], &r["git_checkout_ms"]),
            o["files_hashed"].to_string(),
        ]);
    }
    table.render()
}

fn render(rows: &[Value]) -> String {
    let mut table = Table::new(&[
        "tree / scenario",
        "freeze / git commit",
        "warm / git checkout",
        "cold / git worktree add",
        "uploaded / changed",
    ]);
    for r in rows {
        let pair = |a: &str, b: &str, x: &str| format!("{} / {} ms = {}x", r[a], r[b], r[x]);
        table.row(vec![
            format!(
                "{} ({} files): {}",
                r["tree"].as_str().unwrap_or(""),
                r["files"],
                r["scenario"].as_str().unwrap_or("")
            ),
            pair("freeze_ms", "git_commit_ms", "freeze_vs_commit"),
            pair("warm_ms", "git_checkout_ms", "warm_vs_checkout"),
            pair("cold_ms", "git_worktree_add_ms", "cold_vs_worktree_add"),
            format!(
                "{} / {} = {}x",
                human_bytes(r["bytes_uploaded"].as_u64().unwrap_or(0)),
                human_bytes(r["bytes_changed"].as_u64().unwrap_or(0)),
                r["uploaded_vs_changed"]
            ),
        ]);
    }
    table.render()
}

const USAGE: &str = "usage: workspace-bench [--json FILE] [--registry DIR] [--files N] [--mb N] \
[--churn-files N] [--overlay-loop ROUNDS]
  --json FILE            also write the results as JSON
  --registry DIR         the real tree to measure (default ~/.cargo/registry/src)
  --files N, --mb N      the generated tree's size (default 10000 files, 100 MB)
  --churn-files N        files of the churning target/ (default 2000)
  --overlay-loop ROUNDS  only run this many overlay rounds on the registry tree (0: off)";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut json_out: Option<PathBuf> = None;
    let home = std::env::var("HOME").unwrap_or_default();
    let mut registry = PathBuf::from(home).join(".cargo/registry/src");
    let (mut files, mut mb, mut churn_files) = (10_000usize, 100u64, 2000usize);
    let mut overlay_loop = 0usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().context("missing value");
        match arg.as_str() {
            "--json" => json_out = Some(value()?.into()),
            "--registry" => registry = value()?.into(),
            "--files" => files = value()?.parse()?,
            "--mb" => mb = value()?.parse()?,
            "--churn-files" => churn_files = value()?.parse()?,
            "--overlay-loop" => overlay_loop = value()?.parse()?,
            "--help" | "-h" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => bail!("unknown argument {other}\n{USAGE}"),
        }
    }
    let nats = NatsServer::start().await?;
    let options = BusOptions {
        request_timeout: Duration::from_secs(30),
        ..BusOptions::default()
    };
    let bus = Bus::connect(&nats.url(), "loopgate", options).await?;
    bus.ensure_topology().await?;
    let work = tempfile::tempdir()?;
    let bench = Bench {
        store: SnapshotStore::from_jetstream(bus.jetstream(), bus.request_timeout()).await?,
        work: work.path().to_path_buf(),
        churn_files,
        overlays: match loopgate_snapshot::overlay::probe(work.path()) {
            Ok(()) => true,
            Err(why) => {
                eprintln!("overlay episodes not measured: {why}");
                false
            }
        },
    };
    if overlay_loop > 0 {
        return bench.overlay_loop(&registry, overlay_loop).await;
    }
    let load_before = loadavg();
    let generated = work.path().join("generated-src");
    generate_tree(&generated, files, mb * 1024 * 1024, SEED)?;
    let mut rows = Vec::new();
    if registry.is_dir() {
        rows.extend(bench.tree("cargo-registry", &registry).await?);
    } else {
        eprintln!("no {} (run cargo fetch): skipped", registry.display());
    }
    rows.extend(bench.tree("generated", &generated).await?);
    let load_after = loadavg();
    println!(
        "\nWarm workspaces vs git (one run, one process; nats-server on loopback; load average \
         {load_before} before, {load_after} after)\n"
    );
    println!("{}", render(&rows));
    if bench.overlays {
        println!("\nOverlay episodes (the same changes; the base mounted over a held tree)\n");
        println!("{}", render_overlay(&rows));
    }
    if let Some(path) = json_out {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let doc = json!({"bench": "workspace", "churn_files": churn_files,
            "loadavg_before": load_before, "loadavg_after": load_after, "rows": rows});
        std::fs::write(&path, serde_json::to_string_pretty(&doc)? + "\n")?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
