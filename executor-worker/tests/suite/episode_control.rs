//! The worker loop's episode control against a real nats-server: `EpisodeStarted` before the
//! work, stale first deliveries dropped, and `CancelEpisodes` notices aborting a running
//! episode (its agent's process group killed, its workspace removed, no result published).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};
use loopgate_executor::{prepare, run_workers};
use loopgate_executor::{ExecutorFile, ExternalInputs};
use loopgate_protocol::subjects::Capability;
use loopgate_protocol::wire::{
    decode, CancelEpisodes, Envelope, EpisodeRole, ExecRequest, Message,
};
use loopgate_snapshot::SnapshotStore;
use loopgate_test_support::{wait_until, NatsServer};
use loopgate_transport::{Bus, BusOptions, ConsumerOptions, Work, WorkConsumer};
use support::{request, script};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);

struct Harness {
    _nats: NatsServer,
    bus: Bus,
    store: SnapshotStore,
    results: WorkConsumer,
    scratch: tempfile::TempDir,
    cancel: CancellationToken,
    workers: Option<JoinHandle<()>>,
}

fn config(nats_url: &str, root: &Path) -> anyhow::Result<String> {
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin)?;
    let quick = script(&bin, "quick", support::OPENCODE_SUCCESS)?;
    let hang = script(&bin, "hang", support::OPENCODE_HANG)?;
    let marker = root.join("marker");
    Ok(format!(
        r#"
[nats]
url = "{nats_url}"
[executor]
worker_id = "exec-control"
work_dir = "{work}"
ack_wait_secs = 6
shutdown_grace_secs = 1
[agents.quick]
kind = "opencode"
command = "{quick}"
[agents.hang]
kind = "opencode"
command = "{hang}"
set_env = {{ MARKER = "{marker}" }}
"#,
        work = root.join("work").display(),
        quick = quick.display(),
        hang = hang.display(),
        marker = marker.display(),
    ))
}

impl Harness {
    async fn start() -> anyhow::Result<Harness> {
        let nats = NatsServer::start().await?;
        let bus = Bus::connect(&nats.url(), "loopgate", BusOptions::default()).await?;
        bus.ensure_topology().await?;
        let store = SnapshotStore::from_jetstream(bus.jetstream(), bus.request_timeout()).await?;
        let results = bus
            .work_consumer(Work::Results, ConsumerOptions::default())
            .await?;
        let scratch = tempfile::tempdir()?;
        let text = config(&nats.url(), scratch.path())?;
        let settings = ExecutorFile::parse(&text, "test")?.resolve(&ExternalInputs {
            pid: 1,
            temp_dir: std::env::temp_dir(),
            ..ExternalInputs::default()
        })?;
        let cancel = CancellationToken::new();
        let ctx = prepare(&settings, &cancel)
            .await?
            .context("start-up was cancelled")?;
        let worker_cancel = cancel.clone();
        let workers = tokio::spawn(async move { run_workers(ctx, &settings, worker_cancel).await });
        Ok(Harness {
            _nats: nats,
            bus,
            store,
            results,
            scratch,
            cancel,
            workers: Some(workers),
        })
    }

    async fn base(&self) -> anyhow::Result<String> {
        let files = vec![("README.md".to_string(), 0o644, b"# p\n".to_vec())];
        Ok(self.store.freeze_files(files).await?.id)
    }

    async fn send(&self, req: &ExecRequest) -> anyhow::Result<()> {
        let msg_id = format!("{}:{}:{}:exec:1", req.run_id, req.generation, req.round);
        let message = Message::ExecRequest(req.clone());
        self.bus
            .publish_json(
                &self.bus.subjects().exec(Capability::Cli),
                &Envelope::new(&message),
                &msg_id,
                &[],
            )
            .await?;
        Ok(())
    }

    /// The next message on `result.>` within `within`.
    async fn next_message(&mut self, within: Duration) -> anyhow::Result<Option<Message>> {
        let deadline = tokio::time::Instant::now() + within;
        while tokio::time::Instant::now() < deadline {
            if let Some(delivery) = self.results.next(Duration::from_millis(250)).await? {
                delivery.ack().await?;
                return Ok(Some(decode(delivery.payload())?));
            }
        }
        Ok(None)
    }

    async fn exec_stream_empty(&self) -> bool {
        match self.bus.jetstream().get_stream("LG_EXEC").await {
            Ok(mut stream) => stream
                .info()
                .await
                .map(|i| i.state.messages == 0)
                .unwrap_or(false),
            Err(_) => false,
        }
    }

    fn work_dir_entries(&self) -> usize {
        support::work_dir_entries(&self.scratch.path().join("work")).unwrap_or(0)
    }

    async fn stop(mut self) -> anyhow::Result<()> {
        self.cancel.cancel();
        if let Some(workers) = self.workers.take() {
            tokio::time::timeout(WAIT, workers)
                .await
                .context("workers did not stop")??;
        }
        Ok(())
    }
}

#[tokio::test]
async fn episode_started_is_announced_before_the_result() -> anyhow::Result<()> {
    let mut h = Harness::start().await?;
    let base = h.base().await?;
    h.send(&request("run-started", &base, "quick", 30)).await?;
    let Some(Message::EpisodeStarted(started)) = h.next_message(WAIT).await? else {
        bail!("expected EpisodeStarted first")
    };
    assert_eq!(started.run_id, "run-started");
    assert_eq!(
        (started.generation, started.round, started.delivery_attempt),
        (1, 1, 1)
    );
    assert_eq!(started.role, EpisodeRole::Executor);
    assert_eq!(started.worker, "exec-control");
    let Some(Message::ExecResult(result)) = h.next_message(WAIT).await? else {
        bail!("expected the result")
    };
    assert_eq!(result.run_id, "run-started");
    assert_eq!(result.usage.cost_micros, 3000);
    h.stop().await
}

#[tokio::test]
async fn stale_first_delivery_is_dropped_without_a_word() -> anyhow::Result<()> {
    let mut h = Harness::start().await?;
    let base = h.base().await?;
    let mut req = request("run-stale", &base, "quick", 30);
    let now_ms = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis(),
    )?;
    req.start_by_ms = Some(now_ms - 60_000);
    h.send(&req).await?;
    wait_until(WAIT, || h.exec_stream_empty()).await?;
    assert!(
        h.next_message(Duration::from_secs(1)).await?.is_none(),
        "nothing is published for a stale request"
    );
    h.stop().await
}

#[tokio::test]
async fn cancel_notice_aborts_the_running_episode() -> anyhow::Result<()> {
    let mut h = Harness::start().await?;
    let base = h.base().await?;
    h.send(&request("run-cancel", &base, "hang", 120)).await?;
    let Some(Message::EpisodeStarted(_)) = h.next_message(WAIT).await? else {
        bail!("expected EpisodeStarted")
    };
    // A notice for another run, or for an older generation only, changes nothing.
    let notice = |run: &str, generation| {
        Message::CancelEpisodes(CancelEpisodes {
            run_id: run.into(),
            generation,
            reason: "test".into(),
            dispatch: None,
        })
    };
    let subjects = h.bus.subjects().clone();
    let control = |run: &str| subjects.control(run);
    h.bus
        .publish_core_json(
            &control("run-other"),
            &Envelope::new(&notice("run-other", 9)),
        )
        .await?;
    h.bus
        .publish_core_json(
            &control("run-cancel"),
            &Envelope::new(&notice("run-cancel", 0)),
        )
        .await?;
    assert!(h.next_message(Duration::from_millis(500)).await?.is_none());
    assert!(!h.exec_stream_empty().await, "the episode is still running");

    h.bus
        .publish_core_json(
            &control("run-cancel"),
            &Envelope::new(&notice("run-cancel", 1)),
        )
        .await?;
    wait_until(WAIT, || h.exec_stream_empty()).await?;
    wait_until(WAIT, || async { h.work_dir_entries() == 0 }).await?;
    assert!(
        h.next_message(Duration::from_secs(1)).await?.is_none(),
        "no result for a cancelled episode"
    );
    // The agent's background child died with its process group.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !h.scratch.path().join("marker").exists(),
        "a child of the agent survived"
    );
    h.stop().await
}
