//! Episode claims against a real nats-server: a holder cut off from NATS pauses before anyone
//! takes its step over and stops once its link heals; a holder paused by a frozen server keeps
//! its step once the server answers; and a killed holder's step is taken over soon after the
//! server's own stamps say the holder must have paused.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use loopgate_test_support::{FaultProxy, NatsServer};
use loopgate_transport::runtime::episode_claim::{
    claim_key, stale_after, ClaimGuard, Claimed, EpisodeClaims, WATCHED_SILENCE,
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

/// Resolves (with when) once `guard`'s episode is paused (`want` true) or going on (false).
fn when_paused_is(guard: &ClaimGuard, want: bool) -> tokio::task::JoinHandle<Instant> {
    let mut paused = guard.paused();
    tokio::spawn(async move {
        while *paused.borrow_and_update() != want {
            if paused.changed().await.is_err() {
                break;
            }
        }
        Instant::now()
    })
}

#[tokio::test]
async fn a_holder_cut_off_from_nats_pauses_before_its_step_is_taken_over_and_stops_when_healed(
) -> Result<()> {
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
        let paused = when_paused_is(&held, true);
        let taken = owned(&watcher, &key, &never).await?;
        let taken_at = Instant::now();
        let paused_at = paused.await.context("the holder's pause watch")?;
        assert!(
            paused_at <= taken_at,
            "the step was taken over {:?} before its cut-off holder paused",
            paused_at - taken_at
        );
        assert!(!held.is_taken_over(), "the holder cannot know yet");

        // Healed: the holder's next write finds the claim another's, and it stops.
        proxy.heal();
        tokio::time::timeout(Duration::from_secs(20), held.taken_over().cancelled())
            .await
            .context("the healed holder never learned its step was taken over")?;
        assert!(!taken.is_taken_over());
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_holder_paused_by_a_frozen_server_keeps_its_step_when_the_server_answers() -> Result<()> {
    bounded(async {
        let mut server = NatsServer::start().await?;
        // The holder's link comes back a little later than the server (a reconnect's backoff,
        // a retry's timeout), so the watcher reads the stale claim first.
        let proxy = FaultProxy::to_port(server.port()).await?;
        let holder_bus = Bus::connect(
            &format!("nats://{}", proxy.addr()),
            "lgtest",
            BusOptions::default(),
        )
        .await?;
        let ack_wait = Duration::from_secs(3);
        let key = claim_key("exec", "run-5:1:1:exec");
        let holder = EpisodeClaims::new(holder_bus, "worker-a", ack_wait);
        let watcher = EpisodeClaims::new(bus_on(&server).await?, "worker-b", ack_wait);
        let never = CancellationToken::new();

        let held = owned(&holder, &key, &never).await?;
        let paused = when_paused_is(&held, true);
        // Frozen past the holder's deadline and the claim's stale line: nobody can write, and
        // by the server's clock the claim is stale the moment it answers again.
        proxy.drop_traffic();
        server.process_mut().signal("STOP");
        tokio::time::sleep(stale_after(ack_wait) + Duration::from_secs(1)).await;
        server.process_mut().signal("CONT");
        paused.await.context("the holder's pause watch")?;

        // The redelivery's worker looks at once; the paused holder's next write must land
        // before the watcher has read the claim silent long enough to take it.
        let late = WATCHED_SILENCE / 3;
        let heal = async {
            tokio::time::sleep(late).await;
            proxy.heal();
        };
        let stop = CancellationToken::new();
        let give_up = stop.clone();
        let watching = tokio::spawn(async move {
            let claimed = watcher.claim(&key, &stop).await;
            (
                claimed.map(|c| matches!(c, Some(Claimed::Owned(_)))),
                watcher,
            )
        });
        heal.await;
        tokio::time::timeout(WATCHED_SILENCE * 4, when_paused_is(&held, false))
            .await
            .context("the holder was not resumed after the server came back")?
            .context("the holder's resume watch")?;
        // Watched for longer than it takes over a silent claim: the holder's heartbeats go on.
        tokio::time::sleep(WATCHED_SILENCE * 2).await;
        give_up.cancel();
        let (took, _watcher) = watching.await.context("the watcher task")?;
        assert!(
            !took?,
            "the watcher took the step over from its live holder"
        );
        assert!(!held.is_taken_over());
        assert!(!*held.paused().borrow());
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_killed_holders_step_is_taken_over_soon_after_it_is_stale() -> Result<()> {
    bounded(async {
        let server = NatsServer::start().await?;
        let ack_wait = Duration::from_secs(6);
        let key = claim_key("exec", "run-2:1:1:exec");
        let holder = EpisodeClaims::new(bus_on(&server).await?, "worker-a", ack_wait);
        let watcher = EpisodeClaims::new(bus_on(&server).await?, "worker-b", ack_wait);
        let never = CancellationToken::new();

        // Killed: the heartbeats stop, nothing is released.
        let held = owned(&holder, &key, &never).await?;
        drop(held);
        // The fault lasts until the holder must have paused by the server's clock, as when a
        // redelivery arrives after ack_wait.
        tokio::time::sleep(stale_after(ack_wait) + Duration::from_millis(300)).await;

        // A watcher that counted the claim's age from its own first sight would wait
        // stale_after again; the server's stamps say the claim is stale now, so only the
        // watcher's own read of its silence is left.
        let impatient = CancellationToken::new();
        let stop = impatient.clone();
        let bound = WATCHED_SILENCE + (stale_after(ack_wait) - WATCHED_SILENCE) / 2;
        tokio::spawn(async move {
            tokio::time::sleep(bound).await;
            stop.cancel();
        });
        owned(&watcher, &key, &impatient)
            .await
            .with_context(|| format!("the stale claim was not taken within {bound:?}"))?;
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
