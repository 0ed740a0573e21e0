//! Full disks under a whole stack: an executor whose work dir (a small tmpfs) is full takes no
//! work, says why on `/readyz`, and leaves the step queued; once space is freed it takes the
//! step and the run completes in its first round, with one executor episode and nothing
//! dead-lettered.

use std::time::Duration;

use loopgate_test_support::{wait_until, Reply, Script, StandInModel, Tmpfs};
use loopgate_tests::episode_faults::hello_executor;
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
"#;

/// The executors' floor: 4 MiB of the 32 MiB tmpfs.
const MIN_FREE: u64 = 4 * 1024 * 1024;

async fn readyz(url: &str) -> (u16, String) {
    match reqwest::get(format!("{url}/readyz")).await {
        Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
        Err(e) => (0, e.to_string()),
    }
}

#[tokio::test]
async fn a_full_work_dir_keeps_the_step_queued_until_space_is_freed() -> anyhow::Result<()> {
    let what = "disk_full::a_full_work_dir_keeps_the_step_queued_until_space_is_freed";
    let Some(disk) = Tmpfs::mount("32m", what)? else {
        return Ok(());
    };
    let model = StandInModel::start(
        Script::new()
            .fallback(
                "standin-manager",
                Reply::content("Next: cli\nTask: write hello.py"),
            )
            .fallback("standin-executor", hello_executor(Duration::ZERO)),
    )
    .await?;
    let profiles = vec![
        Profile::new("mgr", &model.base_url(), "standin-manager"),
        Profile::new("exec", &model.base_url(), "standin-executor"),
    ];
    let mut opts = StackOptions::new(profiles, 1);
    opts.worker_metrics = true;
    opts.executor_work_root = Some(disk.path().to_path_buf());
    opts.executor_extra = format!("work_dir_min_free_bytes = {MIN_FREE}\n");
    let stack = Stack::start(opts).await?;
    let executor = stack.worker_metrics[0].clone();
    let ready = wait_until(Duration::from_secs(30), || async {
        readyz(&executor).await.0 == 200
    })
    .await;
    anyhow::ensure!(
        ready.is_ok(),
        "executor never ready: {:?}",
        readyz(&executor).await
    );

    let left = disk.fill()?;
    anyhow::ensure!(left < MIN_FREE, "{left} bytes left after filling");
    let full = wait_until(Duration::from_secs(10), || async {
        let (status, body) = readyz(&executor).await;
        status == 503 && body.contains("work dir space") && body.contains("below")
    })
    .await;
    anyhow::ensure!(
        full.is_ok(),
        "/readyz with a full work dir: {:?}",
        readyz(&executor).await
    );

    let run = stack.submit(TASK, &[]).await?;
    let id = run["id"].as_str().unwrap_or_default().to_string();
    // The step is dispatched; the executor must not start it while the disk is full.
    let dispatched = wait_until(Duration::from_secs(30), || async {
        stack
            .log_entries(&id, "exec_dispatched")
            .await
            .is_ok_and(|e| !e.is_empty())
    })
    .await;
    anyhow::ensure!(
        dispatched.is_ok(),
        "no exec step dispatched\n{}",
        stack.logs()
    );
    let started = wait_until(Duration::from_secs(4), || async {
        stack
            .log_entries(&id, "episode_started")
            .await
            .is_ok_and(|e| e.iter().any(|e| e["role"] == "executor"))
    })
    .await;
    anyhow::ensure!(
        started.is_err(),
        "an executor episode started with the work dir full\n{}",
        stack.logs()
    );

    disk.free()?;
    let done = stack.wait_terminal(&id, Duration::from_secs(90)).await?;
    anyhow::ensure!(done["state"] == "completed", "{done}\n{}", stack.logs());
    anyhow::ensure!(
        done["round"] == 1,
        "run needed round {}: {done}",
        done["round"]
    );
    let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
    let entries = log["entries"].as_array().cloned().unwrap_or_default();
    let episodes = entries
        .iter()
        .filter(|e| e["type"] == "episode_started" && e["role"] == "executor")
        .count();
    anyhow::ensure!(episodes == 1, "{episodes} executor episodes: {entries:?}");
    anyhow::ensure!(
        !entries.iter().any(|e| e["type"] == "dead_letter"),
        "dead-lettered: {entries:?}"
    );
    anyhow::ensure!(readyz(&executor).await.0 == 200, "executor not ready again");
    Ok(())
}
