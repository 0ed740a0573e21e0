//! Any start order under the per-role users of deploy/nats/: an executor or auditor that comes
//! up before the manager waits for the topology, says what it waits for, and is ready as soon
//! as the manager has made it.

use std::time::Duration;

use anyhow::{Context, Result};
use loopgate_test_support::NatsServer;
use loopgate_transport::runtime::{await_topology, TopologyWait};
use loopgate_transport::{Bus, BusOptions, TopologyRole};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::bounded;

const USERS_CONF: &str = include_str!("../../../deploy/nats/loopgate-users.conf");

struct Secured {
    server: NatsServer,
    passwords: [(&'static str, String); 3],
}

async fn secured() -> Result<Secured> {
    let word = |n: u8| format!("pw-{n}-{}", std::process::id());
    let passwords = [
        ("manager", word(1)),
        ("executor", word(2)),
        ("auditor", word(3)),
    ];
    let conf = format!(
        "LOOPGATE_NATS_MANAGER_PASSWORD: \"{}\"\nLOOPGATE_NATS_EXECUTOR_PASSWORD: \"{}\"\n\
         LOOPGATE_NATS_AUDITOR_PASSWORD: \"{}\"\n{USERS_CONF}",
        passwords[0].1, passwords[1].1, passwords[2].1
    );
    let server = NatsServer::start_with_config(&conf).await?;
    Ok(Secured { server, passwords })
}

impl Secured {
    async fn connect(&self, user: &str) -> Result<Bus> {
        let password = self
            .passwords
            .iter()
            .find(|(u, _)| *u == user)
            .map(|(_, p)| p.clone())
            .context("no such user")?;
        let options = BusOptions {
            request_timeout: Duration::from_secs(2),
            user: Some(user.into()),
            password: Some(password),
            ..BusOptions::default()
        };
        Ok(Bus::connect(&self.server.url(), "loopgate", options).await?)
    }
}

/// Workers come up first; each reports the missing topology, is still waiting, and finishes
/// once the manager's `ensure_topology` has run.
#[tokio::test]
async fn workers_started_before_the_manager_wait_for_its_topology() -> Result<()> {
    bounded(async {
        let env = secured().await?;
        let cancel = CancellationToken::new();
        let mut waits = Vec::new();
        let mut reports = Vec::new();
        for (user, role) in [
            ("executor", TopologyRole::Executor),
            ("auditor", TopologyRole::Auditor),
        ] {
            let bus = env.connect(user).await?;
            let (tx, rx) = mpsc::unbounded_channel::<Vec<String>>();
            let cancel = cancel.clone();
            waits.push(tokio::spawn(async move {
                await_topology(&bus, role, &cancel, |missing| {
                    let _ = tx.send(missing.to_vec());
                })
                .await
            }));
            reports.push(rx);
        }
        // Each worker has looked twice and found nothing; neither made anything.
        for rx in &mut reports {
            let first = rx.recv().await.context("no missing report")?;
            assert!(
                first.iter().any(|m| m == "bucket lg-snapshots"),
                "{first:?}"
            );
            rx.recv()
                .await
                .context("stopped waiting before the manager came")?;
        }
        assert!(waits.iter().all(|w| !w.is_finished()));

        let manager = env.connect("manager").await?;
        manager.ensure_topology().await?;
        for wait in waits {
            assert_eq!(wait.await?, TopologyWait::Ready);
        }
        for (user, role) in [
            ("executor", TopologyRole::Executor),
            ("auditor", TopologyRole::Auditor),
            ("manager", TopologyRole::Owner),
        ] {
            let bus = env.connect(user).await?;
            assert_eq!(
                bus.missing_topology(role).await,
                Vec::<String>::new(),
                "{user}"
            );
        }
        Ok(())
    })
    .await
}

/// A waiting worker told to stop ends the wait without an error.
#[tokio::test]
async fn a_waiting_worker_stops_when_cancelled() -> Result<()> {
    bounded(async {
        let env = secured().await?;
        let bus = env.connect("executor").await?;
        let cancel = CancellationToken::new();
        let (tx, mut rx) = mpsc::unbounded_channel::<()>();
        let wait = {
            let cancel = cancel.clone();
            tokio::spawn(async move {
                await_topology(&bus, TopologyRole::Executor, &cancel, |_| {
                    let _ = tx.send(());
                })
                .await
            })
        };
        rx.recv().await.context("no missing report")?;
        cancel.cancel();
        assert_eq!(wait.await?, TopologyWait::Cancelled);
        Ok(())
    })
    .await
}
