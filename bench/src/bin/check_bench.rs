//! check-bench: where a sandboxed check's time goes, and what layered copies save. On this
//! host's probed sandbox (as the auditor would get it), for a small and a large generated tree,
//! the median wall time of one `true` check run
//! - as a plain `sh -c true` (no sandbox, no copy): the floor;
//! - under the sandbox in an existing directory (the bubblewrap launch alone);
//! - through `run_in_scratch_copy` with a full copy of the tree (what every audit did before);
//! - the same with a layered copy over the tree prepared once (`CheckBase`), whose preparation
//!   (once per audit) is reported separately.
//!
//! `cargo run --release -p loopgate-bench --bin check-bench -- [runs] [large_files]`
#![allow(clippy::print_stdout)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use loopgate_checks::{
    probe, run_check, run_in_scratch_copy, CheckBase, CheckSpec, CopySource, Sandbox,
    SandboxSettings, ScratchCheck, DEFAULT_CHECK_PATH,
};

fn median(mut samples: Vec<Duration>) -> f64 {
    samples.sort_unstable();
    samples
        .get(samples.len() / 2)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// `files` files of `size` bytes, 50 to a directory.
fn generate(dir: &Path, files: usize, size: usize) -> anyhow::Result<()> {
    for i in 0..files {
        let sub = dir.join(format!("d{}", i / 50));
        std::fs::create_dir_all(&sub)?;
        let body: Vec<u8> = (0..size).map(|b| (b * 31 + i) as u8).collect();
        std::fs::write(sub.join(format!("f{i}.txt")), body)?;
    }
    Ok(())
}

async fn direct(sandbox: &Sandbox, root: &Path, runs: usize) -> anyhow::Result<f64> {
    let (ws, home, status) = (root.join("ws"), root.join("home"), root.join("status"));
    let mut samples = Vec::new();
    for _ in 0..runs {
        for dir in [&ws, &home] {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&status, b"")?;
        if let Some((uid, gid)) = sandbox.run_as {
            for path in [&ws, &home, &status] {
                std::os::unix::fs::chown(path, Some(uid), Some(gid))?;
            }
        }
        let started = Instant::now();
        let run = run_check(&CheckSpec {
            command: "true",
            cwd: &ws,
            home: &home,
            path_var: DEFAULT_CHECK_PATH,
            timeout: Duration::from_secs(30),
            sandbox,
            status_file: &status,
            extra_env: &[],
        })
        .await;
        samples.push(started.elapsed());
        anyhow::ensure!(run.exit_code() == Some(0), "{:?}", run.end);
    }
    Ok(median(samples))
}

async fn scratch(
    sandbox: &Sandbox,
    scratch: &Path,
    source: &CopySource,
    runs: usize,
) -> anyhow::Result<f64> {
    let mut samples = Vec::new();
    for index in 0..runs {
        let check = ScratchCheck {
            scratch,
            index,
            command: "true",
            timeout: Duration::from_secs(60),
            path_var: DEFAULT_CHECK_PATH,
            sandbox,
            extra_env: &[],
        };
        let started = Instant::now();
        let run = run_in_scratch_copy(&check, source).await?;
        samples.push(started.elapsed());
        anyhow::ensure!(run.exit_code() == Some(0), "{:?} {:?}", run.end, run.output);
    }
    Ok(median(samples))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(15);
    let large: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(2000);
    let root = tempfile::Builder::new()
        .prefix("check-bench-")
        .tempdir_in("/var/tmp")?;
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o711))?;
    let sandbox = probe(&SandboxSettings::default(), root.path()).await?;
    println!(
        "sandbox: bubblewrap {}, run as {:?}, layered copies {}; {runs} runs each, medians",
        sandbox.bwrap.is_some(),
        sandbox.run_as,
        sandbox.layers()
    );
    let plain = Sandbox::unisolated("bench floor");
    let floor = direct(&plain, &root.path().join("floor"), runs).await?;
    let launch = direct(&sandbox, &root.path().join("launch"), runs).await?;
    println!("plain sh -c true: {floor:.2} ms; sandboxed launch alone: {launch:.2} ms");
    println!("| tree | full copy per check | layered copy per check | layer prep once per audit |");
    println!("|---|---|---|---|");
    for (name, files, size) in [("10 files", 10, 1024), ("large", large, 8 * 1024)] {
        let tree = root.path().join(format!("tree-{files}"));
        generate(&tree, files, size)?;
        let scratch_dir = root.path().join(format!("scratch-{files}"));
        std::fs::create_dir(&scratch_dir)?;
        let copied = scratch(
            &sandbox,
            &scratch_dir,
            &CopySource::Tree(tree.clone()),
            runs,
        )
        .await?;
        let started = Instant::now();
        let base = CheckBase::prepare(&tree, &sandbox)?;
        let prep = started.elapsed().as_secs_f64() * 1000.0;
        let layered = match base {
            Some(base) => {
                let ms = scratch(&sandbox, &scratch_dir, &CopySource::Layered(base), runs).await?;
                format!("{ms:.2} ms")
            }
            None => "n/a".to_string(),
        };
        let label = if files == 10 {
            name.to_string()
        } else {
            format!("{files} files x {} KiB", size / 1024)
        };
        println!("| {label} | {copied:.2} ms | {layered} | {prep:.2} ms |");
    }
    Ok(())
}
