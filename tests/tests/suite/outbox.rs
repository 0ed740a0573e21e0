//! Nothing lost between the store and the bus (issue 16 items 1, 3 and 4): a dispatch stored
//! by a manager that dies before publishing it is published by another replica; a result that
//! cannot be applied through its last delivery is dead-lettered and its round fails at once;
//! so is an exec step whose executor dies with its last delivery; with `max_active_runs` new
//! runs wait `queued` and start first come, first served.

use std::sync::atomic::Ordering;
use std::time::Duration;

use loopgate_test_support::{last_message_content, Reply, Script, StandInModel};
use loopgate_tests::episode_faults::{hello_executor, slow_first_manager};
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

fn profiles(model: &StandInModel) -> Vec<Profile> {
    vec![
        Profile::new("mgr", &model.base_url(), "standin-manager"),
        Profile::new("exec", &model.base_url(), "standin-executor"),
    ]
}

/// A manager that always asks for hello.py, and an executor that writes it with a 2 s wait
/// before each reply.
async fn hello_in_two_second_turns() -> anyhow::Result<StandInModel> {
    StandInModel::start(
        Script::new()
            .fallback(
                "standin-manager",
                Reply::content("Next: cli\nTask: write hello.py"),
            )
            .fallback("standin-executor", hello_executor(Duration::from_secs(2))),
    )
    .await
}

/// The run completes within 90 s with the one round it was dispatched, no round failed at a
/// deadline, and the manager logged `logged` (what recovered it: `why`).
async fn completes_in_its_one_round(
    stack: &Stack,
    id: &str,
    logged: &str,
    why: &str,
) -> anyhow::Result<()> {
    let done = stack.wait_terminal(id, Duration::from_secs(90)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    let types = stack.log_types(id).await?;
    assert!(
        !types.contains(&"deadline_missed".to_string()),
        "no round may fail for what was lost: {types:?}"
    );
    let dispatched = types.iter().filter(|t| *t == "exec_dispatched").count();
    assert_eq!(dispatched, 1, "the step ran once: {types:?}");
    assert!(
        stack.manager_log().contains(logged),
        "{why}\n{}",
        stack.logs()
    );
    Ok(())
}

async fn wait_for<F, Fut>(what: &str, timeout: Duration, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    while !check().await {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "{what} not seen within {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatch_stored_by_a_manager_killed_before_publishing_is_published_by_another(
) -> anyhow::Result<()> {
    // The manager's first decision is slow: NATS is killed while the model thinks, so the
    // decision is stored but its exec request cannot leave; then that manager is killed too
    // (whatever its client buffered dies with it).
    let (manager, asked) = slow_first_manager(Duration::from_secs(2));
    let model = StandInModel::start(
        Script::new()
            .fallback("standin-manager", manager)
            .fallback("standin-executor", hello_executor(Duration::ZERO)),
    )
    .await?;
    let mut opts = StackOptions::new(profiles(&model), 1);
    opts.manager_extra = "ack_wait_secs = 3\nsweep_interval_ms = 200".into();
    let mut stack = Stack::start(opts).await?;
    // The first step is the manager's slow decision (not the goal's one clause).
    let manager_first = TASK.replace("[budget]\n", "[budget]\nclause_steps = false\n");
    let id = stack.submit(&manager_first, &[]).await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let seen = asked.clone();
    wait_for("the first decision call", Duration::from_secs(60), || {
        let seen = seen.clone();
        async move { seen.load(Ordering::SeqCst) }
    })
    .await?;
    stack.nats.kill();
    // The decision is stored (the API reads Redis) while nothing can be published.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !stack
        .log_types(&id)
        .await?
        .contains(&"exec_dispatched".to_string())
    {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "the decision was never stored\n{}",
            stack.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stack.kill_manager(0);
    stack.nats.restart().await?;
    stack.spawn_manager().await?;
    // Well inside the 120 s start deadline that recovered such a run before the outbox.
    completes_in_its_one_round(
        &stack,
        &id,
        "pending effects published by the outbox relay",
        "the new replica's relay published it",
    )
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_that_exhausts_its_deliveries_is_dead_lettered_and_its_round_fails_now(
) -> anyhow::Result<()> {
    let model = hello_in_two_second_turns().await?;
    let mut opts = StackOptions::new(profiles(&model), 1);
    opts.manager_extra = "ack_wait_secs = 3\nmax_deliver = 2\nsweep_interval_ms = 200".into();
    let mut stack = Stack::start(opts).await?;
    let id = stack.submit(TASK, &[]).await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    // An executor's episode (the auditor's checks of the starting workspace come first).
    while !stack
        .log_entries(&id, "episode_started")
        .await?
        .iter()
        .any(|e| e["role"] == "executor")
    {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "no episode started\n{}",
            stack.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Redis freezes while the executor works: its result cannot be applied, twice.
    stack.redis.process_mut().signal("STOP");
    let frozen = wait_for("the dead letter", Duration::from_secs(90), || {
        let log = stack.manager_log();
        async move { log.contains("dead-lettered") }
    })
    .await;
    stack.redis.process_mut().signal("CONT");
    frozen.map_err(|e| anyhow::anyhow!("{e}\n{}", stack.logs()))?;
    let done = stack.wait_terminal(&id, Duration::from_secs(90)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    let dead = stack.log_entries(&id, "dead_letter").await?;
    assert!(
        dead.iter().any(|e| e["kind"] == "exec_result"),
        "the run log names the dead letter: {dead:?}"
    );
    let types = stack.log_types(&id).await?;
    assert!(
        !types.contains(&"deadline_missed".to_string()),
        "the round failed at once, not at a deadline: {types:?}"
    );
    assert!(
        types.iter().filter(|t| *t == "exec_dispatched").count() >= 2,
        "the failed round was followed by another: {types:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_step_whose_last_delivery_dies_is_dead_lettered_and_its_round_fails_now(
) -> anyhow::Result<()> {
    // The first episode's model call hangs; its executor is killed with it.
    let model = StandInModel::start(
        Script::new()
            .fallback(
                "standin-manager",
                Reply::content("Next: cli\nTask: write hello.py"),
            )
            .fallback("standin-executor", hello_executor(Duration::from_secs(600))),
    )
    .await?;
    let mut opts = StackOptions::new(profiles(&model), 2);
    // One delivery per exec step: the executor that dies with it was its last.
    opts.executor_extra = "ack_wait_secs = 3\nmax_deliver = 1".into();
    opts.manager_extra = "sweep_interval_ms = 200".into();
    let mut stack = Stack::start(opts).await?;
    let id = stack.submit(TASK, &[]).await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let index = stack
        .first_episode_executor(&id, Duration::from_secs(60))
        .await?;
    // Its first model call (the one that hangs) is in flight before it dies.
    model
        .wait_for_requests("standin-executor", 1, Duration::from_secs(30))
        .await?;
    stack.executors[index].kill();
    // The other executor's pulls make the server give up on the step after ack_wait; the
    // manager turns the advisory into a dead letter and the round fails then.
    wait_for("the dead letter", Duration::from_secs(60), || {
        let log = stack.manager_log();
        async move { log.contains("dead-lettered") }
    })
    .await
    .map_err(|e| anyhow::anyhow!("{e}\n{}", stack.logs()))?;
    let done = stack.wait_terminal(&id, Duration::from_secs(90)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    let dead = stack.log_entries(&id, "dead_letter").await?;
    assert!(
        dead.iter().any(|e| e["kind"] == "exec_request"),
        "the run log names the dead exec request: {dead:?}"
    );
    let types = stack.log_types(&id).await?;
    assert!(
        !types.contains(&"deadline_missed".to_string()),
        "the round failed at once, not at a deadline: {types:?}"
    );
    // Taken off the work queue: no step of the finished run is left in LG_EXEC.
    let js = async_nats::jetstream::new(async_nats::connect(stack.nats.url()).await?);
    let mut exec = js.get_stream("LG_EXEC").await?;
    let left = exec.info().await?.state.messages;
    assert_eq!(left, 0, "messages left in LG_EXEC");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_max_active_runs_new_runs_wait_queued_and_start_in_order() -> anyhow::Result<()> {
    let model = StandInModel::start(
        Script::new()
            .fallback(
                "standin-manager",
                Reply::dynamic(|req: &Value| {
                    let _ = last_message_content(req, "user");
                    Reply::content("Next: cli\nTask: write hello.py")
                }),
            )
            .fallback("standin-executor", hello_executor(Duration::ZERO)),
    )
    .await?;
    let mut opts = StackOptions::new(profiles(&model), 2);
    opts.manager_extra = "max_active_runs = 1\nsweep_interval_ms = 200".into();
    let stack = Stack::start(opts).await?;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let run = stack.submit(TASK, &[]).await?;
        assert_eq!(run["state"], "queued", "{run}");
        ids.push(run["id"].as_str().unwrap_or_default().to_string());
    }
    // The last one waits for a slot while the first holds it.
    let last = stack.run(&ids[2]).await?;
    assert_eq!(
        (last["state"].as_str(), last["phase"].as_str()),
        (Some("queued"), Some("admission")),
        "{last}"
    );
    let mut previous_end: Option<i64> = None;
    for id in &ids {
        let done = stack.wait_terminal(id, Duration::from_secs(120)).await?;
        assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
        let admitted = stack.log_entries(id, "admitted").await?;
        assert_eq!(admitted.len(), 1, "{id}: {admitted:?}");
        let at = admitted[0]["at"].as_i64().unwrap_or_default();
        if let Some(end) = previous_end {
            assert!(at >= end, "{id} started before the run ahead of it ended");
        }
        let terminal = stack.log_entries(id, "terminal").await?;
        previous_end = terminal.first().and_then(|e| e["at"].as_i64());
    }
    Ok(())
}

/// A result the worker published that never reached its run (here: purged from the results
/// stream while no manager ran; in the 2026-12-07 chaos run, one acked against a stale state)
/// is taken from the step's claim once the run has been quiet for `overdue_after_secs`,
/// instead of waiting out the step's deadline (the episode's 30 minutes and a minute).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_lost_on_its_way_is_taken_from_the_steps_claim() -> anyhow::Result<()> {
    let model = hello_in_two_second_turns().await?;
    let mut opts = StackOptions::new(profiles(&model), 1);
    opts.manager_extra = "sweep_interval_ms = 200\noverdue_after_secs = 2".into();
    let mut stack = Stack::start(opts).await?;
    let id = stack.submit_id(TASK).await?;
    stack
        .first_episode_executor(&id, Duration::from_secs(60))
        .await?;
    stack.kill_manager(0);
    let published = format!("result.exec.{id}");
    wait_for(
        "the episode's result published",
        Duration::from_secs(60),
        || {
            let logs = stack.logs();
            let published = published.clone();
            async move {
                logs.lines()
                    .any(|l| l.contains("result published") && l.contains(&published))
            }
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}\n{}", stack.logs()))?;
    let js = async_nats::jetstream::new(async_nats::connect(stack.nats.url()).await?);
    let purged = js
        .get_stream(loopgate_protocol::subjects::STREAM_RESULTS)
        .await?
        .purge()
        .await?;
    assert!(
        purged.purged >= 1,
        "the result was in the stream: {purged:?}"
    );
    stack.spawn_manager().await?;
    completes_in_its_one_round(
        &stack,
        &id,
        "taken from its claim",
        "the new replica took the result from the claim",
    )
    .await?;
    Ok(())
}
