//! The one work loop every daemon runs: pull a delivery, keep it alive while a handler works on
//! it, and settle it the way the handler says. A handler is a plain async function
//! `(Delivery, Lease) -> Settle`; it decodes, runs, publishes its result and returns how the
//! delivery ends. Up to `concurrency` handlers run at once. When `cancel` fires the loop stops
//! pulling and gives in-flight handlers `drain` to finish; what is still running then is dropped
//! unsettled, and the server redelivers it after `ack_wait`. A worker never holds a message it
//! has not started: each pull asks for at most as many as it has free handlers (and at most
//! `pull_batch`), and a pull still waiting when `cancel` fires is dropped with its
//! subscription, so the server gives a later message to another worker.
//! A [`PullGate`] that says no (e.g. the work dir is full) stops the loop pulling until it says
//! yes again: the work stays queued on the server, undelivered, for this or another worker.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::bus_error::BusError;
use crate::runtime::keep_alive::KeepAlive;
use crate::work_consumer::{Delivery, WorkConsumer};

/// Episodes one worker loop runs at once (its `concurrency`). An autoscaler's per-pod target on
/// a work queue (KEDA's `lagThreshold`, the HPA's `averageValue`) must equal it, so that
/// waiting plus in-flight messages never ask for fewer pods than are busy.
pub const EPISODES_PER_LOOP: usize = 1;

/// How often a closed [`PullGate`] is asked again (at most: a shorter poll asks sooner).
const GATE_RECHECK: Duration = Duration::from_millis(500);
/// When a delivery pulled just as the gate closed is offered again.
const GATE_NAK_DELAY: Duration = Duration::from_secs(1);

/// How a handler's delivery ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settle {
    /// Done: its result is published (or it needed none).
    Ack,
    /// Hand it back for redelivery, after the delay when given.
    Nak(Option<Duration>),
    /// Never redeliver it (undecodable, stale, cancelled); the reason is logged.
    Term(String),
    /// Leave it unsettled: another worker holds the step now (its episode claim was taken
    /// over), and a nak or term of this delivery could disturb that one's.
    Abandon,
}

/// What a handler may know about its hold on the delivery.
#[derive(Debug, Clone)]
pub struct Lease {
    lost: CancellationToken,
}

impl Lease {
    /// Fires when progress acks have failed for a whole `ack_wait`: the server may have given
    /// the delivery to another worker.
    pub fn lost(&self) -> &CancellationToken {
        &self.lost
    }
}

#[derive(Debug, Clone, Copy)]
pub struct ConsumeOptions {
    /// Handlers running at once.
    pub concurrency: usize,
    /// Most messages one pull request asks for (never more than the free handlers). 1 for a
    /// loop behind a [`PullGate`]: messages a closed gate leaves unstarted are held back from
    /// every other worker until their ack_wait ends.
    pub pull_batch: usize,
    /// How long one pull waits before the loop looks at `cancel` again.
    pub poll: Duration,
    /// The consumer's ack_wait: progress acks go out every third of it.
    pub ack_wait: Duration,
    /// After `cancel`, how long in-flight handlers may run on.
    pub drain: Duration,
}

/// Asked before every pull: `Err(why)` means take no work now (asked again after a poll).
pub type PullGate = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// Pull from `consumer` and run `handler` on every delivery until `cancel` fires.
pub async fn run_consumer<H, Fut>(
    consumer: WorkConsumer,
    options: ConsumeOptions,
    cancel: CancellationToken,
    handler: H,
) where
    H: Fn(Delivery, Lease) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Settle> + Send + 'static,
{
    run_gated_consumer(consumer, options, Arc::new(|| Ok(())), cancel, handler).await;
}

/// [`run_consumer`], pulling only while `gate` says yes.
pub async fn run_gated_consumer<H, Fut>(
    mut consumer: WorkConsumer,
    options: ConsumeOptions,
    gate: PullGate,
    cancel: CancellationToken,
    handler: H,
) where
    H: Fn(Delivery, Lease) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Settle> + Send + 'static,
{
    let handler = Arc::new(handler);
    let slots = Arc::new(Semaphore::new(options.concurrency.max(1)));
    let mut in_flight = JoinSet::new();
    let mut paused = false;
    loop {
        let slot = tokio::select! {
            biased;
            () = cancel.cancelled() => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        match gate() {
            Err(why) => {
                if !paused {
                    tracing::warn!(reason = %why, "taking no work until this clears");
                    paused = true;
                }
                drop(slot);
                tokio::select! {
                    biased;
                    () = cancel.cancelled() => break,
                    () = tokio::time::sleep(options.poll.min(GATE_RECHECK)) => {}
                }
                while in_flight.try_join_next().is_some() {}
                continue;
            }
            Ok(()) if paused => {
                tracing::info!("taking work again");
                paused = false;
            }
            Ok(()) => {}
        }
        let next = tokio::select! {
            biased;
            () = cancel.cancelled() => break,
            next = consumer.next_up_to(
                (slots.available_permits() + 1).min(options.pull_batch),
                options.poll,
            ) => next,
        };
        while in_flight.try_join_next().is_some() {}
        match next {
            Ok(Some(delivery)) if gate().is_err() => {
                // The gate closed while the pull waited: hand the message back for another
                // worker (or this one, once the gate opens).
                tracing::info!("gate closed during the pull: handing the delivery back");
                settle_delivery(&delivery, Settle::Nak(Some(GATE_NAK_DELAY))).await;
            }
            Ok(Some(delivery)) => {
                let handler = handler.clone();
                let ack_wait = options.ack_wait;
                in_flight.spawn(
                    async move {
                        let keep_alive = KeepAlive::start(delivery.progress_handle(), ack_wait);
                        let lease = Lease {
                            lost: keep_alive.lost(),
                        };
                        let settle = handler(delivery.clone(), lease).await;
                        drop(keep_alive);
                        settle_delivery(&delivery, settle).await;
                        drop(slot);
                    }
                    .in_current_span(),
                );
            }
            Ok(None) => {}
            // `next` has already backed off.
            Err(err) => tracing::debug!(error = %err, "pull failed"),
        }
    }
    let drained = tokio::time::timeout(options.drain, async {
        while in_flight.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            drain = ?options.drain,
            left = in_flight.len(),
            "in-flight work did not finish in time; it will be redelivered"
        );
        in_flight.abort_all();
    }
}

/// Settle `delivery` as `settle` says, logging (never failing on) an acknowledgement error:
/// a lost ack means a redelivery, which every consumer tolerates.
pub async fn settle_delivery(delivery: &Delivery, settle: Settle) {
    let (op, result): (&str, Result<(), BusError>) = match settle {
        Settle::Ack => ("ack", delivery.ack().await),
        Settle::Nak(delay) => ("nak", delivery.nak(delay).await),
        Settle::Term(reason) => {
            tracing::debug!(subject = delivery.subject(), %reason, "terminating the delivery");
            ("term", delivery.term().await)
        }
        Settle::Abandon => {
            tracing::debug!(
                subject = delivery.subject(),
                "leaving the delivery to the worker that holds its step"
            );
            return;
        }
    };
    if let Err(err) = result {
        tracing::warn!(op, error = %err, "acknowledgement failed; the message may be redelivered");
    }
}
