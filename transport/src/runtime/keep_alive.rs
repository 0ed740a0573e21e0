//! Keeping a delivery alive while it is worked on: progress acks (`AckKind::Progress`) every
//! `ack_wait / 3` restart the server's redelivery timer, so `ack_wait` can stay short while an
//! episode runs for half an hour. When progress acks have failed for a whole `ack_wait` the
//! server may have handed the message to another worker: [`KeepAlive::lost`] fires, so the
//! caller can stop work it may no longer own.

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::bus_error::BusError;
use crate::work_consumer::ProgressHandle;

/// Progress acks go out three times per `ack_wait`, at least a second apart.
pub fn progress_interval(ack_wait: Duration) -> Duration {
    (ack_wait / 3).max(Duration::from_secs(1))
}

/// Sends progress acks for one delivery until dropped.
#[derive(Debug)]
pub struct KeepAlive {
    task: JoinHandle<()>,
    lost: CancellationToken,
}

impl KeepAlive {
    /// Progress acks for `handle`'s delivery, whose consumer redelivers after `ack_wait`.
    pub fn start(handle: ProgressHandle, ack_wait: Duration) -> KeepAlive {
        KeepAlive::with_sender(ack_wait, move || {
            let handle = handle.clone();
            async move { handle.progress().await }
        })
    }

    /// The same loop over any progress sender (the unit tests use a fake one).
    pub(crate) fn with_sender<F, Fut>(ack_wait: Duration, send: F) -> KeepAlive
    where
        F: Fn() -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), BusError>> + Send + 'static,
    {
        let lost = CancellationToken::new();
        let task = tokio::spawn(keep_alive_loop(ack_wait, send, lost.clone()).in_current_span());
        KeepAlive { task, lost }
    }

    /// Fires once no progress ack has reached the server for `ack_wait`.
    pub fn lost(&self) -> CancellationToken {
        self.lost.clone()
    }
}

impl Drop for KeepAlive {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn keep_alive_loop<F, Fut>(ack_wait: Duration, send: F, lost: CancellationToken)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<(), BusError>>,
{
    let every = progress_interval(ack_wait);
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    // The delivery itself counts as the last sign of life.
    let mut last_ok = Instant::now();
    loop {
        ticker.tick().await;
        // A confirmation that takes longer than the interval counts as a failure: a frozen
        // or partitioned server must be noticed within ack_wait, whatever the bus timeout.
        let sent = tokio::time::timeout(every, send())
            .await
            .unwrap_or(Err(BusError::Timeout {
                op: "progress ack",
                after: every,
            }));
        match sent {
            Ok(()) => last_ok = Instant::now(),
            Err(err) => {
                let silent = last_ok.elapsed();
                tracing::warn!(error = %err, ?silent, "progress ack failed");
                if silent >= ack_wait && !lost.is_cancelled() {
                    tracing::error!(
                        ?silent,
                        ?ack_wait,
                        "no progress ack reached the server for ack_wait: the delivery may be redelivered elsewhere"
                    );
                    lost.cancel();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    use super::*;

    #[test]
    fn progress_interval_table() {
        let cases = [(30, 10), (3, 1), (2, 1), (90, 30)];
        for (ack_wait, every) in cases {
            assert_eq!(
                progress_interval(Duration::from_secs(ack_wait)),
                Duration::from_secs(every),
                "{ack_wait}"
            );
        }
    }

    /// A sender that succeeds for the first `ok_for` calls and fails afterwards.
    fn sender(
        ok_for: u32,
    ) -> (
        Arc<AtomicU32>,
        impl Fn() -> std::future::Ready<Result<(), BusError>>,
    ) {
        let calls = Arc::new(AtomicU32::new(0));
        let counter = calls.clone();
        let send = move || {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            std::future::ready(if n < ok_for {
                Ok(())
            } else {
                Err(BusError::Protocol("server away".into()))
            })
        };
        (calls, send)
    }

    #[tokio::test(start_paused = true)]
    async fn acks_every_third_of_ack_wait_and_stays_owned_while_they_succeed() {
        let (calls, send) = sender(u32::MAX);
        let keep_alive = KeepAlive::with_sender(Duration::from_secs(30), send);
        tokio::time::sleep(Duration::from_secs(95)).await;
        assert_eq!(calls.load(Ordering::SeqCst), 9);
        assert!(!keep_alive.lost().is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn reports_lost_once_acks_fail_for_ack_wait() {
        let (calls, send) = sender(2);
        let keep_alive = KeepAlive::with_sender(Duration::from_secs(30), send);
        let lost = keep_alive.lost();
        // Acks at 10 s and 20 s succeed; from 30 s on they fail: lost at 50 s (30 s silent).
        tokio::time::sleep(Duration::from_secs(45)).await;
        assert!(!lost.is_cancelled());
        tokio::time::timeout(Duration::from_secs(10), lost.cancelled())
            .await
            .expect("lost fires");
        assert!(calls.load(Ordering::SeqCst) >= 5);
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_stops_the_acks() {
        let (calls, send) = sender(u32::MAX);
        let keep_alive = KeepAlive::with_sender(Duration::from_secs(3), send);
        tokio::time::sleep(Duration::from_millis(2500)).await;
        drop(keep_alive);
        let before = calls.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(calls.load(Ordering::SeqCst), before);
    }
}
