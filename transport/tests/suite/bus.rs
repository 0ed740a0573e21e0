//! NATS bus: dedup, work consumers (nak, progress), restart, core pub/sub.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use loopgate_protocol::subjects::Capability;
use loopgate_test_support::{wait_until, NatsServer};
use loopgate_transport::{Bus, BusOptions, ConsumerOptions, Work};

use crate::{bounded, bus_on};

async fn publish_exec(bus: &Bus, msg_id: &str, body: &serde_json::Value) -> Result<()> {
    let subject = bus.subjects().exec(Capability::Cli);
    bus.publish_json(&subject, body, msg_id, &[("traceparent", "00-abc-def-01")])
        .await?;
    Ok(())
}

#[tokio::test]
async fn duplicate_msg_id_is_delivered_once() -> Result<()> {
    bounded(async {
        let server = NatsServer::start().await?;
        // Several processes setting up the topology at once, from scratch, all succeed.
        let buses = connect_buses(&server, 4).await?;
        let results = futures::future::join_all(buses.iter().map(|b| b.ensure_topology())).await;
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        let bus = bus_on(&server).await?;

        let mut consumer = bus
            .work_consumer(Work::Exec(Capability::Cli), ConsumerOptions::default())
            .await?;
        let body = serde_json::json!({"v": 1, "kind": "exec"});
        publish_exec(&bus, "run1:1:exec:1", &body).await?;
        publish_exec(&bus, "run1:1:exec:1", &body).await?;

        let delivery = consumer
            .next(Duration::from_secs(5))
            .await?
            .context("no delivery")?;
        assert_eq!(delivery.decode::<serde_json::Value>()?, body);
        assert_eq!(delivery.subject(), "lgtest.exec.cli");
        assert_eq!(delivery.attempt(), 1);
        assert_eq!(
            delivery.header("Nats-Msg-Id").as_deref(),
            Some("run1:1:exec:1")
        );
        assert_eq!(
            delivery.header("traceparent").as_deref(),
            Some("00-abc-def-01")
        );
        delivery.ack().await?;
        assert!(consumer.next(Duration::from_millis(500)).await?.is_none());

        // Bad header names are an error, not a panic.
        let err = bus
            .publish_json("lgtest.exec.cli", &body, "x", &[("bad:name", "v")])
            .await
            .unwrap_err();
        assert!(
            matches!(err, loopgate_transport::BusError::Config(_)),
            "{err:?}"
        );
        Ok(())
    })
    .await
}

async fn connect_buses(server: &NatsServer, n: usize) -> Result<Vec<Bus>> {
    let mut buses = Vec::new();
    for _ in 0..n {
        buses.push(Bus::connect(&server.url(), "lgtest", BusOptions::default()).await?);
    }
    Ok(buses)
}

#[tokio::test]
async fn nak_redelivers_with_incremented_attempt() -> Result<()> {
    bounded(async {
        let server = NatsServer::start().await?;
        let bus = bus_on(&server).await?;
        let mut consumer = bus
            .work_consumer(Work::Audit, ConsumerOptions::default())
            .await?;
        let subject = bus.subjects().audit_request();
        bus.publish_json(&subject, &serde_json::json!({"n": 1}), "a1", &[])
            .await?;

        let first = consumer
            .next(Duration::from_secs(5))
            .await?
            .context("first")?;
        assert_eq!(first.attempt(), 1);
        first.nak(None).await?;
        let second = consumer
            .next(Duration::from_secs(5))
            .await?
            .context("second")?;
        assert_eq!(second.attempt(), 2);
        assert_eq!(second.stream_sequence(), first.stream_sequence());
        second.nak(Some(Duration::from_millis(300))).await?;
        let third = consumer
            .next(Duration::from_secs(5))
            .await?
            .context("third")?;
        assert_eq!(third.attempt(), 3);
        third.term().await?;
        assert!(consumer.next(Duration::from_millis(500)).await?.is_none());
        Ok(())
    })
    .await
}

#[tokio::test]
async fn progress_acks_hold_off_redelivery() -> Result<()> {
    bounded(async {
        let server = NatsServer::start().await?;
        let bus = bus_on(&server).await?;
        let options = ConsumerOptions {
            ack_wait: Duration::from_secs(2),
            ..ConsumerOptions::default()
        };
        let mut worker = bus
            .work_consumer(Work::Exec(Capability::Gui), options)
            .await?;
        let mut rival = bus
            .work_consumer(Work::Exec(Capability::Gui), options)
            .await?;
        let subject = bus.subjects().exec(Capability::Gui);
        bus.publish_json(&subject, &serde_json::json!({"long": true}), "g1", &[])
            .await?;

        let delivery = worker
            .next(Duration::from_secs(5))
            .await?
            .context("delivery")?;
        let handle = delivery.progress_handle();
        let heartbeat = tokio::spawn(async move {
            for _ in 0..12 {
                handle.progress().await?;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Ok::<_, loopgate_transport::BusError>(())
        });
        // Well past ack_wait: the rival must never see the message while progress flows.
        let started = std::time::Instant::now();
        while started.elapsed() < Duration::from_secs(5) {
            if let Some(stolen) = rival.next(Duration::from_secs(1)).await? {
                bail!(
                    "redelivered despite progress acks: attempt {}",
                    stolen.attempt()
                );
            }
        }
        heartbeat.await??;
        delivery.ack().await?;
        assert!(rival.next(Duration::from_secs(3)).await?.is_none());

        // Without progress the same setup does redeliver, proving ack_wait is short.
        bus.publish_json(&subject, &serde_json::json!({"long": false}), "g2", &[])
            .await?;
        let abandoned = worker.next(Duration::from_secs(5)).await?.context("g2")?;
        let redelivered = rival
            .next(Duration::from_secs(6))
            .await?
            .context("no redelivery")?;
        assert_eq!(redelivered.stream_sequence(), abandoned.stream_sequence());
        assert_eq!(redelivered.attempt(), 2);
        redelivered.ack().await?;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn consumer_and_publisher_survive_a_server_restart() -> Result<()> {
    bounded(async {
        let mut server = NatsServer::start().await?;
        let bus = bus_on(&server).await?;
        let mut consumer = bus
            .work_consumer(Work::Results, ConsumerOptions::default())
            .await?;
        let subject = bus.subjects().exec_result("r9");
        bus.publish_json(&subject, &serde_json::json!({"k": 1}), "res1", &[])
            .await?;
        consumer
            .next(Duration::from_secs(5))
            .await?
            .context("before restart")?
            .ack()
            .await?;

        server.restart().await?;
        // Publishing succeeds again once the client has reconnected.
        let body = serde_json::json!({"k": 2});
        wait_until(Duration::from_secs(20), || async {
            bus.publish_json(&subject, &body, "res2", &[]).await.is_ok()
        })
        .await?;
        let mut got = None;
        for _ in 0..20 {
            if let Ok(Some(delivery)) = consumer.next(Duration::from_secs(1)).await {
                got = Some(delivery);
                break;
            }
        }
        let delivery = got.context("no delivery after restart")?;
        assert_eq!(delivery.decode::<serde_json::Value>()?, body);
        delivery.ack().await?;

        // Events: core publish reaches a core subscriber.
        let mut events = bus.subscribe_core(&bus.subjects().events("r9")).await?;
        bus.flush().await?;
        bus.publish_core_json(&bus.subjects().events("r9"), &serde_json::json!({"e": 1}))
            .await?;
        let event = tokio::time::timeout(
            Duration::from_secs(5),
            futures::StreamExt::next(&mut events),
        )
        .await?
        .context("subscription closed")?;
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&event.payload)?,
            serde_json::json!({"e": 1})
        );
        Ok(())
    })
    .await
}

/// `[jetstream]` sizing: the owner's replicas and byte caps are applied to existing streams
/// and buckets, and a process with the default sizing (a worker) passes ensure_topology
/// without touching them.
#[tokio::test]
async fn topology_sizing_is_applied_and_kept() -> Result<()> {
    bounded(async {
        let server = NatsServer::start().await?;
        // First without caps (as an older deployment would have created them).
        let plain = bus_on(&server).await?;
        let sized = plain
            .clone()
            .with_topology(loopgate_transport::TopologyOptions {
                replicas: Some(1),
                stream_max_bytes: Some(48 << 20),
                snapshot_max_bytes: Some(128 << 20),
                evidence_max_bytes: Some(32 << 20),
                audit_ack_wait: None,
            });
        sized.ensure_topology().await?;
        for config in sized.stream_configs() {
            let mut stream = sized.jetstream().get_stream(&config.name).await?;
            let info = stream.info().await?;
            assert_eq!(info.config.max_bytes, 48 << 20, "{}", config.name);
            assert_eq!(info.config.num_replicas, 1, "{}", config.name);
        }
        // The buckets `plain` created without caps get theirs too.
        for (bucket, cap) in [("lg-snapshots", 128 << 20), ("lg-evidence", 32 << 20)] {
            let mut stream = sized
                .jetstream()
                .get_stream(format!("OBJ_{bucket}"))
                .await?;
            assert_eq!(stream.info().await?.config.max_bytes, cap, "{bucket}");
        }
        // The episode claims (created with their own 64 MiB): the smaller stream cap.
        let mut claims = sized.jetstream().get_stream("KV_lg-episodes").await?;
        assert_eq!(claims.info().await?.config.max_bytes, 48 << 20);
        // Default sizing asks for nothing: it passes and leaves the caps alone.
        plain.ensure_topology().await?;
        let mut exec = plain.jetstream().get_stream("LG_EXEC").await?;
        assert_eq!(exec.info().await?.config.max_bytes, 48 << 20);
        let mut snapshots = plain.jetstream().get_stream("OBJ_lg-snapshots").await?;
        assert_eq!(snapshots.info().await?.config.max_bytes, 128 << 20);
        Ok(())
    })
    .await
}

/// The `audit` durable's ack_wait is the owner's `audit_ack_wait`: 30 s when unset, updated on
/// an existing durable when set, and left alone by a process that sets none (a worker).
#[tokio::test]
async fn the_audit_consumers_ack_wait_follows_the_owner() -> Result<()> {
    bounded(async {
        let server = NatsServer::start().await?;
        let plain = bus_on(&server).await?;
        let ack_wait = |bus: Bus| async move {
            let mut consumer: async_nats::jetstream::consumer::PullConsumer = bus
                .jetstream()
                .get_consumer_from_stream(Work::Audit.durable_name(), Work::Audit.stream_name())
                .await?;
            anyhow::Ok(consumer.info().await?.config.ack_wait)
        };
        plain.ensure_topology().await?;
        assert_eq!(ack_wait(plain.clone()).await?, Duration::from_secs(30));
        let owner = plain
            .clone()
            .with_topology(loopgate_transport::TopologyOptions {
                audit_ack_wait: Some(Duration::from_secs(3)),
                ..Default::default()
            });
        owner.ensure_topology().await?;
        assert_eq!(ack_wait(plain.clone()).await?, Duration::from_secs(3));
        plain.ensure_topology().await?;
        assert_eq!(ack_wait(plain.clone()).await?, Duration::from_secs(3));
        Ok(())
    })
    .await
}
