//! Loose-checks benchmark (not a test; issue 14): tasks under `examples/loose/` whose public
//! checks are deliberately looser than their goals, each with a stricter hidden check written
//! from the goal (`<task>/hidden/check.sh`, never uploaded, never shown to any role: the bench
//! runs it itself on the final snapshot after the run). Two arms, same local model for every
//! role (the auditor's judge included) and the same token budget:
//!
//! - `derived`: loopgate as shipped: each goal clause no check covers becomes a judged
//!   criterion (`derive_criteria` on, the default);
//! - `no_derive`: `derive_criteria = false`, the behaviour before issue 14 (the judge gives
//!   one holistic verdict).
//!
//! Reported per arm: false completions (completed, hidden check fails), solves (hidden check
//! passes), completions, and how often a clause judgment caught the gap (an audit judged a goal
//! clause `unmet` or `unknown`). Writes `<out>/loose-<size>.json` after every run.
//!
//! ```text
//! $CARGO_TARGET_DIR/release/loose-bench --model 1.5b --out target/bench [--tasks a,b]
//!     [--arms derived,no_derive] [--token-budget N] [--episode-secs S] [--wall-secs S]
//!     [--stop-after-mins M]
//! ```
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used
)]

#[path = "../arms_bench/checks.rs"]
#[allow(dead_code)]
mod checks;
#[path = "../arms_bench/report.rs"]
#[allow(dead_code)]
mod report;
#[path = "../arms_bench/suite.rs"]
#[allow(dead_code)]
mod suite;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use loopgate_common::task::ProfileChoice;
use loopgate_test_support::{cache_dir, LocalModel};
use loopgate_tests::{Profile, Stack, StackOptions};
use loopgate_transport::runtime::shutdown::shutdown_on_signals;
use serde_json::{json, Value};

use suite::{load_suite, SuiteTask};

const PROFILE: &str = "local-llm";
const ARMS: [&str; 2] = ["derived", "no_derive"];
const GRACE_SECS: u64 = 90;
const HIDDEN_CHECK_SECS: u64 = 60;

struct Args {
    size: String,
    out: PathBuf,
    tasks: Vec<String>,
    arms: Vec<String>,
    token_budget: u64,
    episode_secs: u64,
    wall_secs: u64,
    stop_after: Option<Duration>,
}

const USAGE: &str = "usage: loose-bench --model 1.5b|0.5b --out DIR [--tasks a,b] \
[--arms derived,no_derive] [--token-budget N] [--episode-secs S] [--wall-secs S] \
[--stop-after-mins M]";

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        size: String::new(),
        out: PathBuf::new(),
        tasks: Vec::new(),
        arms: ARMS.iter().map(|a| a.to_string()).collect(),
        token_budget: 40_000,
        episode_secs: 160,
        wall_secs: 400,
        stop_after: None,
    };
    let mut it = std::env::args().skip(1);
    let list = |v: &str| -> Vec<String> {
        v.split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    };
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
            "--tasks" => args.tasks = list(&value),
            "--arms" => args.arms = list(&value),
            "--token-budget" => args.token_budget = num()?,
            "--episode-secs" => args.episode_secs = num()?,
            "--wall-secs" => args.wall_secs = num()?,
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
    if let Some(bad) = args.arms.iter().find(|a| !ARMS.contains(&a.as_str())) {
        bail!("unknown arm {bad} (have: {})", ARMS.join(", "));
    }
    Ok(args)
}

fn loose_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("examples")
        .join("loose")
}

/// The hidden check of a task: read by the bench only, after the run.
fn hidden_check(task: &SuiteTask) -> anyhow::Result<String> {
    let path = loose_dir().join(&task.name).join("hidden").join("check.sh");
    std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
}

/// The task file for one arm: every role on the local model, the judge included.
fn arm_toml(task: &SuiteTask, arm: &str, args: &Args) -> anyhow::Result<String> {
    let mut file = task.file.clone();
    file.roles.manager = Some(PROFILE.to_string());
    file.roles.executor = Some(ProfileChoice::One(PROFILE.to_string()));
    file.roles.auditor = Some(PROFILE.to_string());
    file.budget.max_total_tokens = Some(args.token_budget);
    file.budget.max_wall_secs = Some(args.wall_secs);
    file.budget.executor_episode_secs = Some(args.episode_secs);
    file.derive_criteria = Some(arm == "derived");
    file.validate()
        .with_context(|| format!("task {} after the bench's overrides", task.name))?;
    Ok(toml::to_string(&file)?)
}

async fn wait_end(stack: &Stack, id: &str, timeout: Duration) -> anyhow::Result<(Value, String)> {
    let deadline = Instant::now() + timeout;
    let mut note = String::new();
    loop {
        let v = stack.run(id).await?;
        let state = v["state"].as_str().unwrap_or("");
        if [
            "completed",
            "blocked",
            "budget_exhausted",
            "cancelled",
            "failed",
        ]
        .contains(&state)
        {
            return Ok((v, note));
        }
        if (state == "waiting_for_input" || Instant::now() > deadline) && note.is_empty() {
            note = format!("{state}: cancelled by the bench");
            stack
                .post_raw(&format!("/v1/runs/{id}/cancel"), &json!({}))
                .await?;
        } else if Instant::now() > deadline + Duration::from_secs(60) {
            bail!("run {id} did not stop after cancel: {v}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Run `script` with `sh -c` in a scratch copy of the snapshot's tree.
async fn run_hidden(stack: &Stack, snapshot: &str, script: &str) -> anyhow::Result<bool> {
    let tree = tempfile::tempdir()?;
    stack.checkout(snapshot, tree.path()).await?;
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(tree.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    match tokio::time::timeout(
        Duration::from_secs(HIDDEN_CHECK_SECS),
        child.wait_with_output(),
    )
    .await
    {
        Ok(out) => Ok(out?.status.success()),
        Err(_) => Ok(false),
    }
}

/// Audit gap lines that show a clause judgment catching a gap.
fn caught_lines(log: &Value) -> Vec<String> {
    log["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|e| e["type"] == "audit_report")
        .flat_map(|e| e["gaps"].as_array().cloned().unwrap_or_default())
        .filter_map(|g| g.as_str().map(str::to_string))
        .filter(|g| {
            (g.starts_with("goal clause") && !g.contains("judged met"))
                || g.starts_with("derived check")
        })
        .collect()
}

async fn one_run(stack: &Stack, task: &SuiteTask, arm: &str, args: &Args) -> anyhow::Result<Value> {
    let toml = arm_toml(task, arm, args)?;
    let files: Vec<(&str, &str)> = task
        .files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let started = Instant::now();
    let id = stack.submit(&toml, &files).await?["id"]
        .as_str()
        .context("submit answered without an id")?
        .to_string();
    let (done, note) =
        wait_end(stack, &id, Duration::from_secs(args.wall_secs + GRACE_SECS)).await?;
    let wall_s = started.elapsed().as_secs_f64();
    let snapshot = done["snapshot"].as_str().unwrap_or_default().to_string();
    let public = checks::verify_snapshot(stack, &snapshot, task).await?;
    let hidden = run_hidden(stack, &snapshot, &hidden_check(task)?).await?;
    let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
    let caught = caught_lines(&log);
    let completed = done["state"] == "completed";
    let criteria = stack
        .get(&format!("/v1/runs/{id}/contract"))
        .await
        .ok()
        .and_then(|c| c["contract"]["criteria"].as_array().map(Vec::len))
        .unwrap_or(0);
    let run_note = format!("run {id}");
    let notes = [
        done["terminal_reason"].as_str().unwrap_or(""),
        note.as_str(),
        run_note.as_str(),
    ]
    .iter()
    .filter(|s| !s.is_empty())
    .copied()
    .collect::<Vec<_>>()
    .join("; ");
    Ok(json!({
        "task": task.name,
        "kind": task.kind,
        "arm": arm,
        "completed": completed,
        "public_passes": public.passes,
        "hidden_passes": hidden,
        "false_completion": completed && !hidden,
        "caught": caught.len(),
        "caught_lines": caught.iter().take(4).collect::<Vec<_>>(),
        "criteria": criteria,
        "tokens": done["total_tokens"].as_u64().unwrap_or(0),
        "wall_s": (wall_s * 10.0).round() / 10.0,
        "rounds": done["round"].as_u64().unwrap_or(0),
        "terminal_state": done["state"],
        "note": notes,
    }))
}

/// Per arm: runs, completions, false completions, solves, runs where a judgment caught a gap.
fn summary(results: &[Value]) -> Value {
    let mut out = serde_json::Map::new();
    for arm in ARMS {
        let rows: Vec<&Value> = results.iter().filter(|r| r["arm"] == arm).collect();
        if rows.is_empty() {
            continue;
        }
        let count = |key: &str| rows.iter().filter(|r| r[key] == true).count();
        out.insert(
            arm.to_string(),
            json!({
                "runs": rows.len(),
                "completed": count("completed"),
                "false_completions": count("false_completion"),
                "solved": count("hidden_passes"),
                "caught_gap": rows.iter().filter(|r| r["caught"].as_u64().unwrap_or(0) > 0).count(),
                "tokens": rows.iter().map(|r| r["tokens"].as_u64().unwrap_or(0)).sum::<u64>(),
            }),
        );
    }
    Value::Object(out)
}

fn save(path: &Path, doc: &Value) -> anyhow::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(doc)? + "\n")?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

fn now() -> String {
    report::now_rfc3339()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let tasks = load_suite(&loose_dir(), &args.tasks)?;
    for task in &tasks {
        hidden_check(task)?;
    }
    std::fs::create_dir_all(&args.out)?;
    if let Some(why) = LocalModel::unavailable_reason(&args.size) {
        bail!("the {} model is unavailable: {why}", args.size);
    }
    let path = args.out.join(format!("loose-{}.json", args.size));
    let gguf = cache_dir()
        .join("models")
        .join(format!("qwen2.5-coder-{}-instruct-q4_k_m.gguf", args.size));
    let mut doc = json!({
        "model": {"size": args.size, "file": gguf.file_name().map(|n| n.to_string_lossy().to_string())},
        "token_budget": args.token_budget,
        "wall_secs": args.wall_secs,
        "started_at": now(),
        "finished_at": Value::Null,
        "notes": [
            "Tasks: examples/loose/ (public checks looser than the goal); hidden check per task in <task>/hidden/check.sh, run by the bench on the final snapshot, never uploaded or shown to any role.",
            "Same local model for manager, executor and the auditor's judge; arms differ only in derive_criteria.",
            "caught_gap: runs in which some audit judged a goal clause unmet or unknown (or found a derived check broken).",
        ],
        "results": [],
        "summary": {},
    });
    save(&path, &doc)?;
    let llm = LocalModel::start(&args.size)
        .await?
        .context("local model unavailable")?;
    let mut profile = Profile::new(PROFILE, &llm.base_url(), llm.model_name()).local_defaults();
    profile.timeout_secs = 300;
    let started = Instant::now();
    let worst = Duration::from_secs(args.wall_secs + GRACE_SECS);
    let mut results: Vec<Value> = Vec::new();
    let mut skipped = Vec::new();
    // Ctrl-C or SIGTERM: stop and drop the stack, so its servers and daemons die with the
    // bench; what ran is already saved.
    let stop = shutdown_on_signals();
    let all_runs = async {
        for task in &tasks {
            for arm in &args.arms {
                if args
                    .stop_after
                    .is_some_and(|limit| started.elapsed() + worst > limit)
                {
                    skipped.push(format!("{}/{arm}", task.name));
                    continue;
                }
                eprintln!("[loose-bench] {} / {arm}", task.name);
                let stack = Stack::start(StackOptions::new(vec![profile.clone()], 1)).await?;
                let result = match one_run(&stack, task, arm, &args).await {
                    Ok(r) => r,
                    Err(err) => {
                        json!({"task": task.name, "arm": arm, "terminal_state": "bench_error",
                                       "note": format!("{err:#}")})
                    }
                };
                eprintln!("[loose-bench]   {result}");
                results.push(result);
                doc["results"] = Value::Array(results.clone());
                doc["summary"] = summary(&results);
                save(&path, &doc)?;
            }
        }
        anyhow::Ok(())
    };
    tokio::select! {
        finished = all_runs => finished?,
        _ = stop.cancelled() => {
            eprintln!("[loose-bench] interrupted: stopping (results so far are in the file)");
            if let Some(notes) = doc["notes"].as_array_mut() {
                notes.push(json!(format!("Interrupted at {} (SIGINT or SIGTERM).", now())));
            }
        }
    }
    if !skipped.is_empty() {
        if let Some(notes) = doc["notes"].as_array_mut() {
            notes.push(json!(format!(
                "Not run (past --stop-after-mins): {}",
                skipped.join(", ")
            )));
        }
    }
    doc["finished_at"] = json!(now());
    save(&path, &doc)?;
    println!("{}", serde_json::to_string_pretty(&doc["summary"])?);
    println!("written {}", path.display());
    Ok(())
}
