//! The run store with failover: a primary found through Redis Sentinel and followed when the
//! sentinels promote its replica; writes acknowledged only once a replica holds them (`WAIT`);
//! what that wait costs per write.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use loopgate_manager::run_store::{CasOutcome, RedisTarget, ReplicaAcks, RunStore, StoreError};
use loopgate_test_support::{wait_until, FaultProxy, RedisHa, RedisServer};

use crate::{bounded, cas, STORE_TIMEOUT};

fn sentinel_target(ha: &RedisHa, password: Option<&str>) -> RedisTarget {
    RedisTarget::Sentinel {
        sentinels: ha.sentinel_addrs(),
        master_name: ha.master_name().to_string(),
        password: password.map(str::to_string),
        sentinel_password: None,
    }
}

fn acks(replicas: u64, timeout_ms: u64) -> Option<ReplicaAcks> {
    Some(ReplicaAcks {
        replicas,
        timeout: Duration::from_millis(timeout_ms),
    })
}

/// Retries the transition `expected -> expected + 1` until the store applies it (the
/// failover in between makes calls fail for a while); the outcome.
async fn cas_until_applied(store: &RunStore, expected: u64, within: Duration) -> Result<()> {
    let last = std::sync::Mutex::new(String::new());
    let done = wait_until(within, || async {
        match store
            .compare_and_set("r1", cas(expected, &format!(r#"{{"n":{}}}"#, expected + 1)))
            .await
        {
            Ok(CasOutcome::Applied { new_version }) if new_version == expected + 1 => true,
            other => {
                *last.lock().unwrap() = format!("{other:?}");
                false
            }
        }
    })
    .await;
    done.with_context(|| {
        format!(
            "v{expected} -> v{}: last {}",
            expected + 1,
            last.lock().unwrap()
        )
    })
}

#[tokio::test]
#[allow(clippy::print_stderr)] // how long the failover took
async fn the_store_follows_the_primary_the_sentinels_promote() -> Result<()> {
    bounded(async {
        // The data nodes require a password, as in a deployment.
        const PASSWORD: &str = "failover-test-pw";
        let mut ha = RedisHa::start_with_password(PASSWORD).await?;
        let store = RunStore::connect_to(sentinel_target(&ha, Some(PASSWORD)), STORE_TIMEOUT)
            .await?
            .with_replica_acks(acks(1, 2000));
        assert!(
            store
                .create("r1", r#"{"n":1}"#, "pending", 1, None, None)
                .await?
        );
        for v in 1..5 {
            cas_until_applied(&store, v, Duration::from_secs(5)).await?;
        }
        let killed = Instant::now();
        let old = ha.kill_primary().await?;
        let new = ha.wait_failover(old, Duration::from_secs(30)).await?;
        let promoted = killed.elapsed();
        // The old primary comes back as a replica of the new one (as an operator, or a
        // StatefulSet's start script, brings it back), so a write can be acknowledged again.
        ha.node_mut(old)
            .context("old primary")?
            .restart_as_replica_of(new)
            .await?;
        ha.node_mut(old)
            .context("old primary")?
            .wait_replicating(Duration::from_secs(30))
            .await
            .with_context(|| ha.logs())?;
        // Every acknowledged transition survived the promotion, and the store writes on.
        let loaded = store.load("r1").await;
        let loaded = match loaded {
            Ok(l) => l,
            // The first call after the failover may still meet the dead primary.
            Err(_) => store.load("r1").await?,
        };
        assert_eq!(loaded.map(|l| l.version), Some(5));
        cas_until_applied(&store, 5, Duration::from_secs(20))
            .await
            .with_context(|| ha.logs())?;
        assert_eq!(store.load("r1").await?.map(|l| l.version), Some(6));
        eprintln!(
            "failover: replica promoted {} ms after the primary's SIGKILL; first acknowledged write {} ms after it (old primary back as a replica in between)",
            promoted.as_millis(),
            killed.elapsed().as_millis()
        );
        Ok(())
    })
    .await
}

/// A primary, a replica whose replication link runs through a proxy (so a test can cut it),
/// and a store on the primary that waits for `wait_ms` for one replica to acknowledge each
/// write; returned once the replica has acknowledged one (on a loaded machine a first `WAIT`
/// on a fresh link can run past its second).
async fn primary_with_proxied_replica(
    wait_ms: u64,
) -> Result<(RedisServer, FaultProxy, RedisServer, RunStore)> {
    let primary = RedisServer::start().await?;
    let link = FaultProxy::to_port(primary.port()).await?;
    let replica = RedisServer::start_replica_of(link.port()).await?;
    replica.wait_replicating(Duration::from_secs(30)).await?;
    let store = RunStore::connect(&primary.url(), STORE_TIMEOUT)
        .await?
        .with_replica_acks(acks(1, wait_ms));
    wait_until(Duration::from_secs(30), || async {
        store.replica_barrier().await.is_ok()
    })
    .await
    .context("the replica never acknowledged a write on the healthy link")?;
    Ok((primary, link, replica, store))
}

#[tokio::test]
async fn a_write_no_replica_holds_is_not_acknowledged() -> Result<()> {
    bounded(async {
        let (_primary, link, _replica, store) = primary_with_proxied_replica(1000).await?;
        assert!(
            store
                .create("r1", r#"{"n":1}"#, "pending", 1, None, None)
                .await?
        );
        assert_eq!(
            store.compare_and_set("r1", cas(1, r#"{"n":2}"#)).await?,
            CasOutcome::Applied { new_version: 2 }
        );
        link.drop_traffic();
        let cut = store.compare_and_set("r1", cas(2, r#"{"n":3}"#)).await;
        assert!(
            matches!(
                cut,
                Err(StoreError::NotReplicated {
                    acked: 0,
                    wanted: 1,
                    ..
                })
            ),
            "{cut:?}"
        );
        assert!(cut.as_ref().err().is_some_and(StoreError::is_retryable));
        // A replay's barrier, and the relay's claim of old pending effects, wait the same way.
        let barrier = store.replica_barrier().await;
        assert!(
            matches!(barrier, Err(StoreError::NotReplicated { .. })),
            "{barrier:?}"
        );
        link.heal();
        assert!(
            store
                .create_with_effects(
                    "r2",
                    "{}",
                    "pending",
                    1,
                    None,
                    &[],
                    &[("e1".into(), "{}".into())]
                )
                .await?
        );
        link.drop_traffic();
        let claim = store.claim_pending(i64::MAX - 1, 1, 10).await;
        assert!(
            matches!(claim, Err(StoreError::NotReplicated { .. })),
            "{claim:?}"
        );
        // Not acknowledged, not undone: the primary holds it, and the replica gets it once
        // the link heals (the engine's redelivery finds the transition already applied).
        link.heal();
        store.replica_barrier().await?;
        cas_until_applied(&store, 3, Duration::from_secs(10)).await?;
        Ok(())
    })
    .await
}

/// Per-write latency of a transition without and with `WAIT 1` (primary and replica on
/// loopback): the figure `docs/reliability.md` quotes.
#[tokio::test]
#[allow(clippy::print_stderr)] // the measured figures
async fn what_waiting_for_the_replica_costs_per_write() -> Result<()> {
    bounded(async {
        const WRITES: u64 = 300;
        let primary = RedisServer::start().await?;
        let replica = RedisServer::start_replica_of(primary.port()).await?;
        replica.wait_replicating(Duration::from_secs(30)).await?;
        let mut report = Vec::new();
        for (label, replica_acks) in [("no WAIT", None), ("WAIT 1", acks(1, 5000))] {
            let store = RunStore::connect(&primary.url(), STORE_TIMEOUT)
                .await?
                .with_replica_acks(replica_acks);
            let id = format!("bench-{}", report.len());
            assert!(store.create(&id, "{}", "pending", 1, None, None).await?);
            let mut took = Vec::new();
            for v in 1..=WRITES {
                let mut write = cas(v, &format!(r#"{{"n":{v},"pad":"{}"}}"#, "x".repeat(2000)));
                write.log_entries = vec![format!(r#"{{"type":"x","v":{v}}}"#)];
                let started = Instant::now();
                let outcome = store.compare_and_set(&id, write).await?;
                took.push(started.elapsed());
                assert_eq!(outcome, CasOutcome::Applied { new_version: v + 1 });
            }
            took.sort();
            let median = took[took.len() / 2];
            let p99 = took[took.len() * 99 / 100];
            report.push(format!(
                "{label}: median {:.0} us, p99 {:.0} us over {WRITES} transitions",
                median.as_secs_f64() * 1e6,
                p99.as_secs_f64() * 1e6
            ));
        }
        eprintln!("replica acknowledgement cost: {}", report.join("; "));
        Ok(())
    })
    .await
}

/// A primary, a store on it, and run `r1` at version 1.
async fn primary_holding_one_run() -> Result<(RedisServer, RunStore)> {
    let primary = RedisServer::start().await?;
    let store = RunStore::connect(&primary.url(), STORE_TIMEOUT).await?;
    assert!(
        store
            .create("r1", r#"{"n":1}"#, "pending", 1, None, None)
            .await?
    );
    Ok((primary, store))
}

/// What an old primary restarted as a replica looks like before its first sync: a replica
/// with nothing in it. Its "absent" must not be taken for the primary's (a result for a run
/// it does not hold was dropped so, and the run waited out its episode deadline).
#[tokio::test]
async fn an_empty_replica_does_not_answer_for_the_primary() -> Result<()> {
    bounded(async {
        let (_primary, on_primary) = primary_holding_one_run().await?;
        // A replica of a primary it cannot reach: it never syncs, so it holds nothing.
        let replica = RedisServer::start_replica_of(loopgate_test_support::free_port()?).await?;
        let on_replica = RunStore::connect(&replica.url(), STORE_TIMEOUT).await?;
        let err = on_replica
            .load("r1")
            .await
            .expect_err("an empty replica must not say the run is absent");
        assert!(
            matches!(err, StoreError::NotPrimary { .. })
                && err.is_retryable()
                && err.may_mean_failover(),
            "{err:?}"
        );
        // The primary still answers for itself: the run is there, another one is absent.
        assert_eq!(on_primary.load("r1").await?.map(|l| l.version), Some(1));
        assert!(on_primary.load("r2").await?.is_none());
        Ok(())
    })
    .await
}

/// What an old primary restarted as a replica looks like when it was a replica before: it
/// loads the dump of its last sync (a replica writes the primary's dump to its own dir, even
/// with `--save ''`) and serves that old state until it syncs again. A result judged against
/// it was ignored as "not the pending step", acked and lost (the 2026-12-07 chaos run: a run
/// waited 30 minutes for its episode deadline). The store must refuse it like an empty one.
#[tokio::test]
async fn a_replica_holding_an_old_state_does_not_answer_for_the_primary() -> Result<()> {
    bounded(async {
        let (primary, on_primary) = primary_holding_one_run().await?;
        let mut replica = RedisServer::start_replica_of(primary.port()).await?;
        replica.wait_replicating(Duration::from_secs(20)).await?;
        // The run moves on while the replica is down; it comes back unable to sync.
        replica.kill();
        assert!(matches!(
            on_primary
                .compare_and_set("r1", cas(1, r#"{"n":2}"#))
                .await?,
            CasOutcome::Applied { new_version: 2 }
        ));
        replica
            .restart_as_replica_of(loopgate_test_support::free_port()?)
            .await?;
        let on_replica = RunStore::connect(&replica.url(), STORE_TIMEOUT).await?;
        // The setup holds: the replica serves the old version of the run.
        let mut raw = redis::Client::open(replica.url())?
            .get_multiplexed_async_connection()
            .await?;
        let old: Option<u64> = redis::cmd("HGET")
            .arg(loopgate_manager::run_store::run_key("r1"))
            .arg("version")
            .query_async(&mut raw)
            .await?;
        assert_eq!(
            old,
            Some(1),
            "the restarted replica should hold its last sync's dump"
        );
        let err = on_replica
            .load("r1")
            .await
            .expect_err("a replica's old state must not be taken for the primary's");
        assert!(
            matches!(err, StoreError::NotPrimary { .. }) && err.is_retryable(),
            "{err:?}"
        );
        assert_eq!(on_primary.load("r1").await?.map(|l| l.version), Some(2));
        Ok(())
    })
    .await
}

/// A result the engine ignores is acked and gone, so it is judged only against a state the
/// replicas hold too: on a primary cut off from every replica (an old primary the sentinels
/// have not yet demoted holds an older state than the promoted one) the ignore is refused
/// and the result comes again; on the healed link it is ignored as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_is_ignored_only_against_a_state_the_replicas_hold() -> Result<()> {
    bounded(async {
        let nats = loopgate_test_support::NatsServer::start().await?;
        let (_primary, link, _replica, store) = primary_with_proxied_replica(500).await?;
        let bus = loopgate_transport::Bus::connect(
            &nats.url(),
            "loopgate",
            loopgate_transport::BusOptions::default(),
        )
        .await?;
        bus.ensure_topology().await?;
        let engine = loopgate_manager::Engine::new(
            bus,
            store,
            Duration::from_secs(3600),
            loopgate_telemetry::metrics::Metrics::new(),
        );
        let task = loopgate_common::task::parse_task_toml(
            "goal = \"g\"\n[[acceptance]]\nid = \"a\"\ncheck = \"true\"\n[roles]\nmanager = \"mgr\"\n",
        )?;
        let record = engine.create_run("r1", task, &"0".repeat(64), None).await?;
        // The run waits for its first decision: a round-1 result is not its pending step.
        let stray = loopgate_common::decide::RunEvent::ExecFinished(
            loopgate_protocol::wire::ExecResult {
                run_id: "r1".into(),
                generation: record.generation,
                round: 1,
                delivery_attempt: 1,
                worker: "exec-1".into(),
                outcome: loopgate_protocol::wire::ExecOutcome::Failed {
                    error: "stray".into(),
                },
                usage: Default::default(),
                duration_ms: 1,
                agent_isolation: None,
                attempt: 1,
                transcript: None,
            },
        );
        link.drop_traffic();
        let cut = engine.apply("r1", &stray).await;
        assert!(
            matches!(
                &cut,
                Err(loopgate_manager::EngineError::Store(
                    StoreError::NotReplicated { .. }
                ))
            ),
            "a result ignored on a primary no replica follows was acked: {cut:?}"
        );
        link.heal();
        let healed = wait_until(Duration::from_secs(10), || async {
            matches!(
                engine.apply("r1", &stray).await,
                Ok(loopgate_manager::Applied::Ignored(_))
            )
        })
        .await;
        healed.context("the healed link never let the stray result be ignored")?;
        Ok(())
    })
    .await
}
