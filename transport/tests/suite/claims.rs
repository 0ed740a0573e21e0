//! Episode claims against a real nats-server: a holder cut off from NATS stops before anyone
//! takes its step over, and a killed holder's step is taken over at the first look once the
//! server's own stamps say the holder must have stopped.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use loopgate_test_support::{FaultProxy, NatsServer};
use loopgate_transport::runtime::episode_claim::{
    claim_key, stale_after, ClaimGuard, Claimed, EpisodeClaims,
};
use loopgate_transport::{Bus, BusOptions};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::{bounded, bus_on};

async fn owned(claims: &EpisodeClaims, key: &str, stop: &CancellationToken) -> Result<ClaimGuard> {
    match claims.claim(key, stop).await? {
        Some(Claimed::Owned(guard)) => Ok(*guard),
        Some(Claimed::Finished(_)) => bail!("the step reads as finished"),
        None => bail!("the claim wait was stopped before the step was taken"),
    }
}

#[tokio::test]
async fn a_holder_cut_off_from_nats_stops_before_its_step_is_taken_over() -> Result<()> {
    bounded(async {
        let server = NatsServer::start().await?;
        let proxy = FaultProxy::to_port(server.port()).await?;
        let direct = bus_on(&server).await?;
        // Requests wait longer than a heartbeat interval: the heartbeat's own limit applies.
        let options = BusOptions {
            request_timeout: Duration::from_secs(10),
            ..BusOptions::default()
        };
        let cut_off = Bus::connect(&format!("nats://{}", proxy.addr()), "lgtest", options).await?;
        // Not a whole number of heartbeat tries (interval + its timeout): a holder that only
        // looked at its deadline after a failed try would outlive it by most of a try.
        let ack_wait = Duration::from_secs(5);
        let key = claim_key("exec", "run-1:1:1:exec");
        let holder = EpisodeClaims::new(cut_off, "worker-a", ack_wait);
        let watcher = EpisodeClaims::new(direct, "worker-b", ack_wait);
        let never = CancellationToken::new();

        let held = owned(&holder, &key, &never).await?;
        proxy.drop_traffic();
        let lost = held.lost().clone();
        let stopped = tokio::spawn(async move {
            lost.cancelled().await;
            Instant::now()
        });
        let taken = owned(&watcher, &key, &never).await?;
        let taken_at = Instant::now();
        let stopped_at = stopped.await.context("the holder's stop watch")?;
        assert!(
            stopped_at <= taken_at,
            "the step was taken over {:?} before its cut-off holder stopped",
            stopped_at - taken_at
        );
        assert!(!taken.is_taken_over());
        drop(held);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_killed_holders_step_is_taken_over_at_the_first_look_once_stale() -> Result<()> {
    bounded(async {
        let server = NatsServer::start().await?;
        let ack_wait = Duration::from_secs(4);
        let key = claim_key("exec", "run-2:1:1:exec");
        let holder = EpisodeClaims::new(bus_on(&server).await?, "worker-a", ack_wait);
        let watcher = EpisodeClaims::new(bus_on(&server).await?, "worker-b", ack_wait);
        let never = CancellationToken::new();

        // Killed: the heartbeats stop, nothing is released.
        let held = owned(&holder, &key, &never).await?;
        drop(held);
        // The fault lasts until the holder must have stopped by the server's clock, as when a
        // redelivery arrives after ack_wait.
        tokio::time::sleep(stale_after(ack_wait) + Duration::from_millis(300)).await;

        // A watcher that counted from its own first sight would wait stale_after again; the
        // server's stamps say the claim is stale now, so the first look takes it.
        let impatient = CancellationToken::new();
        let stop = impatient.clone();
        let half = stale_after(ack_wait) / 2;
        tokio::spawn(async move {
            tokio::time::sleep(half).await;
            stop.cancel();
        });
        owned(&watcher, &key, &impatient)
            .await
            .context("the stale claim was not taken at the first look")?;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_restarted_worker_waits_for_the_steps_its_earlier_process_held() -> Result<()> {
    bounded(async {
        let server = NatsServer::start().await?;
        let ack_wait = Duration::from_secs(3);
        let never = CancellationToken::new();
        // worker-a's earlier process held a step and was killed (heartbeats stop, nothing
        // released); worker-b holds another, alive.
        let killed = EpisodeClaims::new(bus_on(&server).await?, "worker-a", ack_wait);
        drop(owned(&killed, &claim_key("exec", "run-3:1:1:exec"), &never).await?);
        let other = EpisodeClaims::new(bus_on(&server).await?, "worker-b", ack_wait);
        let _alive = owned(&other, &claim_key("exec", "run-4:1:1:exec"), &never).await?;

        // Restarted at once: it waits for its own step only, until its delivery is due again.
        let restarted = EpisodeClaims::new(bus_on(&server).await?, "worker-a", ack_wait);
        let started = Instant::now();
        assert_eq!(restarted.wait_for_earlier_claims(&never).await, 1);
        let waited = started.elapsed();
        assert!(
            waited >= ack_wait - Duration::from_millis(500),
            "took work after {waited:?}, before the held step's delivery was due ({ack_wait:?})"
        );

        // A worker with no earlier claims takes work at once (worker-b's live claim is not
        // worker-c's), and so does one whose earlier step is already due.
        let fresh = EpisodeClaims::new(bus_on(&server).await?, "worker-c", ack_wait);
        assert_eq!(fresh.wait_for_earlier_claims(&never).await, 0);
        tokio::time::sleep(ack_wait).await;
        let late = Instant::now();
        let again = EpisodeClaims::new(bus_on(&server).await?, "worker-a", ack_wait);
        assert_eq!(again.wait_for_earlier_claims(&never).await, 1);
        assert!(
            late.elapsed() < ack_wait / 2,
            "waited {:?} for a step already due",
            late.elapsed()
        );
        Ok(())
    })
    .await
}
