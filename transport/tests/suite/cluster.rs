//! A real 3-node JetStream cluster on loopback: the owner's `replicas = 3` reaches every stream
//! and bucket whoever created them first, and a bucket and a work queue keep answering once
//! the node that led them is killed.

use std::time::Duration;

use anyhow::{Context, Result};
use async_nats::jetstream::stream;
use loopgate_protocol::subjects::{Capability, EVIDENCE_BUCKET, SNAPSHOT_BUCKET};
use loopgate_test_support::{wait_until, NatsCluster};
use loopgate_transport::runtime::retry_with_patience;
use loopgate_transport::{Bus, BusError, BusOptions, ConsumerOptions, TopologyOptions, Work};
use tokio_util::sync::CancellationToken;

use crate::bounded;

/// How long a fail-over may take (a new stream or consumer leader, the client reconnecting).
const FAIL_OVER: Duration = Duration::from_secs(45);

async fn connect(cluster: &NatsCluster) -> Result<Bus> {
    let opts = BusOptions {
        request_timeout: Duration::from_secs(5),
        ..BusOptions::default()
    };
    Ok(Bus::connect(&cluster.url(), "lgtest", opts).await?)
}

/// The stream's config and the cluster index of its leader, once every replica is current.
async fn replicated(
    bus: &Bus,
    cluster: &NatsCluster,
    name: &str,
) -> Result<(stream::Config, usize)> {
    let found = std::sync::Mutex::new(None);
    wait_until(FAIL_OVER, || async {
        let Ok(mut stream) = bus.jetstream().get_stream(name).await else {
            return false;
        };
        let Ok(info) = stream.info().await else {
            return false;
        };
        let Some(cluster_info) = info.cluster.clone() else {
            return false;
        };
        let current = cluster_info.replicas.len() + 1 == info.config.num_replicas
            && cluster_info.replicas.iter().all(|r| r.current);
        let leader = cluster_info
            .leader
            .and_then(|leader| (0..cluster.len()).find(|i| cluster.name(*i) == leader));
        match leader {
            Some(leader) if current => {
                *found.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some((info.config.clone(), leader));
                true
            }
            _ => false,
        }
    })
    .await
    .with_context(|| format!("stream {name} never had all its replicas current"))?;
    let found = found.into_inner().unwrap_or_else(|e| e.into_inner());
    found.context("no stream info")
}

/// A worker with the default sizing creates the topology first (one replica each, as in a
/// development stack whose workers start before the manager); the owner's `replicas = 3` then
/// brings every stream AND every bucket (snapshots, evidence, episode claims) to three replicas. Killing the node that leads the
/// snapshot bucket leaves its objects readable from the other two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_replicas_reach_buckets_a_worker_created_and_they_survive_their_leader() -> Result<()>
{
    bounded(async {
        let mut cluster = NatsCluster::start(3).await?;
        let worker = connect(&cluster).await?;
        worker.ensure_topology().await?;
        let owner = connect(&cluster).await?.with_topology(TopologyOptions {
            replicas: Some(3),
            snapshot_max_bytes: Some(256 << 20),
            ..TopologyOptions::default()
        });
        owner.ensure_topology().await?;
        for config in owner.stream_configs() {
            let (actual, _) = replicated(&owner, &cluster, &config.name).await?;
            assert_eq!(actual.num_replicas, 3, "{}", config.name);
        }
        let (evidence, _) = replicated(&owner, &cluster, &format!("OBJ_{EVIDENCE_BUCKET}")).await?;
        assert_eq!(evidence.num_replicas, 3);
        let (claims, _) = replicated(&owner, &cluster, "KV_lg-episodes").await?;
        assert_eq!(claims.num_replicas, 3, "episode claims survive a node too");

        let store = owner.jetstream().get_object_store(SNAPSHOT_BUCKET).await?;
        let mut body: &[u8] = b"frozen workspace";
        store.put("snap-1", &mut body).await?;
        let (snapshots, leader) =
            replicated(&owner, &cluster, &format!("OBJ_{SNAPSHOT_BUCKET}")).await?;
        assert_eq!(snapshots.num_replicas, 3);
        assert_eq!(snapshots.max_bytes, 256 << 20);
        // A worker's default sizing passes again without shrinking anything.
        worker.ensure_topology().await?;

        cluster.kill(leader);
        let reader = connect(&cluster).await?;
        let read = wait_until(FAIL_OVER, || async {
            let Ok(store) = reader.jetstream().get_object_store(SNAPSHOT_BUCKET).await else {
                return false;
            };
            let Ok(mut object) = store.get("snap-1").await else {
                return false;
            };
            let mut bytes = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut object, &mut bytes)
                .await
                .is_ok()
                && bytes == b"frozen workspace"
        })
        .await;
        anyhow::ensure!(
            read.is_ok(),
            "the snapshot is unreadable after its bucket's leader {} was killed",
            cluster.name(leader)
        );
        Ok(())
    })
    .await
}

/// Workers with the default sizing and the owner ensure the topology AT THE SAME TIME, as in
/// a stack whose processes all start at once: whoever wins each create race, every stream ends
/// with the owner's three replicas: the owner never takes "the stream exists" for done while
/// its settings differ.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_get_the_owner_replicas_when_workers_race_it_to_create_them() -> Result<()> {
    bounded(async {
        let cluster = NatsCluster::start(3).await?;
        let workers = [connect(&cluster).await?, connect(&cluster).await?];
        let owner = connect(&cluster).await?.with_topology(TopologyOptions {
            replicas: Some(3),
            ..TopologyOptions::default()
        });
        for race in 0..4 {
            for config in owner.stream_configs() {
                // Absent at the start of each race (not there yet on the first).
                let _ = owner.jetstream().delete_stream(&config.name).await;
            }
            // Retried as the manager retries it at start-up: a consumer created while its
            // stream is being resized is refused (insufficient resources) for a moment.
            let never = CancellationToken::new();
            let owner_ensures = retry_with_patience(
                "topology",
                Duration::from_secs(30),
                &never,
                BusError::is_retryable,
                || owner.ensure_topology(),
            );
            let (a, b, own) = tokio::join!(
                workers[0].ensure_topology(),
                workers[1].ensure_topology(),
                owner_ensures
            );
            // A worker may lose a race to the owner's update; the owner must not.
            own.with_context(|| format!("race {race}: the owner's ensure_topology"))?
                .context("never cancelled")?;
            let _ = (a, b);
            for config in owner.stream_configs() {
                let mut stream = owner.jetstream().get_stream(&config.name).await?;
                let info = stream.info().await?;
                assert_eq!(
                    info.config.num_replicas, 3,
                    "race {race}: stream {} left at {} replica(s)",
                    config.name, info.config.num_replicas
                );
            }
        }
        Ok(())
    })
    .await
}

/// A work consumer keeps delivering once the node that led its stream is killed: the next
/// publish is retried until the new leader takes it, and the same `WorkConsumer` handle
/// receives it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_consumer_keeps_delivering_after_its_stream_leader_is_killed() -> Result<()> {
    bounded(async {
        let mut cluster = NatsCluster::start(3).await?;
        let bus = connect(&cluster).await?.with_topology(TopologyOptions {
            replicas: Some(3),
            ..TopologyOptions::default()
        });
        bus.ensure_topology().await?;
        let work = Work::Exec(Capability::Cli);
        let mut consumer = bus.work_consumer(work, ConsumerOptions::default()).await?;
        let subject = bus.subjects().exec(Capability::Cli);
        bus.publish_json(&subject, &serde_json::json!({"n": 1}), "cluster:1", &[])
            .await?;
        let first = consumer
            .next(Duration::from_secs(5))
            .await?
            .context("no first delivery")?;
        first.ack().await?;
        let (_, leader) = replicated(&bus, &cluster, work.stream_name()).await?;

        cluster.kill(leader);
        let deadline = tokio::time::Instant::now() + FAIL_OVER;
        let refused = std::sync::Mutex::new(None);
        let published = wait_until(FAIL_OVER, || async {
            match bus
                .publish_json(&subject, &serde_json::json!({"n": 2}), "cluster:2", &[])
                .await
            {
                Ok(()) => true,
                Err(err) => {
                    if !err.is_retryable() {
                        *refused.lock().unwrap_or_else(|e| e.into_inner()) = Some(err.to_string());
                    }
                    false
                }
            }
        })
        .await;
        let refused = refused.into_inner().unwrap_or_else(|e| e.into_inner());
        anyhow::ensure!(refused.is_none(), "publish refused for good: {refused:?}");
        published.context("no publish accepted after the kill")?;
        let second = loop {
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "no delivery within {FAIL_OVER:?} of killing {}",
                cluster.name(leader)
            );
            match consumer.next(Duration::from_secs(2)).await {
                Ok(Some(delivery)) => break delivery,
                Ok(None) => {}
                Err(err) => anyhow::ensure!(err.is_retryable(), "pull: {err}"),
            }
        };
        assert_eq!(
            second.decode::<serde_json::Value>()?,
            serde_json::json!({"n": 2})
        );
        second.ack().await?;
        Ok(())
    })
    .await
}
