//! Any start order: the executor binary, started with its restricted NATS user before the
//! manager has created the topology, waits (saying so) instead of exiting, and takes work as
//! soon as the manager has made the streams.

use std::process::Command;
use std::time::Duration;

use anyhow::Context;
use loopgate_test_support::{wait_until, ChildGuard, NatsServer};
use loopgate_transport::{Bus, BusOptions, TopologyRole};

const USERS_CONF: &str = include_str!("../../../deploy/nats/loopgate-users.conf");
const WAIT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn an_executor_started_before_the_manager_waits_for_the_topology() -> anyhow::Result<()> {
    let (manager_pw, executor_pw) = ("pw-manager-start-order", "pw-executor-start-order");
    let conf = format!(
        "LOOPGATE_NATS_MANAGER_PASSWORD: \"{manager_pw}\"\n\
         LOOPGATE_NATS_EXECUTOR_PASSWORD: \"{executor_pw}\"\n\
         LOOPGATE_NATS_AUDITOR_PASSWORD: \"unused\"\n{USERS_CONF}"
    );
    let nats = NatsServer::start_with_config(&conf).await?;
    let scratch = tempfile::tempdir()?;
    let config = scratch.path().join("executor.toml");
    std::fs::write(
        &config,
        format!(
            "[nats]\nurl = \"{}\"\nuser = \"executor\"\npassword_env = \"LG_TEST_EXECUTOR_PW\"\n\
             [executor]\nworker_id = \"early\"\ncapabilities = [\"cli\"]\n\
             work_dir = \"{}\"\n",
            nats.url(),
            scratch.path().join("work").display()
        ),
    )?;
    let mut command = Command::new(env!("CARGO_BIN_EXE_loopgate-executor"));
    command
        .arg("--config")
        .arg(&config)
        .env("LG_TEST_EXECUTOR_PW", executor_pw);
    let mut child = ChildGuard::spawn("loopgate-executor", command)?;

    // It says what it waits for, and keeps running.
    wait_until(WAIT, || {
        let log = child.log_text();
        async move { log.contains("waiting for the JetStream topology") }
    })
    .await
    .with_context(|| child.log_tail(4000))?;
    assert!(child.is_running(), "{}", child.log_tail(4000));

    let options = BusOptions {
        user: Some("manager".into()),
        password: Some(manager_pw.into()),
        ..BusOptions::default()
    };
    let manager = Bus::connect(&nats.url(), "loopgate", options).await?;
    manager.ensure_topology().await?;
    assert!(manager
        .missing_topology(TopologyRole::Owner)
        .await
        .is_empty());

    // Ready: it has bound its own work durable on the new stream.
    wait_until(WAIT, || {
        let js = manager.jetstream().clone();
        async move {
            js.get_consumer_from_stream::<async_nats::jetstream::consumer::pull::Config, _, _>(
                "exec-cli", "LG_EXEC",
            )
            .await
            .is_ok()
        }
    })
    .await
    .with_context(|| child.log_tail(4000))?;
    assert!(child.is_running(), "{}", child.log_tail(4000));
    Ok(())
}
