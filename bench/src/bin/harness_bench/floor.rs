//! The physical floor and the harness's building blocks, measured in-process against the same
//! nats-server and redis-server the stack uses (while no run is active):
//! - one JetStream queue hop: publish and wait for the stream's ack, receive the message on a
//!   durable pull consumer with a pull request outstanding, double-ack it (what a work message
//!   costs loopgate at the least);
//! - a Redis round trip (PING), and the run store's own `load` (HMGET) and compare-and-set
//!   (one EVALSHA) with a real run record;
//! - freezing and materializing a small workspace through the snapshot store;
//! - spawning `sh -c true` (the no-op check, without the auditor's sandbox);
//! - one chat-completions request to the instant stand-in model.

use std::time::{Duration, Instant};

use anyhow::Context;
use async_nats::jetstream::{self, consumer::pull, stream};
use futures::StreamExt;
use loopgate_manager::run_store::{CasOutcome, CasWrite, RunStore};
use loopgate_snapshot::{FreezeRules, SnapshotStore};
use loopgate_transport::{Bus, BusOptions};
use serde_json::{json, Value};

use crate::stats::{ms_since, round3, Summary};

/// Critical path of one round (see docs/benchmarks.md): ExecRequest, ExecResult, AuditRequest,
/// AuditReport and DecideRequest are queue hops one after another.
pub const HOPS_PER_ROUND: u32 = 5;
/// Redis round trips on that path: load + CAS for the exec result, the audit report and the
/// decision, plus the decision's own read of the run.
pub const REDIS_RTTS_PER_ROUND: u32 = 7;

pub struct Floor {
    pub hop: Summary,
    pub ping: Summary,
    pub load: Summary,
    pub cas: Summary,
    pub freeze: Summary,
    pub materialize: Summary,
    pub spawn_true: Summary,
    pub chat: Summary,
    pub record_bytes: usize,
}

impl Floor {
    /// Floor of one round in ms: p50 hop and p50 PING times their counts on the critical path.
    pub fn floor_ms(&self) -> f64 {
        f64::from(HOPS_PER_ROUND) * self.hop.p50 + f64::from(REDIS_RTTS_PER_ROUND) * self.ping.p50
    }

    pub fn json(&self, round: &Summary) -> Value {
        let floor = self.floor_ms();
        json!({
            "definition": format!("{HOPS_PER_ROUND} JetStream queue hops (p50) + {REDIS_RTTS_PER_ROUND} Redis round trips (p50 PING)"),
            "hops_per_round": HOPS_PER_ROUND,
            "redis_rtts_per_round": REDIS_RTTS_PER_ROUND,
            "jetstream_hop_ms": self.hop.json(),
            "redis_ping_ms": self.ping.json(),
            "floor_ms": round3(floor),
            "ratio_p50": round3(round.p50 / floor),
            "ratio_p95": round3(round.p95 / floor),
            "ratio_p99": round3(round.p99 / floor),
        })
    }

    pub fn components_json(&self) -> Value {
        json!({
            "redis_load_ms": self.load.json(),
            "redis_cas_ms": self.cas.json(),
            "run_record_bytes": self.record_bytes,
            "freeze_ms": self.freeze.json(),
            "materialize_ms": self.materialize.json(),
            "spawn_sh_true_ms": self.spawn_true.json(),
            "standin_chat_ms": self.chat.json(),
        })
    }
}

/// `n` JetStream hops on a private stream (file storage, like loopgate's work streams).
async fn jetstream_hops(nats_url: &str, n: usize) -> anyhow::Result<Summary> {
    let client = async_nats::connect(nats_url).await?;
    let js = jetstream::new(client);
    let stream = js
        .get_or_create_stream(stream::Config {
            name: "BENCH_FLOOR".into(),
            subjects: vec!["benchfloor.>".into()],
            storage: stream::StorageType::File,
            retention: stream::RetentionPolicy::WorkQueue,
            ..Default::default()
        })
        .await
        .map_err(|e| anyhow::anyhow!("creating the floor stream: {e}"))?;
    let consumer = stream
        .get_or_create_consumer(
            "floor",
            pull::Config {
                durable_name: Some("floor".into()),
                ack_policy: jetstream::consumer::AckPolicy::Explicit,
                ..Default::default()
            },
        )
        .await
        .map_err(|e| anyhow::anyhow!("creating the floor consumer: {e}"))?;
    let mut messages = consumer
        .messages()
        .await
        .map_err(|e| anyhow::anyhow!("pulling: {e}"))?;
    let payload = vec![b'x'; 600];
    let mut samples = Vec::with_capacity(n);
    for i in 0..n + 50 {
        let started = Instant::now();
        js.publish("benchfloor.hop", payload.clone().into())
            .await
            .map_err(|e| anyhow::anyhow!("publish: {e}"))?
            .await
            .map_err(|e| anyhow::anyhow!("publish ack: {e}"))?;
        let message = tokio::time::timeout(Duration::from_secs(10), messages.next())
            .await
            .context("no delivery within 10 s")?
            .context("consumer stream ended")?
            .map_err(|e| anyhow::anyhow!("delivery: {e}"))?;
        message
            .double_ack()
            .await
            .map_err(|e| anyhow::anyhow!("double ack: {e}"))?;
        if i >= 50 {
            samples.push(ms_since(started));
        }
    }
    Ok(Summary::of(&samples))
}

async fn redis_parts(
    redis_url: &str,
    run: &str,
    n: usize,
) -> anyhow::Result<([Summary; 3], usize)> {
    let store = RunStore::connect(redis_url, Duration::from_secs(5)).await?;
    let record = store
        .load(run)
        .await?
        .map(|v| v.record)
        .with_context(|| format!("run {run} is not in the store"))?;
    let mut ping = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        store.ping().await?;
        ping.push(ms_since(started));
    }
    let id = format!("bench-floor-{}", std::process::id());
    store.create(&id, &record, "running", 0, None, None).await?;
    let entry = json!({"at": 0, "generation": 1, "round": 1, "type": "episode_started",
        "role": "executor", "worker": "exec-1", "attempt": 1})
    .to_string();
    let (mut load, mut cas) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let started = Instant::now();
        let current = store.load(&id).await?.context("bench record vanished")?;
        load.push(ms_since(started));
        let started = Instant::now();
        let outcome = store
            .compare_and_set(
                &id,
                CasWrite {
                    expected_version: current.version,
                    record: current.record,
                    log_entries: vec![entry.clone()],
                    ..CasWrite::default()
                },
            )
            .await?;
        cas.push(ms_since(started));
        anyhow::ensure!(
            matches!(outcome, CasOutcome::Applied { .. }),
            "CAS conflict"
        );
    }
    Ok((
        [Summary::of(&ping), Summary::of(&load), Summary::of(&cas)],
        record.len(),
    ))
}

/// Freeze a two-file workspace with one file changed each time (one new blob, like a round),
/// and materialize each freeze into a fresh directory.
async fn snapshot_parts(nats_url: &str, n: usize) -> anyhow::Result<[Summary; 2]> {
    let bus = Bus::connect(nats_url, "loopgate", BusOptions::default()).await?;
    bus.ensure_topology().await?;
    let store = SnapshotStore::from_jetstream(bus.jetstream(), bus.request_timeout()).await?;
    let dir = tempfile::tempdir()?;
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws)?;
    std::fs::write(ws.join("README.md"), "a small workspace\n".repeat(20))?;
    let (mut freeze, mut materialize) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        std::fs::write(ws.join("notes.txt"), format!("attempt {i}\n"))?;
        let started = Instant::now();
        let frozen = store.freeze(&ws, &FreezeRules::default()).await?;
        freeze.push(ms_since(started));
        let dest = dir.path().join(format!("m{i}"));
        let started = Instant::now();
        store.materialize(&frozen.id, &dest).await?;
        materialize.push(ms_since(started));
        std::fs::remove_dir_all(&dest)?;
    }
    Ok([Summary::of(&freeze), Summary::of(&materialize)])
}

fn spawn_true(n: usize) -> anyhow::Result<Summary> {
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        let status = std::process::Command::new("sh")
            .args(["-c", "true"])
            .status()?;
        samples.push(ms_since(started));
        anyhow::ensure!(status.success(), "sh -c true failed");
    }
    Ok(Summary::of(&samples))
}

async fn chat(base_url: &str, model: &str, n: usize) -> anyhow::Result<Summary> {
    let client = reqwest::Client::new();
    let body = json!({"model": model, "messages": [{"role": "user", "content": "ping"}]});
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        let reply = client
            .post(format!("{base_url}/chat/completions"))
            .json(&body)
            .send()
            .await?;
        anyhow::ensure!(reply.status().is_success(), "stand-in: {}", reply.status());
        reply.bytes().await?;
        samples.push(ms_since(started));
    }
    Ok(Summary::of(&samples))
}

/// Measure everything (`n` samples each; snapshot and spawn parts n/5).
pub async fn measure(
    nats_url: &str,
    redis_url: &str,
    run: &str,
    standin: (&str, &str),
    n: usize,
) -> anyhow::Result<Floor> {
    let hop = jetstream_hops(nats_url, n).await?;
    let ([ping, load, cas], record_bytes) = redis_parts(redis_url, run, n).await?;
    let [freeze, materialize] = snapshot_parts(nats_url, (n / 5).max(20)).await?;
    let spawn_true = spawn_true((n / 5).max(20))?;
    let chat = chat(standin.0, standin.1, (n / 5).max(20)).await?;
    Ok(Floor {
        hop,
        ping,
        load,
        cas,
        freeze,
        materialize,
        spawn_true,
        chat,
        record_bytes,
    })
}
