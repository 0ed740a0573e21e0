//! Fault tests: manager replicas killed with SIGKILL while 20 runs are in flight, an
//! executor killed mid-episode, an auditor killed mid-audit, an executor stopped past its episode's deadline, and nats-server
//! stopped past `ack_wait` just as an episode finishes. Every run must end, no round may run
//! twice, no evidence may be lost.

use std::collections::BTreeMap;
use std::time::Duration;

use loopgate_test_support::{last_message_content, Reply, Script, StandInModel};
use loopgate_tests::episode_faults::{
    hello_executor, hello_executor_with, hello_model, two_auditors_ack_wait_3s, HelloDelays,
    SLOW_CHECK_TASK,
};
use loopgate_tests::{Profile, Stack, StackOptions};
use serde_json::{json, Value};

const TASK: &str = r#"
goal = "Create hello.py that prints exactly: hello, loopgate"
[[acceptance]]
id = "prints-greeting"
check = "test \"$(python3 hello.py)\" = 'hello, loopgate'"
[roles]
manager = "mgr"
executor = "exec"
[budget]
max_rounds = 6
"#;

/// Manager: first attempt, then a fix once an audit has failed. Executor: the first attempt
/// writes the wrong greeting, the fix writes the right one; then `finish`.
fn two_round_script(delay: Duration) -> Script {
    let manager = Reply::dynamic(move |req: &Value| {
        let prompt = last_message_content(req, "user").unwrap_or_default();
        let text = if prompt.contains("Failing") {
            "Next: cli\nTask: fix hello.py (second attempt)"
        } else {
            "Next: cli\nTask: write hello.py (first attempt)"
        };
        Reply::delayed(delay, Reply::content(text))
    });
    let executor = Reply::dynamic(move |req: &Value| {
        let last_role = req["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["role"].as_str())
            .unwrap_or("")
            .to_string();
        if last_role == "tool" {
            return Reply::tool_call("finish", json!({"summary": "wrote hello.py"}));
        }
        let prompt = last_message_content(req, "user").unwrap_or_default();
        let content = if prompt.contains("first attempt") {
            "print('hello')\n"
        } else {
            "print('hello, loopgate')\n"
        };
        Reply::delayed(
            delay,
            Reply::tool_call(
                "write_file",
                json!({"path": "hello.py", "content": content}),
            ),
        )
    });
    Script::new()
        .fallback("standin-manager", manager)
        .fallback("standin-executor", executor)
}

fn profiles(model: &StandInModel) -> Vec<Profile> {
    vec![
        Profile::new("mgr", &model.base_url(), "standin-manager"),
        Profile::new("exec", &model.base_url(), "standin-executor"),
    ]
}

fn count_by_round(entries: &[Value], kind: &str) -> BTreeMap<(u64, u64), usize> {
    let mut counts = BTreeMap::new();
    for e in entries.iter().filter(|e| e["type"] == kind) {
        let key = (
            e["generation"].as_u64().unwrap_or(0),
            e["round"].as_u64().unwrap_or(0),
        );
        *counts.entry(key).or_insert(0) += 1;
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_survive_manager_replicas_killed_with_sigkill() -> anyhow::Result<()> {
    let model = StandInModel::start(two_round_script(Duration::from_millis(150))).await?;
    let mut opts = StackOptions::new(profiles(&model), 3);
    opts.managers = 3;
    opts.manager_extra = "ack_wait_secs = 3\nsweep_interval_ms = 200".into();
    let mut stack = Stack::start(opts).await?;
    let mut ids = Vec::new();
    for _ in 0..20 {
        ids.push(
            stack.submit(TASK, &[]).await?["id"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
    }
    // Kill a random replica every ~1.5 s and start a fresh one, until every run has ended.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
    let mut kills = 0;
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    loop {
        let mut open = 0;
        for id in &ids {
            let v = stack.run(id).await?;
            let state = v["state"].as_str().unwrap_or("");
            if ![
                "completed",
                "blocked",
                "budget_exhausted",
                "cancelled",
                "failed",
            ]
            .contains(&state)
            {
                open += 1;
            }
        }
        if open == 0 {
            break;
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "{open} runs still open after {kills} kills\n{}",
            stack.logs()
        );
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let victim = (seed % stack.managers.len() as u64) as usize;
        stack.kill_manager(victim);
        kills += 1;
        stack.spawn_manager().await?;
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    assert!(kills >= 1, "the test must actually kill replicas");
    for id in &ids {
        let run = stack.run(id).await?;
        assert_eq!(run["state"], "completed", "{run}");
        let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
        let entries = log["entries"].as_array().cloned().unwrap_or_default();
        for kind in ["exec_dispatched", "exec_result", "audit_report"] {
            for (key, n) in count_by_round(&entries, kind) {
                assert_eq!(
                    n, 1,
                    "run {id}: {kind} for (generation, round) {key:?} appears {n} times"
                );
            }
        }
        // Each executed round started exactly one executor episode (no re-execution).
        let executor_starts: Vec<Value> = entries
            .iter()
            .filter(|e| e["role"] == "executor")
            .cloned()
            .collect();
        for (key, n) in count_by_round(&executor_starts, "episode_started") {
            assert_eq!(n, 1, "run {id}: round {key:?} was started {n} times");
        }
        // No evidence lost: one record per audited candidate, the last on the final snapshot.
        let audited: Vec<String> = entries
            .iter()
            .filter(|e| e["type"] == "audit_report")
            .filter_map(|e| e["snapshot"].as_str().map(str::to_string))
            .collect();
        let evidence = stack.get(&format!("/v1/runs/{id}/evidence")).await?;
        let bound: Vec<String> = evidence["evidence"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter_map(|e| e["artifact_version"].as_str().map(str::to_string))
            .collect();
        for snap in &audited {
            assert!(
                bound.contains(snap),
                "run {id}: evidence for audited snapshot {snap} is missing"
            );
        }
        assert!(bound.contains(&run["snapshot"].as_str().unwrap_or_default().to_string()));
    }
    println!("manager fault test: 20 runs completed with {kills} replica kills");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executor_killed_mid_episode_is_redelivered_and_the_round_completes_once(
) -> anyhow::Result<()> {
    // The first write is slow, so the episode is surely in flight when its worker dies.
    let executor = hello_executor(Duration::from_secs(20));
    let model = hello_model(executor).await?;
    let mut opts = StackOptions::new(profiles(&model), 2);
    opts.executor_extra = "ack_wait_secs = 3".into();
    let mut stack = Stack::start(opts).await?;
    let id = stack.submit_id(TASK).await?;
    // Find which executor started the episode, then kill it with SIGKILL.
    let victim = stack
        .first_episode_executor(&id, Duration::from_secs(60))
        .await?;
    stack.executors[victim].kill();
    let done = stack.wait_terminal(&id, Duration::from_secs(90)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
    let entries = log["entries"].as_array().cloned().unwrap_or_default();
    let starts = redone_once_by_another(&entries, "executor", "exec_result");
    assert_eq!(starts[1]["attempt"], 2, "the increment was redelivered");
    assert_eq!(done["round"], 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auditor_killed_mid_audit_is_redelivered_and_the_round_completes_once() -> anyhow::Result<()>
{
    let model = hello_model(hello_executor(Duration::ZERO)).await?;
    let mut opts = StackOptions::new(profiles(&model), 1);
    two_auditors_ack_wait_3s(&mut opts);
    let mut stack = Stack::start(opts).await?;
    let id = stack.submit_id(SLOW_CHECK_TASK).await?;
    let victim = stack
        .first_audit_auditor(&id, Duration::from_secs(60))
        .await?;
    let killed_at = unix_ms();
    match victim {
        0 => stack.auditor.kill(),
        i => stack.more_auditors[i - 1].kill(),
    }
    let done = stack.wait_terminal(&id, Duration::from_secs(90)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    assert_eq!(done["round"], 1, "{done}");
    let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
    let entries = log["entries"].as_array().cloned().unwrap_or_default();
    redone_once_by_another(&entries, "auditor", "audit_report");
    // How long the take-over took (a figure for docs/reliability.md, not asserted).
    let at = |kind: &str| {
        entries
            .iter()
            .rfind(|e| e["type"] == kind)
            .and_then(|e| e["at"].as_i64())
            .map_or(f64::NAN, |at| (at - killed_at) as f64 / 1000.0)
    };
    println!(
        "auditor killed mid-audit (ack_wait 3 s): the other auditor started it {:.1} s later, its report {:.1} s later",
        at("episode_started"),
        at("audit_report")
    );
    Ok(())
}

/// Round 1's step of `role` ran twice, the second time on another worker, and its result
/// (`result_kind`) was recorded once: its two `episode_started` entries.
fn redone_once_by_another<'a>(
    entries: &'a [Value],
    role: &str,
    result_kind: &str,
) -> Vec<&'a Value> {
    let starts: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "episode_started" && e["role"] == role && e["round"] == 1)
        .collect();
    assert_eq!(starts.len(), 2, "{entries:?}");
    assert_ne!(
        starts[1]["worker"], starts[0]["worker"],
        "another {role} redid it"
    );
    assert_eq!(
        count_by_round(entries, result_kind).get(&(1, 1)),
        Some(&1),
        "round 1's {result_kind} recorded once"
    );
    starts
}

/// nats-server SIGSTOPped for `pause`, then SIGCONTed.
async fn freeze_nats(stack: &mut Stack, pause: Duration) {
    stack.nats.process_mut().signal("STOP");
    tokio::time::sleep(pause).await;
    stack.nats.process_mut().signal("CONT");
}

/// Run `id` ended completed in round 1: its state and its log entries.
async fn completed_in_round_one(stack: &Stack, id: &str) -> anyhow::Result<(Value, Vec<Value>)> {
    let done = stack.wait_terminal(id, Duration::from_secs(90)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
    let entries = log["entries"].as_array().cloned().unwrap_or_default();
    assert_eq!(done["round"], 1, "{log}");
    Ok((done, entries))
}

fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_stopped_past_its_deadline_loses_only_that_round_and_takes_the_next(
) -> anyhow::Result<()> {
    // Round 1's first model call is slow, so its episode is in flight when its only executor
    // is stopped (SIGSTOP) past the episode's deadline (3 s limit + 1 s grace).
    let executor = hello_executor(Duration::from_secs(2));
    let model = hello_model(executor).await?;
    let mut opts = StackOptions::new(profiles(&model), 1);
    opts.manager_extra = "sweep_interval_ms = 200".into();
    let stack = Stack::start(opts).await?;
    let task = TASK.replace(
        "max_rounds = 6",
        "max_rounds = 6\nexecutor_episode_secs = 3\nepisode_grace_secs = 1",
    );
    let id = stack.submit(&task, &[]).await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    model
        .wait_for_requests("standin-executor", 1, Duration::from_secs(60))
        .await
        .map_err(|e| anyhow::anyhow!("{e}\n{}", stack.logs()))?;
    stack.executors[0].signal("STOP");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let missed = loop {
        let missed = stack.log_entries(&id, "deadline_missed").await?;
        if !missed.is_empty() {
            break missed;
        }
        if tokio::time::Instant::now() >= deadline {
            stack.executors[0].signal("CONT");
            anyhow::bail!("round 1's deadline never fired\n{}", stack.logs());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    stack.executors[0].signal("CONT");
    assert_eq!(missed[0]["round"], 1, "{missed:?}");
    // The same executor, back, drops round 1 (cancelled, or late and ignored) and takes round
    // 2: the cancel covered that round only, not the run's generation.
    let done = stack.wait_terminal(&id, Duration::from_secs(90)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
    let entries = log["entries"].as_array().cloned().unwrap_or_default();
    let results = count_by_round(&entries, "exec_result");
    assert_eq!(
        results.get(&(1, 1)),
        None,
        "round 1's late result was dropped: {log}"
    );
    assert_eq!(
        results.get(&(1, 2)),
        Some(&1),
        "round 2 finished once: {log}"
    );
    let starts: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "episode_started" && e["role"] == "executor")
        .collect();
    assert!(
        starts.iter().all(|e| e["worker"] == "exec-1"),
        "one executor did every round: {log}"
    );
    Ok(())
}

/// The executor's calls of the stand-in that start an episode (its first call: the last
/// message is the task, not a tool result).
fn episode_starts(model: &StandInModel) -> usize {
    model
        .requests("standin-executor")
        .iter()
        .filter(|req| {
            req["messages"]
                .as_array()
                .and_then(|m| m.last())
                .is_some_and(|m| m["role"] != "tool")
        })
        .count()
}

/// Workers' and audits' `ack_wait` in the freeze tests below.
const FREEZE_ACK_WAIT: Duration = Duration::from_secs(3);

/// A hello run whose executor answers after `delays`; nats-server is SIGSTOPped for twice
/// `ack_wait` as the executor's `call`-th model call is asked (past the holder's deadline,
/// `ack_wait` after its last heartbeat, and the claim's stale line, `ack_wait` + 1 s, so the
/// server redelivers the step the moment it is back). Round 1 must be recorded once, by one
/// episode.
async fn one_episode_through_a_nats_freeze(delays: HelloDelays, call: usize) -> anyhow::Result<()> {
    let model = hello_model(hello_executor_with(delays)).await?;
    let mut opts = StackOptions::new(profiles(&model), 2);
    opts.executor_extra = format!("ack_wait_secs = {}", FREEZE_ACK_WAIT.as_secs());
    opts.auditor_extra = format!("ack_wait_secs = {}", FREEZE_ACK_WAIT.as_secs());
    let mut stack = Stack::start(opts).await?;
    let id = stack.submit_id(TASK).await?;
    model
        .wait_for_requests("standin-executor", call, Duration::from_secs(60))
        .await
        .map_err(|e| anyhow::anyhow!("{e}\n{}", stack.logs()))?;
    freeze_nats(&mut stack, FREEZE_ACK_WAIT * 2).await;
    let (_, entries) = completed_in_round_one(&stack, &id).await?;
    let log = serde_json::json!({ "entries": entries });
    assert_eq!(
        count_by_round(&entries, "exec_result").get(&(1, 1)),
        Some(&1),
        "round 1 recorded once: {log}"
    );
    assert_eq!(
        episode_starts(&model),
        1,
        "round 1's episode ran once, through the freeze: {log}\n{}",
        stack.logs()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_stopped_past_ack_wait_as_an_episode_finishes_does_not_run_it_again(
) -> anyhow::Result<()> {
    // The episode's last model call (answered with `finish`) takes a second and the freeze
    // comes as it is asked: the agent finishes while NATS is away and the workspace's freeze
    // and the result wait for it.
    let delays = HelloDelays {
        each_finish: Duration::from_secs(1),
        ..HelloDelays::default()
    };
    one_episode_through_a_nats_freeze(delays, 2).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_stopped_past_ack_wait_mid_episode_pauses_it_and_runs_it_once() -> anyhow::Result<()> {
    // The episode's first model call (answered with `write_file`) takes longer than ack_wait
    // and the freeze comes as it is asked: the holder's deadline passes while the agent still
    // has work left (the write and its `finish`), so the episode pauses until NATS answers,
    // then goes on. Stopping it instead would run the step again.
    let delays = HelloDelays {
        each_write: FREEZE_ACK_WAIT + Duration::from_secs(1),
        ..HelloDelays::default()
    };
    one_episode_through_a_nats_freeze(delays, 1).await
}

/// A check that leaves a marker in its own copy of the candidate, then runs 1 s more; the
/// baseline audit (no `hello.py` yet) fails it at once and leaves none.
const MARKER_CHECK_TASK: &str = r#"
goal = "Create hello.py that prints exactly: hello, loopgate"
[[acceptance]]
id = "prints-greeting"
check = "test \"$(python3 hello.py)\" = 'hello, loopgate' && touch .lg-audit-check-ran && sleep 1"
[roles]
manager = "mgr"
executor = "exec"
[budget]
max_rounds = 6
"#;

/// A file named `name` anywhere under an auditor's work dir (`work-audit*`) in `dir` (the
/// executors' self-checks run the same check in their own work dirs).
fn in_an_audit(dir: &std::path::Path, name: &str) -> bool {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_entry(|e| {
            e.depth() != 1 || e.file_name().to_string_lossy().starts_with("work-audit")
        })
        .filter_map(Result::ok)
        .any(|e| e.file_name() == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_stopped_past_ack_wait_as_an_audit_runs_its_checks_does_not_run_it_again(
) -> anyhow::Result<()> {
    // nats-server is stopped as the round's check starts (it left its marker): the check
    // ends while NATS is away and its output is stored only once NATS answers, past the
    // claim's and the delivery's ack_wait.
    let model = hello_model(hello_executor(Duration::ZERO)).await?;
    let ack_wait = Duration::from_secs(3);
    let mut opts = StackOptions::new(profiles(&model), 2);
    opts.executor_extra = format!("ack_wait_secs = {}", ack_wait.as_secs());
    opts.auditor_extra = format!("ack_wait_secs = {}", ack_wait.as_secs());
    // The manager makes the audit durable: its ack_wait is the one the auditor follows.
    opts.manager_tables = format!("[jetstream]\naudit_ack_wait_secs = {}", ack_wait.as_secs());
    let mut stack = Stack::start(opts).await?;
    let id = stack.submit_id(MARKER_CHECK_TASK).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !in_an_audit(stack.dir.path(), ".lg-audit-check-ran") {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "no audit ran the round's check within 60 s\n{}",
            stack.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    freeze_nats(&mut stack, ack_wait * 4).await;
    let (done, entries) = completed_in_round_one(&stack, &id).await?;
    let log = serde_json::json!({ "entries": entries });
    let audit_starts = entries
        .iter()
        .filter(|e| e["type"] == "episode_started" && e["role"] == "auditor" && e["round"] == 1)
        .count();
    assert_eq!(
        audit_starts,
        1,
        "round 1's audit ran once, its evidence stored after NATS came back: {log}\n{}",
        stack.logs()
    );
    assert_eq!(
        count_by_round(&entries, "audit_report").get(&(1, 1)),
        Some(&1),
        "{log}"
    );
    let digest = done["evidence"][0]["log_digest"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!digest.is_empty(), "the check's output is named: {done}");
    let blob = reqwest::get(format!("{}/v1/blobs/{digest}", stack.http)).await?;
    assert_eq!(blob.status().as_u16(), 200, "and stored: {done}");
    Ok(())
}
