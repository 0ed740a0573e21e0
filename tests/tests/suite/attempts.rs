//! Issue 40: a step dispatched as N sibling episodes (`[budget] attempts`), the winner chosen
//! by the auditor's evidence. The stand-in executor tells the siblings apart by the sampling
//! seed each one asks for (none for the first, `k` for sibling `k`) and writes a different
//! candidate per attempt: one file per turn, then `finish`. No manager model: every step is
//! the goal, and one round is the whole budget unless a sibling passes everything.

use std::time::{Duration, Instant};

use loopgate_test_support::{Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(120);

const TASK: &str = r#"
goal = "Create the files a, b and c"
derive_criteria = false
EXTRA
[[acceptance]]
id = "a"
check = "test -f a"
[[acceptance]]
id = "b"
check = "test -f b"
[[acceptance]]
id = "c"
check = "test -f c"
[roles]
executor = "exec"
[budget]
manager = false
attempts = 3
max_rounds = 1
self_checks = 0
step_retries = 0
"#;

fn task(extra: &str) -> String {
    TASK.replace("EXTRA", extra)
}

/// What sibling `k` (1-based) does: the files it writes, one per turn, and how long its first
/// turn takes.
#[derive(Clone)]
struct Sibling {
    files: Vec<&'static str>,
    delay: Duration,
}

fn writes(files: &[&'static str]) -> Sibling {
    Sibling {
        files: files.to_vec(),
        delay: Duration::ZERO,
    }
}

fn slow(files: &[&'static str], delay: Duration) -> Sibling {
    Sibling {
        files: files.to_vec(),
        delay,
    }
}

/// The stand-in executor: sibling `k` (told apart by the seed its episode asks for) writes its
/// files, then finishes; each turn costs `100 * k` prompt tokens.
fn executor(siblings: Vec<Sibling>) -> Reply {
    Reply::dynamic(move |req: &Value| {
        let k = req["seed"].as_u64().unwrap_or(1);
        let plan = siblings
            .get(usize::try_from(k).unwrap_or(1).saturating_sub(1))
            .cloned()
            .unwrap_or_else(|| writes(&[]));
        let done = req["messages"]
            .as_array()
            .map(|m| m.iter().filter(|m| m["role"] == "tool").count())
            .unwrap_or(0);
        let reply = match plan.files.get(done) {
            // `write_file` refuses a protected path, so a violating sibling uses the shell.
            Some(path) if path.starts_with("locked/") => Reply::tool_call(
                "shell",
                json!({"command": format!("mkdir -p locked && echo {path} > {path}")}),
            ),
            Some(path) => Reply::tool_call(
                "write_file",
                json!({"path": path, "content": format!("{path}\n")}),
            ),
            None => Reply::tool_call(
                "finish",
                json!({"summary": format!("attempt {k} wrote its files")}),
            ),
        };
        let reply = Reply::with_usage(100 * k, 10, reply);
        if done == 0 && !plan.delay.is_zero() {
            Reply::delayed(plan.delay, reply)
        } else {
            reply
        }
    })
}

async fn stack_with(
    siblings: Vec<Sibling>,
    executors: usize,
    executor_extra: &str,
) -> anyhow::Result<(StandInModel, Stack)> {
    let model =
        StandInModel::start(Script::new().fallback("standin-executor", executor(siblings))).await?;
    let mut opts = StackOptions::new(
        vec![Profile::new("exec", &model.base_url(), "standin-executor")],
        executors,
    );
    opts.executor_extra = executor_extra.to_string();
    let stack = Stack::start(opts).await?;
    Ok((model, stack))
}

async fn submit(stack: &Stack, task: &str) -> anyhow::Result<String> {
    Ok(stack.submit(task, &[]).await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string())
}

async fn entries(stack: &Stack, id: &str) -> anyhow::Result<Vec<Value>> {
    let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
    Ok(log["entries"].as_array().cloned().unwrap_or_default())
}

fn of_kind<'a>(entries: &'a [Value], kind: &str) -> Vec<&'a Value> {
    entries.iter().filter(|e| e["type"] == kind).collect()
}

/// The one `attempt_won` entry.
fn won(entries: &[Value]) -> Value {
    let won = of_kind(entries, "attempt_won");
    assert_eq!(won.len(), 1, "{entries:#?}");
    won[0].clone()
}

/// The executor tokens the log shows (every `exec_result` entry's).
fn logged_exec_tokens(entries: &[Value]) -> u64 {
    of_kind(entries, "exec_result")
        .iter()
        .map(|e| e["tokens"].as_u64().unwrap_or(0))
        .sum()
}

fn run_exec_tokens(run: &Value) -> u64 {
    let u = &run["usage"]["executor"];
    u["input_tokens"].as_u64().unwrap_or(0) + u["output_tokens"].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_attempts_pick_the_candidate_passing_most() -> anyhow::Result<()> {
    let siblings = vec![writes(&["a"]), writes(&["a", "b"]), writes(&["c"])];
    let (_model, stack) = stack_with(siblings, 3, "").await?;
    let id = submit(&stack, &task("")).await?;
    let done = stack.wait_terminal(&id, WAIT).await?;
    // Two of three pass: the gate stays closed and the one round is the whole budget.
    assert_eq!(
        done["state"],
        "budget_exhausted",
        "{done}\n{}",
        stack.logs()
    );
    let entries = entries(&stack, &id).await?;
    let winner = won(&entries);
    assert_eq!(winner["attempt"], 2, "{winner}");
    assert_eq!(
        (winner["passing"].as_u64(), winner["blocking"].as_u64()),
        (Some(2), Some(3))
    );
    assert!(
        winner["headline"]
            .as_str()
            .unwrap_or_default()
            .starts_with("attempt 2 of 3 won: 2/3 checks"),
        "{winner}"
    );
    let rejected = of_kind(&entries, "candidate_rejected");
    assert_eq!(rejected.len(), 2, "{entries:#?}");
    assert!(
        rejected.iter().all(|e| e["reason"] == "outscored"),
        "{rejected:?}"
    );
    // Each sibling's episode and checks-only audit is in the log, then the winner's full audit.
    let mut execs: Vec<u64> = of_kind(&entries, "exec_result")
        .iter()
        .filter_map(|e| e["step_attempt"].as_u64())
        .collect();
    execs.sort_unstable();
    assert_eq!(execs, [1, 2, 3]);
    let audits = of_kind(&entries, "audit_report");
    assert_eq!(
        audits.iter().filter(|e| e["step_attempt"].is_u64()).count(),
        3
    );
    let full: Vec<&&Value> = audits
        .iter()
        .filter(|e| e["step_attempt"].is_null())
        .collect();
    assert_eq!(full.len(), 1, "{audits:?}");
    assert_eq!(full[0]["snapshot"], winner["candidate"]);
    // Every sibling's tokens count against the run.
    assert_eq!(run_exec_tokens(&done), logged_exec_tokens(&entries));
    // The artifact is the winner's candidate; the round is one round.
    assert_eq!(done["snapshot"], winner["candidate"]);
    let out = tempfile::tempdir()?;
    stack
        .checkout(done["snapshot"].as_str().unwrap_or_default(), out.path())
        .await?;
    assert!(out.path().join("a").exists() && out.path().join("b").exists());
    assert!(!out.path().join("c").exists());
    let rounds = stack.get(&format!("/v1/runs/{id}/rounds")).await?;
    let rounds = rounds["rounds"].as_array().cloned().unwrap_or_default();
    assert_eq!(rounds.len(), 1, "{rounds:?}");
    assert_eq!(rounds[0]["candidate"], winner["candidate"]);
    // A loser's snapshot stays browsable.
    let loser = rejected[0]["candidate"].as_str().unwrap_or_default();
    let browse = tempfile::tempdir()?;
    stack.checkout(loser, browse.path()).await?;
    // `loopgate status` names the winner.
    let cli = loopgate_test_support::workspace_bin("loopgate")?;
    let status = tokio::process::Command::new(&cli)
        .args(["--server", &stack.http, "status", &id])
        .output()
        .await?;
    let stdout = String::from_utf8_lossy(&status.stdout);
    assert!(
        stdout.contains("attempts:  [round 1] attempt 2 of 3 won: 2/3 checks"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&status.stderr)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passing_sibling_cancels_the_others() -> anyhow::Result<()> {
    let long = Duration::from_secs(60);
    let siblings = vec![
        slow(&["a"], long),
        writes(&["a", "b", "c"]),
        slow(&["b"], long),
    ];
    let (_model, stack) = stack_with(siblings, 3, "").await?;
    let started = Instant::now();
    let id = submit(&stack, &task("")).await?;
    let done = stack.wait_terminal(&id, WAIT).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    assert!(
        started.elapsed() < long,
        "the slow siblings were not waited for: {:?}",
        started.elapsed()
    );
    let entries = entries(&stack, &id).await?;
    let winner = won(&entries);
    assert_eq!(winner["attempt"], 2, "{winner}");
    assert_eq!(winner["early"], true, "{winner}");
    // The cancelled siblings reported nothing, and spent nothing the run counts.
    let execs = of_kind(&entries, "exec_result");
    assert_eq!(execs.len(), 1, "{execs:?}");
    assert_eq!(execs[0]["step_attempt"], 2);
    assert_eq!(run_exec_tokens(&done), logged_exec_tokens(&entries));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_integrity_violation_never_wins() -> anyhow::Result<()> {
    // Sibling 1 passes every check but writes under a protected path.
    let siblings = vec![
        writes(&["a", "b", "c", "locked/x"]),
        writes(&["a", "b"]),
        writes(&["a"]),
    ];
    let (_model, stack) = stack_with(siblings, 3, "").await?;
    let id = submit(&stack, &task("protected_paths = [\"locked/\"]")).await?;
    let done = stack.wait_terminal(&id, WAIT).await?;
    assert_eq!(
        done["state"],
        "budget_exhausted",
        "{done}\n{}",
        stack.logs()
    );
    let entries = entries(&stack, &id).await?;
    let winner = won(&entries);
    assert_eq!(winner["attempt"], 2, "{winner}");
    let violation = of_kind(&entries, "audit_report")
        .into_iter()
        .find(|e| e["step_attempt"] == 1)
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        violation["verdicts"]["integrity"], "violation",
        "{violation}"
    );
    assert_eq!(violation["passing"], 3, "{violation}");
    assert!(
        of_kind(&entries, "candidate_rejected")
            .iter()
            .any(
                |e| e["candidate"] == violation["snapshot"] && e["reason"] == "integrity violation"
            ),
        "{entries:#?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_siblings_executor_does_not_lose_the_round() -> anyhow::Result<()> {
    // Sibling 2, the only one that passes, is slow; its executor is killed mid-episode and
    // another executor redoes it after the delivery's ack_wait.
    let siblings = vec![
        writes(&["a", "b"]),
        slow(&["a", "b", "c"], Duration::from_secs(15)),
        writes(&["c"]),
    ];
    let (_model, mut stack) = stack_with(siblings, 3, "ack_wait_secs = 3").await?;
    let id = submit(&stack, &task("")).await?;
    let victim = sibling_executor(&stack, &id, 2).await?;
    stack.executors[victim].kill();
    let done = stack.wait_terminal(&id, WAIT).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    let entries = entries(&stack, &id).await?;
    let winner = won(&entries);
    assert_eq!(winner["attempt"], 2, "{winner}");
    let starts: Vec<&Value> = of_kind(&entries, "episode_started")
        .into_iter()
        .filter(|e| e["step_attempt"] == 2)
        .collect();
    assert_eq!(starts.len(), 2, "redelivered once: {starts:?}");
    assert_ne!(starts[0]["worker"], starts[1]["worker"]);
    assert_eq!(done["round"], 1);
    Ok(())
}

/// The index of the executor that started sibling `k` of the run's first step.
async fn sibling_executor(stack: &Stack, id: &str, k: u64) -> anyhow::Result<usize> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let started = stack.log_entries(id, "episode_started").await?;
        if let Some(e) = started.iter().find(|e| e["step_attempt"] == k) {
            let worker = e["worker"].as_str().unwrap_or_default();
            return stack
                .executors
                .iter()
                .position(|x| x.name() == worker)
                .ok_or_else(|| anyhow::anyhow!("no executor named {worker}"));
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "attempt {k} of {id} never started\n{}",
            stack.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_one_executor_the_siblings_queue_and_the_run_completes() -> anyhow::Result<()> {
    let siblings = vec![writes(&["a"]), writes(&["a", "b", "c"]), writes(&["b"])];
    let (_model, stack) = stack_with(siblings, 1, "").await?;
    let id = submit(&stack, &task("")).await?;
    let done = stack.wait_terminal(&id, WAIT).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    let entries = entries(&stack, &id).await?;
    let winner = won(&entries);
    assert_eq!(winner["passing"], 3, "{winner}");
    // One executor ran them one after another: nothing failed for waiting.
    assert!(
        of_kind(&entries, "deadline_missed").is_empty(),
        "{entries:#?}"
    );
    let workers: std::collections::BTreeSet<&str> = of_kind(&entries, "episode_started")
        .iter()
        .filter(|e| e["role"] == "executor")
        .filter_map(|e| e["worker"].as_str())
        .collect();
    assert_eq!(workers.len(), 1, "{workers:?}");
    Ok(())
}
