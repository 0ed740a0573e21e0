//! Backlog is not failure (issue 16 item 4): with one executor and three runs whose episodes
//! each take longer than the start budget, the later runs' steps wait in the queue past
//! `start_secs`. That is queue wait (logged `queue_wait`, counted again), not a missed start:
//! no round fails for it, the waiting run shows `queued_since`, and every run completes.

use std::time::Duration;

use loopgate_test_support::{Reply, Script, StandInModel};
use loopgate_tests::episode_faults::{hello_executor_with, HelloDelays};
use loopgate_tests::{Profile, Stack, StackOptions};

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
start_secs = 1
"#;

const RUNS: usize = 3;

/// Every episode: a slow write (longer than the start budget), then finish.
fn slow_executor() -> Reply {
    hello_executor_with(HelloDelays {
        each_write: Duration::from_millis(2500),
        ..HelloDelays::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_queued_behind_a_busy_executor_wait_instead_of_failing_their_round(
) -> anyhow::Result<()> {
    let model = StandInModel::start(
        Script::new()
            .fallback(
                "standin-manager",
                Reply::content("Next: cli\nTask: write hello.py"),
            )
            .fallback("standin-executor", slow_executor()),
    )
    .await?;
    let profiles = vec![
        Profile::new("mgr", &model.base_url(), "standin-manager"),
        Profile::new("exec", &model.base_url(), "standin-executor"),
    ];
    let mut opts = StackOptions::new(profiles, 1);
    opts.manager_extra = "sweep_interval_ms = 200".into();
    // Heartbeats every third of a second: the manager hears the executor before the first
    // start budget (1 s) runs out, even if it subscribed after the executor's first beat.
    opts.executor_extra = "capability_ttl_secs = 1".into();
    let stack = Stack::start(opts).await?;
    let mut ids = Vec::new();
    for _ in 0..RUNS {
        let run = stack.submit(TASK, &[]).await?;
        ids.push(run["id"].as_str().unwrap_or_default().to_string());
    }
    // While a step waits behind the busy executor, its run says so (`queued_since`).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    'seen: loop {
        for id in &ids {
            let view = stack.run(id).await?;
            if view["phase"] == "executing" && view["queued_since"].as_i64().is_some() {
                break 'seen;
            }
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "no run showed queued_since while waiting\n{}",
            stack.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut queue_waits = 0;
    for id in &ids {
        let done = stack.wait_terminal(id, Duration::from_secs(180)).await?;
        let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
        assert_eq!(done["state"], "completed", "{done}\n{log}");
        assert!(done["queued_since"].is_null(), "{id}: {done}");
        let missed = stack.log_entries(id, "deadline_missed").await?;
        assert!(missed.is_empty(), "{id}: {missed:?}");
        let dispatched = stack.log_entries(id, "exec_dispatched").await?;
        assert_eq!(
            dispatched.len(),
            1,
            "{id}: one round, none failed: {dispatched:?}"
        );
        queue_waits += stack.log_entries(id, "queue_wait").await?.len();
    }
    // The scenario did happen: some step outwaited its start budget in the queue.
    assert!(
        queue_waits >= 1,
        "no step waited past start_secs\n{}",
        stack.logs()
    );
    Ok(())
}
