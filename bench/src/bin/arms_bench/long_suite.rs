//! `arms-bench --suite long`: the `examples/long` tasks on the long suite's arms
//! (`loopgate_bench::long`), one stack per task with the real local model, the arms one after
//! another on it. Writes `<out>/long-<size>.json` after every run (one record per task and
//! arm) and keeps each run's view, log, daemons' logs and final tree under
//! `<out>/runs-long-<size>/`.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use loopgate_bench::long::{
    executors_for, load_long_suite, long_suite_dir, select_arms, Arm, ArmProfiles, LongBench,
    LongCaps, LongRecord, LongTask, BENCH_ERROR,
};
use loopgate_bench::run_wait::GRACE_SECS;
use loopgate_test_support::{workspace_bin, LocalModel, Script, StandInModel};
use loopgate_tests::{Stack, StackOptions};
use loopgate_transport::runtime::shutdown::shutdown_on_signals;
use serde_json::{json, Value};

use crate::arms::{
    Caps, EXECUTOR_PROFILE, MANAGER_PROFILE, STANDIN_MANAGER_PROFILE, STANDIN_MODEL,
};
use crate::report::{now_rfc3339, sha256_file, RESUMED_NOTE};
use crate::{gguf_path, profiles, Args};

/// The long suite's caps unless given: tasks of 9-12 clauses and 14-16 rounds.
pub const LONG_TASK_CAPS: Caps = Caps {
    token_budget: 300_000,
    episode_secs: 300,
    single_wall_secs: 420,
    loop_wall_secs: 2400,
    judge: false,
    step_retries: None,
    attempts: None,
};

/// The long suite's result file.
struct LongReport {
    path: std::path::PathBuf,
    doc: Value,
    results: Vec<LongRecord>,
}

impl LongReport {
    fn save(&mut self) -> anyhow::Result<()> {
        self.doc["results"] = serde_json::to_value(&self.results)?;
        let tmp = self.path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_string_pretty(&self.doc)? + "\n")?;
        std::fs::rename(&tmp, &self.path)?;
        Ok(())
    }

    fn has(&self, task: &str, arm: Arm) -> bool {
        self.results
            .iter()
            .any(|r| r.task == task && r.arm == arm.name())
    }

    fn note(&mut self, note: String) {
        if let Some(notes) = self.doc["notes"].as_array_mut() {
            notes.push(json!(note));
        }
    }
}

/// The records, `started_at` and resumption notes of an earlier file (`--resume`); records of
/// the bench failing are dropped, so those runs go again.
fn earlier(path: &Path) -> anyhow::Result<(Vec<LongRecord>, String, Vec<String>)> {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    let results = doc["results"]
        .as_array()
        .map(|rs| {
            rs.iter()
                .filter_map(|r| serde_json::from_value::<LongRecord>(r.clone()).ok())
                .filter(|r| r.terminal_state != BENCH_ERROR)
                .collect()
        })
        .unwrap_or_default();
    let notes = doc["notes"]
        .as_array()
        .map(|ns| {
            ns.iter()
                .filter_map(Value::as_str)
                .filter(|n| n.starts_with(RESUMED_NOTE))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    Ok((
        results,
        doc["started_at"].as_str().unwrap_or_default().to_string(),
        notes,
    ))
}

/// PATH with the directory of the `loopgate` CLI first, and `LOOPGATE_BIN`, for the bench's own
/// checks (the web task's `loopgate browse`); a note when it is not built.
fn check_env() -> (Vec<(String, String)>, Option<String>) {
    match workspace_bin("loopgate") {
        Ok(cli) => {
            let dir = cli.parent().map(Path::to_path_buf).unwrap_or_default();
            let path = std::env::var_os("PATH").unwrap_or_default();
            let mut dirs = vec![dir];
            dirs.extend(std::env::split_paths(&path));
            let joined = std::env::join_paths(dirs).unwrap_or(path);
            (
                vec![
                    ("PATH".into(), joined.to_string_lossy().into_owned()),
                    ("LOOPGATE_BIN".into(), cli.display().to_string()),
                ],
                None,
            )
        }
        Err(err) => (
            Vec::new(),
            Some(format!(
                "loopgate (the CLI) is not built beside the daemons ({err:#}): the web task's \
                 public and hidden checks call `loopgate browse` and fail without it"
            )),
        ),
    }
}

fn notes(args: &Args, arms: &[Arm], caps: LongCaps) -> Vec<String> {
    let mut notes = vec![
        format!(
            "Same local model for every model role, same token budget per task and arm ({} \
             tokens: max_total_tokens of a loop run, the sum of all a continuation's episodes). \
             A built-in executor episode ends once it has spent what was left of it when it \
             went out (ExecRequest max_tokens), so a run overshoots it by at most one model \
             turn; with daemons older than that, by up to one episode.",
            caps.token_budget
        ),
        format!(
            "Caps: executor episode {} s; single_shot wall {} s; loop runs and the whole \
             continuation {} s (+{GRACE_SECS} s grace before the bench cancels a run); a \
             continuation runs at most the task's max_rounds episodes. The manager's profile has \
             structured_output = \"{}\".",
            caps.episode_secs, caps.single_wall_secs, caps.loop_wall_secs, args.structured_output
        ),
    ];
    if let Some(body) = &args.extra_body {
        notes.push(format!(
            "The local model's profiles (manager and executor) send extra_body = {body} with \
             every request (--extra-body)."
        ));
    }
    for arm in arms {
        notes.push(format!("{}: {}.", arm.name(), arm.description()));
    }
    notes.extend([
        "hidden_passed: the task's hidden criteria (hidden/check.sh, one PASS/FAIL line per goal \
         clause, stricter than the public checks, never uploaded or shown to any role) passing on \
         the final snapshot, run by the bench from the repository in a scratch copy. curve: the \
         hidden criteria after every round, of the snapshot the run kept (kept_passed) and of the \
         executor's candidate (candidate_passed); round 0 is the starting workspace."
            .to_string(),
        "best_held: the most hidden criteria any snapshot the run kept passed (a candidate set \
         aside is not held); final_is_best: the final snapshot passes as many; lost_ground: rounds \
         after which the run held fewer than before. false_completion: claimed done with a hidden \
         criterion failing."
            .to_string(),
        "tokens: every token the arm spent on the task as the runs' budgets count them \
         (input + output, prompt-cache hits included); tokens_by_role splits them (the \
         one-episode runs' stand-in manager reports none); cached_prompt_tokens: how many of \
         their prompt tokens the model server read from its prompt cache. wall_s: first submit to the last \
         run's end, the continuation's public checks between episodes included, the hidden \
         checks not."
            .to_string(),
        format!(
            "Wall times are from {} core(s) with llama-server on {} thread(s) \
             (LOOPGATE_LLAMA_THREADS); other work on the machine inflates them.",
            std::thread::available_parallelism().map_or(0, usize::from),
            std::env::var("LOOPGATE_LLAMA_THREADS").unwrap_or_else(|_| "2".into())
        ),
    ]);
    notes
}

fn list(tasks: &[LongTask], arms: &[Arm], arm_notes: &[String]) {
    for task in tasks {
        println!(
            "{:<18} {:>2} clauses  {}{}",
            task.name,
            task.criterion_ids().len(),
            task.kind,
            if task.is_gui() { "  [gui]" } else { "" }
        );
    }
    println!();
    for arm in arms {
        println!("arm {:<14} {}", arm.name(), arm.description());
    }
    for note in arm_notes {
        println!("note: {note}");
    }
}

/// Keep each run's view and log, the daemons' logs and the final tree, for reading what the
/// models did.
async fn dump_runs(stack: &Stack, dir: &Path, record: &LongRecord) {
    let label = format!("{}.{}", record.task, record.arm);
    let _ = std::fs::create_dir_all(dir);
    for (i, id) in record.run_ids.iter().enumerate() {
        let view = stack.run(id).await.unwrap_or(Value::Null);
        let log = stack
            .get(&format!("/v1/runs/{id}/log"))
            .await
            .unwrap_or(Value::Null);
        let name = if record.run_ids.len() == 1 {
            format!("{label}.json")
        } else {
            format!("{label}.run{}.json", i + 1)
        };
        let transcripts = round_transcripts(stack, id).await;
        let body = json!({"run": view, "log": log, "transcripts": transcripts});
        let _ = std::fs::write(
            dir.join(name),
            serde_json::to_string_pretty(&body).unwrap_or_default(),
        );
    }
    if let Some(last) = record.curve.last() {
        let _ = stack
            .checkout(&last.kept, &dir.join(format!("{label}.tree")))
            .await;
    }
    let _ = std::fs::write(dir.join(format!("{label}.daemons.txt")), stack.logs());
}

/// Every round's episode transcript of run `id` (what the model was told and did), in round
/// order; a round without one is left out.
async fn round_transcripts(stack: &Stack, id: &str) -> Vec<Value> {
    let rounds = stack
        .get(&format!("/v1/runs/{id}/rounds"))
        .await
        .unwrap_or(Value::Null);
    let count = rounds["rounds"].as_array().map_or(0, Vec::len);
    let mut out = Vec::new();
    for n in 1..=count {
        if let Ok(t) = stack
            .get(&format!("/v1/runs/{id}/rounds/{n}/transcript"))
            .await
        {
            out.push(t);
        }
    }
    out
}

/// Per arm: hidden criteria at the end over the suite, false completions, runs that ended
/// below their best, tokens.
fn totals(arms: &[Arm], results: &[LongRecord]) -> String {
    let mut out = String::new();
    for arm in arms {
        let rs: Vec<&LongRecord> = results.iter().filter(|r| r.arm == arm.name()).collect();
        if rs.is_empty() {
            continue;
        }
        let k: u32 = rs.iter().map(|r| r.hidden_passed).sum();
        let n: u32 = rs.iter().map(|r| r.criteria).sum();
        let false_done = rs.iter().filter(|r| r.false_completion).count();
        let below = rs.iter().filter(|r| !r.summary.final_is_best).count();
        let tokens: u64 = rs.iter().map(|r| r.tokens).sum();
        out.push_str(&format!(
            "{:<14} hidden criteria at the end {k}/{n} over {} task(s); false completions {false_done}; \
             ended below their best {below}; {tokens} tokens\n",
            arm.name(),
            rs.len()
        ));
    }
    out
}

pub async fn run(args: &Args) -> anyhow::Result<()> {
    let tasks = load_long_suite(
        &args.long_dir.clone().unwrap_or_else(long_suite_dir),
        &args.tasks,
    )?;
    let (arms, arm_notes) = select_arms(args.arms.as_deref())?;
    if args.list {
        list(&tasks, &arms, &arm_notes);
        return Ok(());
    }
    let caps = LongCaps {
        token_budget: args.caps.token_budget,
        episode_secs: args.caps.episode_secs,
        single_wall_secs: args.caps.single_wall_secs,
        loop_wall_secs: args.caps.loop_wall_secs,
    };
    std::fs::create_dir_all(&args.out)?;
    let gguf = gguf_path(&args.size);
    if let Some(why) = LocalModel::unavailable_reason(&args.size) {
        bail!("the {} model is unavailable: {why}", args.size);
    }
    let (env, env_note) = check_env();
    let mut all_notes = notes(args, &arms, caps);
    all_notes.extend(arm_notes);
    all_notes.extend(env_note);
    let started_at = now_rfc3339();
    let mut report = LongReport {
        path: args.out.join(format!("long-{}.json", args.size)),
        doc: json!({
            "suite": "examples/long",
            "model": {
                "size": args.size,
                "file": gguf.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default(),
                "sha256": sha256_file(&gguf)?,
            },
            "token_budget": caps.token_budget,
            "caps": {
                "episode_secs": caps.episode_secs,
                "single_wall_secs": caps.single_wall_secs,
                "loop_wall_secs": caps.loop_wall_secs,
                "hidden_secs": args.hidden_timeouts.default.as_secs(),
                "hidden_secs_by_task": args.hidden_timeouts.by_task.iter()
                    .map(|(t, d)| (t.clone(), json!(d.as_secs())))
                    .collect::<serde_json::Map<String, Value>>(),
            },
            "arms": arms.iter().map(|a| a.name()).collect::<Vec<_>>(),
            "tasks": tasks.iter().map(|t| json!({
                "name": t.name, "kind": t.kind, "criteria": t.criterion_ids().len(),
            })).collect::<Vec<_>>(),
            "started_at": started_at,
            "finished_at": Value::Null,
            "notes": all_notes,
            "results": [],
        }),
        results: Vec::new(),
    };
    if args.resume && report.path.exists() {
        let (results, first_started, resumptions) = earlier(&report.path)?;
        for note in resumptions {
            report.note(note);
        }
        report.note(format!(
            "{RESUMED_NOTE} {started_at} (--resume) with {} records of the file started at \
             {first_started}; task and arm pairs there were not run again.",
            results.len()
        ));
        report.doc["started_at"] = json!(first_started);
        report.results = results;
    }
    report.save()?;
    eprintln!(
        "[arms-bench long] {} tasks x {} arms, model {}, writing {}",
        tasks.len(),
        arms.len(),
        args.size,
        report.path.display()
    );
    let bench_start = Instant::now();
    let llm = LocalModel::start(&args.size)
        .await?
        .context("local model unavailable")?;
    let standin = StandInModel::start(Script::new()).await?;
    let runs_dir = args.out.join(format!("runs-long-{}", args.size));
    let arm_profiles = ArmProfiles {
        manager: MANAGER_PROFILE.into(),
        executor: EXECUTOR_PROFILE.into(),
        judge: MANAGER_PROFILE.into(),
        episode_manager: STANDIN_MANAGER_PROFILE.into(),
    };
    let mut skipped = Vec::new();
    // Ctrl-C or SIGTERM: stop and drop the stack, so its servers and daemons die with the
    // bench; what ran is already saved.
    let stop = shutdown_on_signals();
    let all_runs = async {
        for task in &tasks {
            let todo: Vec<Arm> = arms
                .iter()
                .copied()
                .filter(|a| !report.has(&task.name, *a))
                .collect();
            if todo.is_empty() {
                continue;
            }
            let mut options =
                StackOptions::new(profiles(&llm, &standin, args)?, executors_for(&todo));
            if task.is_gui() {
                options.capabilities = vec!["cli", "gui"];
            }
            let stack = Stack::start(options).await?;
            let bench = LongBench::new(
                &stack,
                &standin,
                STANDIN_MODEL,
                arm_profiles.clone(),
                caps,
                env.clone(),
                args.hidden_timeouts.clone(),
            );
            for arm in todo {
                let wall = match arm {
                    Arm::SingleShot => caps.single_wall_secs,
                    _ => caps.loop_wall_secs,
                };
                if let Some(limit) = args.stop_after {
                    if bench_start.elapsed() + Duration::from_secs(wall + GRACE_SECS) > limit {
                        skipped.push(format!("{}/{}", task.name, arm.name()));
                        continue;
                    }
                }
                eprintln!(
                    "[arms-bench long] {} / {} at {}",
                    task.name,
                    arm.name(),
                    now_rfc3339()
                );
                let record = bench.run_arm(task, arm).await.unwrap_or_else(|err| {
                    LongRecord::bench_error(
                        &task.name,
                        &task.kind,
                        arm.name(),
                        u32::try_from(task.criterion_ids().len()).unwrap_or(0),
                        &format!("{err:#}"),
                    )
                });
                eprintln!("[arms-bench long]   {}", record.line());
                dump_runs(&stack, &runs_dir, &record).await;
                report.results.push(record);
                report.save()?;
            }
            drop(stack);
        }
        anyhow::Ok(())
    };
    tokio::select! {
        finished = all_runs => finished?,
        _ = stop.cancelled() => {
            eprintln!("[arms-bench long] interrupted: stopping (results so far are in the file)");
            report.note(format!("Interrupted at {} (SIGINT or SIGTERM).", now_rfc3339()));
        }
    }
    if !skipped.is_empty() {
        report.note(format!(
            "Not run (the run could have gone past --stop-after-mins {}): {}",
            args.stop_after.map(|d| d.as_secs() / 60).unwrap_or(0),
            skipped.join(", ")
        ));
    }
    report.doc["finished_at"] = json!(now_rfc3339());
    report.save()?;
    for r in &report.results {
        println!("{}", r.line());
    }
    println!();
    print!("{}", totals(&arms, &report.results));
    println!("written {}", report.path.display());
    Ok(())
}
