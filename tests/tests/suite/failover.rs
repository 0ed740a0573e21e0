//! Network and Redis faults under a whole stack, through the fault proxy and Redis Sentinel: a
//! manager cut off from Redis for longer than its `ack_wait`, the Redis primary killed
//! mid-run (the sentinels promote the replica), an executor cut off from NATS mid-episode, and
//! a manager cut off from NATS while another serves. Every run must complete, every round
//! once, and nothing acknowledged may be lost.

use std::collections::BTreeMap;
use std::time::Duration;

use loopgate_test_support::{wait_until, ProxyFault, Reply, Script, StandInModel};
use loopgate_tests::episode_faults::{hello_executor, two_auditors_ack_wait_3s, SLOW_CHECK_TASK};
use loopgate_tests::{Profile, Stack, StackOptions};
use serde_json::Value;

const TASK: &str = r#"
goal = "Create hello.py that prints exactly: hello, loopgate"
[[acceptance]]
id = "prints-greeting"
check = "test \"$(python3 hello.py)\" = 'hello, loopgate'"
[roles]
manager = "mgr"
executor = "exec"
[budget]
max_rounds = 4
"#;

/// The managers' `ack_wait`: the partition below lasts several of them.
const ACK_WAIT: Duration = Duration::from_secs(2);

fn profiles(model: &StandInModel) -> Vec<Profile> {
    vec![
        Profile::new("mgr", &model.base_url(), "standin-manager"),
        Profile::new("exec", &model.base_url(), "standin-executor"),
    ]
}

/// The executor's first model call takes `first_delay`, so its episode is in flight when the
/// fault comes.
async fn model(first_delay: Duration) -> anyhow::Result<StandInModel> {
    StandInModel::start(
        Script::new()
            .fallback(
                "standin-manager",
                Reply::content("Next: cli\nTask: write hello.py"),
            )
            .fallback("standin-executor", hello_executor(first_delay)),
    )
    .await
}

async fn entries(stack: &Stack, id: &str) -> anyhow::Result<Vec<Value>> {
    let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
    Ok(log["entries"].as_array().cloned().unwrap_or_default())
}

/// The run took one round with one executor episode, nothing was dead-lettered, and every
/// round was dispatched, executed, audited and its executor episode started once.
fn assert_one_round_once(id: &str, done: &Value, entries: &[Value]) {
    assert_eq!(done["round"], 1, "run {id}: {done}");
    let episodes = entries
        .iter()
        .filter(|e| e["type"] == "episode_started" && e["role"] == "executor")
        .count();
    assert_eq!(
        episodes, 1,
        "run {id}: {episodes} executor episodes: {entries:?}"
    );
    assert!(
        !entries.iter().any(|e| e["type"] == "dead_letter"),
        "run {id}: a message was dead-lettered: {entries:?}"
    );
    assert_each_round_once(id, entries);
}

/// Every round was dispatched, executed, audited and its executor episode started once.
fn assert_each_round_once(id: &str, entries: &[Value]) {
    let count = |kind: &str, role: Option<&str>| {
        let mut counts: BTreeMap<(u64, u64), usize> = BTreeMap::new();
        for e in entries
            .iter()
            .filter(|e| e["type"] == kind && role.is_none_or(|r| e["role"] == r))
        {
            let key = (
                e["generation"].as_u64().unwrap_or(0),
                e["round"].as_u64().unwrap_or(0),
            );
            *counts.entry(key).or_insert(0) += 1;
        }
        counts
    };
    for (kind, role) in [
        ("exec_dispatched", None),
        ("exec_result", None),
        ("audit_report", None),
        ("episode_started", Some("executor")),
    ] {
        let counts = count(kind, role);
        assert!(!counts.is_empty(), "run {id}: no {kind}");
        for (key, n) in counts {
            assert_eq!(
                n, 1,
                "run {id}: {kind} for (generation, round) {key:?} appears {n} times"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_cut_off_from_redis_past_ack_wait_finishes_the_run_once_healed(
) -> anyhow::Result<()> {
    let model = model(Duration::from_secs(1)).await?;
    let mut opts = StackOptions::new(profiles(&model), 1);
    opts.manager_extra = format!(
        "ack_wait_secs = {}\nsweep_interval_ms = 200",
        ACK_WAIT.as_secs()
    );
    opts.redis_proxy = true;
    let stack = Stack::start(opts).await?;
    let id = stack.submit_id(TASK).await?;
    stack
        .first_episode_executor(&id, Duration::from_secs(60))
        .await?;
    let proxy = stack.redis_proxy.as_ref().expect("a Redis proxy");
    proxy.drop_traffic();
    // The executor finishes its episode during the partition: its result reaches a manager
    // that cannot store it.
    let published = wait_until(Duration::from_secs(60), || async {
        stack.executors[0].log_text().contains("result published")
    })
    .await;
    assert!(
        published.is_ok(),
        "the executor never published its result\n{}",
        stack.logs()
    );
    // The partition lasts several ack_waits past that: JetStream redelivers the result while
    // the first try still hangs on Redis.
    tokio::time::sleep(ACK_WAIT * 3).await;
    proxy.heal();
    let done = stack.wait_terminal(&id, Duration::from_secs(120)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    assert_one_round_once(&id, &done, &entries(&stack, &id).await?);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_failover_mid_run_loses_no_transition() -> anyhow::Result<()> {
    let model = model(Duration::from_secs(2)).await?;
    let mut opts = StackOptions::new(profiles(&model), 1);
    opts.manager_extra = format!(
        "ack_wait_secs = {}\nsweep_interval_ms = 200",
        ACK_WAIT.as_secs()
    );
    opts.redis_ha = true;
    let mut stack = Stack::start(opts).await?;
    let id = stack.submit_id(TASK).await?;
    stack
        .first_episode_executor(&id, Duration::from_secs(60))
        .await?;
    // Everything the API showed before the kill was acknowledged, so on the replica.
    let before = entries(&stack, &id).await?;
    let ha = stack.redis_ha.as_mut().expect("Redis with sentinels");
    let old = ha.kill_primary().await?;
    let new = ha.wait_failover(old, Duration::from_secs(30)).await?;
    // The old primary comes back as a replica of the new one, so writes can be acknowledged
    // again (with one replica, min_replicas_acked = 1 holds every transition until then).
    let node = ha
        .node_mut(old)
        .ok_or_else(|| anyhow::anyhow!("no node :{old}"))?;
    node.restart_as_replica_of(new).await?;
    node.wait_replicating(Duration::from_secs(30)).await?;
    let done = stack.wait_terminal(&id, Duration::from_secs(120)).await?;
    let logs = || {
        format!(
            "{}\n{}",
            stack.logs(),
            stack
                .redis_ha
                .as_ref()
                .map(|h| h.logs())
                .unwrap_or_default()
        )
    };
    assert_eq!(done["state"], "completed", "{done}\n{}", logs());
    let after = entries(&stack, &id).await?;
    assert!(
        after.len() >= before.len() && after[..before.len()] == before[..],
        "the log lost or changed entries across the failover:\nbefore {before:?}\nafter {after:?}"
    );
    assert_one_round_once(&id, &done, &after);
    assert!(
        stack.manager_log().contains("following the new primary"),
        "the manager never moved to the promoted replica\n{}",
        logs()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_cut_off_from_nats_mid_episode_loses_its_step_to_another_once(
) -> anyhow::Result<()> {
    // The first episode's first model call is slow, so it is in flight when its worker's NATS
    // traffic is cut; the stand-in model is reached directly, so the episode itself finishes.
    let model = model(Duration::from_secs(3)).await?;
    let mut opts = StackOptions::new(profiles(&model), 2);
    opts.executor_extra = "ack_wait_secs = 3".into();
    opts.executor_nats_proxy = true;
    let stack = Stack::start(opts).await?;
    let id = stack.submit_id(TASK).await?;
    let victim = stack
        .first_episode_executor(&id, Duration::from_secs(60))
        .await?;
    let proxy = &stack.executor_nats_proxies[victim];
    proxy.drop_traffic();
    // The step is redelivered past ack_wait and, once the victim's claim has lapsed, taken
    // over by the other executor.
    let taken_over = wait_until(Duration::from_secs(90), || async {
        entries(&stack, &id).await.is_ok_and(|e| {
            e.iter()
                .filter(|e| e["type"] == "episode_started" && e["role"] == "executor")
                .count()
                >= 2
        })
    })
    .await;
    assert!(
        taken_over.is_ok(),
        "no other executor took the step over\n{}",
        stack.logs()
    );
    // The victim comes back with its own (late) result of the same step.
    proxy.heal();
    let done = stack.wait_terminal(&id, Duration::from_secs(120)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    let all = entries(&stack, &id).await?;
    assert_eq!(done["round"], 1, "{done}");
    let workers: Vec<&str> = all
        .iter()
        .filter(|e| e["type"] == "episode_started" && e["role"] == "executor")
        .filter_map(|e| e["worker"].as_str())
        .collect();
    assert_eq!(workers.len(), 2, "{all:?}");
    assert_ne!(
        workers[0], workers[1],
        "another executor took the step over"
    );
    let results = all.iter().filter(|e| e["type"] == "exec_result").count();
    assert_eq!(results, 1, "one result applied for the step: {all:?}");
    Ok(())
}

/// A `POST /v1/runs` refused because no replica acknowledged the creation (the replica stopped)
/// answers 503 and leaves no run behind: nothing listed, nothing started once the replica is
/// back. A submission after that is stored and completes.
#[tokio::test]
async fn a_refused_submission_leaves_no_run_behind() -> anyhow::Result<()> {
    let model = model(Duration::ZERO).await?;
    let mut opts = StackOptions::new(profiles(&model), 1);
    opts.redis_ha = true;
    let mut stack = Stack::start(opts).await?;
    let task = loopgate_common::task::parse_task_file_toml(TASK)?;
    let body = serde_json::json!({ "task": task });
    let ha = stack.redis_ha.as_mut().expect("Redis with sentinels");
    let replica = ha.nodes[1].port();
    ha.nodes[1].process_mut().signal("STOP");
    let refused = stack.post_raw("/v1/runs", &body).await;
    let ha = stack.redis_ha.as_mut().expect("Redis with sentinels");
    ha.nodes[1].process_mut().signal("CONT");
    let (status, answer) = refused?;
    assert_eq!(status, 503, "{answer}");
    assert!(
        answer.to_string().contains("replicas acknowledged"),
        "{answer}"
    );
    ha.nodes[1]
        .wait_replicating(Duration::from_secs(30))
        .await?;
    // Longer than the relay's claim age (3 s): a stored run would have started by now.
    let listed = wait_until(Duration::from_secs(5), || async {
        stack
            .get("/v1/runs")
            .await
            .is_ok_and(|l| l["runs"].as_array().is_some_and(|r| !r.is_empty()))
    })
    .await;
    assert!(
        listed.is_err(),
        "the refused submission left a run behind (replica :{replica}): {}",
        stack.get("/v1/runs").await?
    );
    let id = stack.submit_id(TASK).await?;
    let done = stack.wait_terminal(&id, Duration::from_secs(60)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    let runs = stack.get("/v1/runs").await?;
    assert_eq!(runs["runs"].as_array().map(Vec::len), Some(1), "{runs}");
    Ok(())
}

/// A stand-in whose manager takes `decision_delay` over each decision and whose executor
/// writes the right `hello.py` at once.
async fn slow_decisions_model(decision_delay: Duration) -> anyhow::Result<StandInModel> {
    StandInModel::start(
        Script::new()
            .fallback(
                "standin-manager",
                Reply::delayed(
                    decision_delay,
                    Reply::content("Next: cli\nTask: write hello.py"),
                ),
            )
            .fallback("standin-executor", hello_executor(Duration::ZERO)),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_cut_off_from_nats_leaves_its_runs_to_the_other_and_duplicates_nothing_healed(
) -> anyhow::Result<()> {
    const RUNS: usize = 3;
    // Each run's first step is a manager decision (no clause step), answered after 1 s: less
    // than the managers' ack_wait, so the cut manager stores its decisions (Redis is still
    // reachable) before the other could be handed their requests.
    let model = slow_decisions_model(Duration::from_secs(1)).await?;
    let mut opts = StackOptions::new(profiles(&model), RUNS);
    opts.manager_extra = format!(
        "ack_wait_secs = {}\nsweep_interval_ms = 200",
        ACK_WAIT.as_secs()
    );
    opts.manager_nats_proxy = true;
    let mut stack = Stack::start(opts).await?;
    let task = TASK.replace("max_rounds = 4", "max_rounds = 4\nclause_steps = false");
    let mut ids = Vec::new();
    for _ in 0..RUNS {
        let run = stack.submit(&task, &[]).await?;
        ids.push(run["id"].as_str().unwrap_or_default().to_string());
    }
    // The only manager so far holds every run's decision request and is asking the model.
    model
        .wait_for_requests("standin-manager", RUNS, Duration::from_secs(60))
        .await
        .map_err(|e| anyhow::anyhow!("{e}\n{}", stack.logs()))?;
    let cut_at = tokio::time::Instant::now();
    stack.managers[0]
        .nats_proxy
        .as_ref()
        .expect("a NATS proxy per manager")
        .drop_traffic();
    // Another manager serves while the cut lasts. The cut one stores its decisions with
    // their exec requests in Redis but cannot publish them, nor ack the decision requests.
    stack.spawn_manager().await?;
    // The other manager carries every run to its end while the cut lasts (the API of either
    // reads the same Redis).
    let mut before_heal = Vec::new();
    for id in &ids {
        let done = stack.wait_terminal(id, Duration::from_secs(60)).await?;
        assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
        before_heal.push(entries(&stack, id).await?);
    }
    let cut = &stack.managers[0];
    let proxy = cut.nats_proxy.as_ref().expect("a NATS proxy per manager");
    assert_eq!(proxy.fault(), ProxyFault::Drop, "still cut");
    let other = stack.managers[1].child.log_text();
    assert!(
        other.contains("pending effects published by the outbox relay"),
        "the other manager published what the cut one stored\n{}",
        stack.logs()
    );
    // The cut lasts several of the managers' ack_waits in all.
    tokio::time::sleep((ACK_WAIT * 3).saturating_sub(cut_at.elapsed())).await;
    proxy.heal();
    // Healed, the cut manager's held bytes (its publishes of the exec requests, acks, pull
    // requests) reach NATS at once. The window below lets them land and any redelivery they
    // cause run its course (an absence has no event to wait on); then nothing may have
    // changed, and it serves again.
    tokio::time::sleep(ACK_WAIT * 3).await;
    let (status, body) = stack.get_status("/readyz").await?;
    assert_eq!(
        status,
        200,
        "the healed manager is not ready: {body}\n{}",
        stack.logs()
    );
    for (id, before) in ids.iter().zip(&before_heal) {
        let done = stack.run(id).await?;
        let after = entries(&stack, id).await?;
        assert_one_round_once(id, &done, &after);
        assert_eq!(
            after.len(),
            before.len(),
            "run {id}: the healed manager changed the log: {after:?}"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_auditor_cut_off_from_nats_mid_audit_loses_its_audit_to_another_once(
) -> anyhow::Result<()> {
    let model = model(Duration::ZERO).await?;
    let mut opts = StackOptions::new(profiles(&model), 1);
    two_auditors_ack_wait_3s(&mut opts);
    opts.auditor_nats_proxy = true;
    let stack = Stack::start(opts).await?;
    let id = stack.submit_id(SLOW_CHECK_TASK).await?;
    let auditor_starts = |entries: &[Value]| -> Vec<String> {
        entries
            .iter()
            .filter(|e| e["type"] == "episode_started" && e["role"] == "auditor")
            .filter_map(|e| e["worker"].as_str().map(str::to_string))
            .collect()
    };
    let victim = stack
        .first_audit_auditor(&id, Duration::from_secs(60))
        .await?;
    let proxy = &stack.auditor_nats_proxies[victim];
    proxy.drop_traffic();
    // Past ack_wait the audit is redelivered and, once the victim's claim has lapsed, taken
    // over by the other auditor.
    let taken_over = wait_until(Duration::from_secs(90), || async {
        entries(&stack, &id)
            .await
            .is_ok_and(|e| auditor_starts(&e).len() >= 2)
    })
    .await;
    assert!(
        taken_over.is_ok(),
        "no other auditor took the audit over\n{}",
        stack.logs()
    );
    proxy.heal();
    let done = stack.wait_terminal(&id, Duration::from_secs(120)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    assert_eq!(done["round"], 1, "{done}");
    let all = entries(&stack, &id).await?;
    let workers = auditor_starts(&all);
    assert_eq!(workers.len(), 2, "{all:?}");
    assert_ne!(
        workers[0], workers[1],
        "another auditor took the audit over"
    );
    let reports = all.iter().filter(|e| e["type"] == "audit_report").count();
    assert_eq!(reports, 1, "one report applied for the audit: {all:?}");
    assert!(
        !all.iter().any(|e| e["type"] == "dead_letter"),
        "a message was dead-lettered: {all:?}"
    );
    Ok(())
}
