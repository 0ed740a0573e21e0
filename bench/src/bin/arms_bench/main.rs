//! Arms benchmark (not a test): the public suite under `examples/suite/` on two arms with the
//! same local model and the same token budget — (a) single-shot: one executor episode, the
//! executor's own `finish` is the claim; (b) loopgate: the full loop, the harness's `completed`
//! is the claim. Each result's `passes` comes from the bench running every acceptance check
//! itself on the final snapshot. Writes `<out>/arms-<size>.json` after every task and prints a
//! table with solve rate, false-completion rate and tokens per solved task per arm.
//!
//! ```text
//! cargo build --release -p loopgate-manager -p loopgate-executor -p loopgate-auditor --bins
//! cargo build --release -p loopgate-tests --bin arms-bench
//! $CARGO_TARGET_DIR/release/arms-bench --model 1.5b --out target/bench
//!     [--tasks a,b] [--token-budget N] [--episode-secs S] [--single-wall-secs S]
//!     [--loop-wall-secs S] [--stop-after-mins M]
//! ```
//! The daemons are taken from the directory of the `arms-bench` executable (or
//! `LOOPGATE_BIN_DIR`); llama-server and the GGUF from `~/.cache/loopgate` as for the e2e tests.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used
)]

mod arms;
mod checks;
mod report;
mod suite;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use loopgate_test_support::{cache_dir, LocalModel};
use loopgate_test_support::{Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions};

use arms::{Caps, EXECUTOR_PROFILE, MANAGER_PROFILE, STANDIN_MANAGER_PROFILE, STANDIN_MODEL};
use report::{now_rfc3339, ArmResult, Report};
use suite::{load_suite, suite_dir, SuiteTask};

struct Args {
    size: String,
    out: PathBuf,
    tasks: Vec<String>,
    caps: Caps,
    stop_after: Option<Duration>,
}

const USAGE: &str =
    "usage: arms-bench --model 1.5b|0.5b --out DIR [--tasks a,b] [--token-budget N] \
[--episode-secs S] [--single-wall-secs S] [--loop-wall-secs S] [--stop-after-mins M]";

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        size: String::new(),
        out: PathBuf::new(),
        tasks: Vec::new(),
        caps: Caps {
            token_budget: 40_000,
            episode_secs: 160,
            single_wall_secs: 190,
            loop_wall_secs: 340,
        },
        stop_after: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        let value = it
            .next()
            .with_context(|| format!("{flag} needs a value\n{USAGE}"))?;
        let num = || -> anyhow::Result<u64> {
            value
                .parse()
                .with_context(|| format!("{flag}: not a number: {value}"))
        };
        match flag.as_str() {
            "--model" => args.size = value.clone(),
            "--out" => args.out = PathBuf::from(&value),
            "--tasks" => {
                args.tasks = value
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            }
            "--token-budget" => args.caps.token_budget = num()?,
            "--episode-secs" => args.caps.episode_secs = num()?,
            "--single-wall-secs" => args.caps.single_wall_secs = num()?,
            "--loop-wall-secs" => args.caps.loop_wall_secs = num()?,
            "--stop-after-mins" => args.stop_after = Some(Duration::from_secs(num()? * 60)),
            _ => bail!("unknown flag {flag}\n{USAGE}"),
        }
    }
    if !["0.5b", "1.5b"].contains(&args.size.as_str()) {
        bail!("--model must be 0.5b or 1.5b\n{USAGE}");
    }
    if args.out.as_os_str().is_empty() {
        bail!("--out is required\n{USAGE}");
    }
    Ok(args)
}

/// `$LOOPGATE_MODEL_GGUF`, else the cached GGUF (the rule `LocalModel` uses).
fn gguf_path(size: &str) -> PathBuf {
    match std::env::var_os("LOOPGATE_MODEL_GGUF").filter(|v| !v.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => cache_dir()
            .join("models")
            .join(format!("qwen2.5-coder-{size}-instruct-q4_k_m.gguf")),
    }
}

fn profiles(llm: &LocalModel, standin: &StandInModel) -> Vec<Profile> {
    let mut mgr = Profile::new(MANAGER_PROFILE, &llm.base_url(), llm.model_name());
    mgr.timeout_secs = 300;
    let mut exec = Profile::new(EXECUTOR_PROFILE, &llm.base_url(), llm.model_name());
    exec.timeout_secs = 300;
    let stand = Profile::new(STANDIN_MANAGER_PROFILE, &standin.base_url(), STANDIN_MODEL);
    vec![mgr, exec, stand]
}

fn bench_error(task: &SuiteTask, arm: &'static str, err: &anyhow::Error) -> ArmResult {
    ArmResult {
        task: task.name.clone(),
        kind: task.kind.clone(),
        arm,
        claimed_done: false,
        passes: false,
        tokens: 0,
        wall_s: 0.0,
        rounds: 0,
        terminal_state: "bench_error".into(),
        run_id: String::new(),
        snapshot: String::new(),
        note: format!("{err:#}").chars().take(2000).collect(),
    }
}

fn base_notes(args: &Args) -> Vec<String> {
    let c = args.caps;
    vec![
        format!(
            "Same model for every role; same run token budget ({} tokens, max_total_tokens) on both arms. \
             The manager checks that budget after each model turn and episode, so one episode can overshoot it; \
             a single executor episode is bounded by max_steps and executor_episode_secs, not by tokens.",
            c.token_budget
        ),
        format!(
            "single_shot: one executor episode (stand-in manager that always says `Next: cli` with the goal, \
             max_rounds = 1); claimed_done = the executor called finish; tokens = executor usage; \
             wall cap {} s per run, episode cap {} s.",
            c.single_wall_secs, c.episode_secs
        ),
        format!(
            "loopgate: full loop (local-model manager and executor, mechanical auditor, task's own max_rounds \
             and max_steps); claimed_done = the run reached completed; tokens = run total; \
             wall cap {} s per run (max_wall_secs), episode cap {} s.",
            c.loop_wall_secs, c.episode_secs
        ),
        "rounds: single_shot = executor episodes that reported (1, or 0 if the episode never \
         reported); loopgate = the run's round counter (executor episodes dispatched, including one cut \
         off by the wall cap)."
            .into(),
        "passes = the bench checked the final snapshot out (single_shot: the episode's candidate) and ran \
         every acceptance check itself with sh -c, each in a fresh copy."
            .into(),
        "Wall times were measured on a shared 2-core machine (llama-server on 2 threads) while other \
         compiles ran: they are inflated and noisy."
            .into(),
    ]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let tasks = load_suite(&suite_dir(), &args.tasks)?;
    std::fs::create_dir_all(&args.out)?;
    let gguf = gguf_path(&args.size);
    if let Some(why) = LocalModel::unavailable_reason(&args.size) {
        bail!("the {} model is unavailable: {why}", args.size);
    }
    let mut report = Report {
        path: args.out.join(format!("arms-{}.json", args.size)),
        size: args.size.clone(),
        model_file: gguf
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default(),
        model_sha256: report::sha256_file(&gguf)?,
        token_budget: args.caps.token_budget,
        started_at: now_rfc3339(),
        finished_at: None,
        notes: base_notes(&args),
        results: Vec::new(),
    };
    report.save()?;
    eprintln!(
        "[arms-bench] {} tasks, model {}, writing {}",
        tasks.len(),
        args.size,
        report.path.display()
    );
    let bench_start = Instant::now();
    let llm = LocalModel::start(&args.size)
        .await?
        .context("local model unavailable")?;
    let standin = StandInModel::start(Script::new()).await?;
    let worst_task =
        Duration::from_secs(args.caps.single_wall_secs + args.caps.loop_wall_secs + 30);
    let mut skipped = Vec::new();
    for task in &tasks {
        if let Some(limit) = args.stop_after {
            if bench_start.elapsed() + worst_task > limit {
                skipped.push(task.name.clone());
                continue;
            }
        }
        eprintln!(
            "[arms-bench] {} ({}) at {}",
            task.name,
            task.kind,
            now_rfc3339()
        );
        let stack = Stack::start(StackOptions::new(profiles(&llm, &standin), 1)).await?;
        let single = arms::single_shot(&stack, &standin, task, args.caps)
            .await
            .unwrap_or_else(|e| bench_error(task, "single_shot", &e));
        eprintln!("[arms-bench]   single_shot: {single:?}");
        let runs_dir = args.out.join(format!("runs-{}", args.size));
        arms::dump_run(
            &stack,
            &runs_dir,
            &format!("{}.single_shot", task.name),
            &single,
        )
        .await;
        report.results.push(single);
        report.save()?;
        let looped = arms::loopgate(&stack, task, args.caps)
            .await
            .unwrap_or_else(|e| bench_error(task, "loopgate", &e));
        eprintln!("[arms-bench]   loopgate: {looped:?}");
        arms::dump_run(
            &stack,
            &runs_dir,
            &format!("{}.loopgate", task.name),
            &looped,
        )
        .await;
        report.results.push(looped);
        report.save()?;
        drop(stack);
    }
    if !skipped.is_empty() {
        report.notes.push(format!(
            "Not run (the next task could have run past --stop-after-mins {}): {}",
            args.stop_after.map(|d| d.as_secs() / 60).unwrap_or(0),
            skipped.join(", ")
        ));
    }
    report.finished_at = Some(now_rfc3339());
    report.save()?;
    println!("{}", report.table());
    println!("written {}", report.path.display());
    Ok(())
}
