//! Episode control: the auditor announces each audit it starts, and a `CancelEpisodes`
//! notice stops an in-flight audit (its checks killed, no report, no redelivery).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use loopgate_protocol::wire::{decode, CancelEpisodes, Envelope, EpisodeRole, Message};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audits_are_announced_and_a_cancel_notice_stops_them() -> anyhow::Result<()> {
    let mut env = env().await?;
    let (base, candidate) = freeze_hello(&env.store).await?;
    let work_dir = tempfile::tempdir()?;
    let marker_dir = tempfile::tempdir()?;
    let marker = marker_dir.path().join("started");
    let (cancel, worker) = spawn_worker(&env, work_dir.path(), BTreeMap::new());

    let check = format!("touch {}; sleep 60", marker.display());
    let contract = contract(vec![criterion("slow", &check, 120)]);
    publish_request(
        &env.bus,
        &request("run-cancel", contract, &base, &candidate),
    )
    .await?;

    // The announcement comes first, on the results stream.
    let delivery = env
        .results
        .next(Duration::from_secs(20))
        .await?
        .context("no EpisodeStarted")?;
    delivery.ack().await?;
    match decode(delivery.payload())? {
        Message::EpisodeStarted(started) => {
            assert_eq!(started.run_id, "run-cancel");
            assert_eq!(started.role, EpisodeRole::Auditor);
            assert_eq!(started.worker, "audit-in-process");
            assert_eq!(started.delivery_attempt, 1);
        }
        other => anyhow::bail!("expected episode_started, got {}", other.kind()),
    }
    loopgate_test_support::wait_until(Duration::from_secs(20), || {
        let exists = marker.exists();
        async move { exists }
    })
    .await?;

    let notice = Message::CancelEpisodes(CancelEpisodes {
        run_id: "run-cancel".into(),
        generation: 1,
        reason: "cancelled by the test".into(),
        dispatch: None,
    });
    let stopped_at = Instant::now();
    env.bus
        .publish_core_json(
            &env.bus.subjects().control("run-cancel"),
            &Envelope::new(&notice),
        )
        .await?;
    env.bus.flush().await?;
    // The scratch dir goes as soon as the audit is dropped (its check killed).
    loopgate_test_support::wait_until(Duration::from_secs(15), || {
        let empty = dir_is_empty(work_dir.path());
        async move { empty }
    })
    .await
    .context("the cancelled audit kept running")?;
    assert!(stopped_at.elapsed() < Duration::from_secs(15));
    // No report (its progress notices aside), and the request is not handed out again.
    let after = support::next_besides_progress(&mut env.results, Duration::from_secs(3)).await?;
    assert!(after.is_none(), "{:?}", after.map(|m| m.kind()));
    let mut audit = env.bus.jetstream().get_stream("LG_AUDIT").await?;
    assert_eq!(
        audit.info().await?.state.messages,
        0,
        "terminated, not redelivered"
    );

    cancel.cancel();
    worker.await?;
    Ok(())
}
