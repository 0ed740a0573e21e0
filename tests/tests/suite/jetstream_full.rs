//! JetStream's store on a full disk under a whole stack: nats-server stores on a small tmpfs
//! that fills while the manager decides the run's first step. The step's publish gets no
//! PubAck (nats-server fails the stream on `no space left on device`), the effect stays in the
//! outbox and the relay publishes it again, and the manager's `/readyz` answers 503 saying
//! why. Once space is freed and nats-server restarted, the run completes with one exec step
//! and one executor episode, nothing dead-lettered, and `/readyz` is 200 again.

use std::time::Duration;

use loopgate_test_support::{wait_until, Script, StandInModel, Tmpfs};
use loopgate_tests::episode_faults::{hello_executor, slow_first_manager};
use loopgate_tests::{Profile, Stack, StackOptions};

/// The manager decides the first step itself (not the goal's one clause), so its decision is
/// the publish that meets the full store.
const TASK: &str = r#"
goal = "Create hello.py that prints exactly: hello, loopgate"
[[acceptance]]
id = "prints-greeting"
check = "test \"$(python3 hello.py)\" = 'hello, loopgate'"
[roles]
manager = "mgr"
executor = "exec"
[budget]
clause_steps = false
max_rounds = 4
"#;

async fn readyz(url: &str) -> (u16, String) {
    match reqwest::get(format!("{url}/readyz")).await {
        Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
        Err(e) => (0, e.to_string()),
    }
}

/// The manager's `loopgate_jetstream_publish_unacked_seconds`, when it exports it.
async fn unacked_seconds(url: &str) -> Option<f64> {
    let text = reqwest::get(format!("{url}/metrics"))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    let name = "loopgate_jetstream_publish_unacked_seconds";
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .find_map(|l| l.split_whitespace().last()?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_jetstream_store_is_named_on_readyz_and_the_run_goes_on_after_a_restart(
) -> anyhow::Result<()> {
    let what = "jetstream_full::a_full_jetstream_store_is_named_on_readyz_and_the_run_goes_on_after_a_restart";
    let Some(disk) = Tmpfs::mount("64m", what)? else {
        return Ok(());
    };
    // The manager's first decision is slow: the store fills while the model thinks.
    let (manager, _) = slow_first_manager(Duration::from_secs(2));
    let model = StandInModel::start(
        Script::new()
            .fallback("standin-manager", manager)
            .fallback("standin-executor", hello_executor(Duration::ZERO)),
    )
    .await?;
    let profiles = vec![
        Profile::new("mgr", &model.base_url(), "standin-manager"),
        Profile::new("exec", &model.base_url(), "standin-executor"),
    ];
    let mut opts = StackOptions::new(profiles, 1);
    opts.nats_store = Some(disk.path().join("jetstream"));
    // JetStream refuses streams whose caps add up beyond 75% of the store's filesystem: five
    // 4 MiB streams on the 64 MiB tmpfs (the default is 256 MiB each).
    opts.manager_tables = "[jetstream]\nstream_max_bytes = 4194304\n".into();
    let mut stack = Stack::start(opts).await?;
    let manager = stack.any_http().to_string();
    anyhow::ensure!(
        readyz(&manager).await.0 == 200,
        "{:?}",
        readyz(&manager).await
    );

    let id = stack.submit(TASK, &[]).await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    model
        .wait_for_requests("standin-manager", 1, Duration::from_secs(60))
        .await?;
    disk.fill()?;

    let stalled = wait_until(Duration::from_secs(90), || async {
        let (status, body) = readyz(&manager).await;
        status == 503 && body.contains("jetstream publish: no acknowledgement")
    })
    .await;
    anyhow::ensure!(
        stalled.is_ok(),
        "/readyz with JetStream's store full: {:?}\n{}\n--- nats-server ---\n{}",
        readyz(&manager).await,
        stack.logs(),
        stack.nats.log_text()
    );
    let (_, why) = readyz(&manager).await;
    eprintln!("manager /readyz while JetStream's store is full: {why}");
    anyhow::ensure!(
        why.contains("no space left on device") && why.contains("restart"),
        "{why}"
    );
    let gauge = wait_until(Duration::from_secs(30), || async {
        unacked_seconds(&manager).await.is_some_and(|s| s > 0.0)
    })
    .await;
    anyhow::ensure!(
        gauge.is_ok(),
        "gauge: {:?}",
        unacked_seconds(&manager).await
    );
    anyhow::ensure!(
        stack.nats.log_text().contains("no space left on device"),
        "nats-server did not hit the full disk\n{}",
        stack.nats.log_text()
    );

    disk.free()?;
    stack.nats.restart().await?;
    let done = stack.wait_terminal(&id, Duration::from_secs(120)).await?;
    anyhow::ensure!(done["state"] == "completed", "{done}\n{}", stack.logs());
    let types = stack.log_types(&id).await?;
    let count = |kind: &str| types.iter().filter(|t| *t == kind).count();
    anyhow::ensure!(count("exec_dispatched") == 1, "{types:?}");
    anyhow::ensure!(count("dead_letter") == 0, "dead-lettered: {types:?}");
    let episodes = stack.log_entries(&id, "episode_started").await?;
    let executor_episodes = episodes.iter().filter(|e| e["role"] == "executor").count();
    anyhow::ensure!(executor_episodes == 1, "{episodes:?}");
    anyhow::ensure!(
        stack
            .manager_log()
            .contains("left pending for the outbox relay"),
        "the stalled publish was left for the relay\n{}",
        stack.logs()
    );
    let ready = wait_until(Duration::from_secs(30), || async {
        readyz(&manager).await.0 == 200
    })
    .await;
    anyhow::ensure!(
        ready.is_ok(),
        "manager not ready again: {:?}",
        readyz(&manager).await
    );
    Ok(())
}
