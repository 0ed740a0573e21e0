//! Dead letters. A results-stream message whose handling still fails (Redis or NATS away) at
//! its last delivery (`max_deliver`) is not dropped: it is copied, with the reason, to
//! `LG_DEAD` (`<prefix>.dead.<kind>.<run>`), counted in `loopgate.dead_letters{kind, reason}`,
//! and terminated. The manager's `manager-dead` durable (unlimited deliveries) turns each dead
//! letter into its run's `DeadLettered` event: a `dead_letter` log entry, and the step it
//! belonged to fails now instead of waiting for its deadline.
//!
//! Why the last delivery and not the `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES` advisory:
//! the manager is this stream's only consumer and knows the reason (the advisory carries none),
//! the copy is a JetStream publish with a dedup id, and the manager's NATS user needs no new
//! permission.
//!
//! Work (`LG_EXEC`, `LG_AUDIT`) is consumed by executors and auditors, whose NATS users may not
//! write dead letters (a hostile agent could fail other runs' steps with forged ones). For work
//! the server's advisory is the signal: `LG_DEAD` captures the max-deliveries advisories of the
//! work streams (so none is lost while no manager listens), and the same durable turns each
//! into a dead letter of the message it names, read back by its stream sequence and then
//! removed from the work queue (`Bus::given_up_work`). Only the server publishes under
//! `$JS.EVENT.`; no loopgate NATS user may.

use std::sync::Arc;
use std::time::Duration;

use loopgate_common::decide::RunEvent;
use loopgate_protocol::subjects::{
    MaxDeliveriesAdvisory, MAX_DELIVERIES_ADVISORY, STREAM_AUDIT, STREAM_EXEC,
};
use loopgate_protocol::wire::{decode, Message};
use loopgate_transport::runtime::{run_consumer, ConsumeOptions, Settle};
use loopgate_transport::{BusError, ConsumerOptions, Delivery, Work};
use opentelemetry::KeyValue;
use tokio_util::sync::CancellationToken;

use crate::engine::{Engine, EngineError};

/// Headers of a dead letter.
pub(crate) const REASON_HEADER: &str = "Loopgate-Dead-Reason";
pub(crate) const SUBJECT_HEADER: &str = "Loopgate-Dead-Subject";
pub(crate) const DELIVERIES_HEADER: &str = "Loopgate-Dead-Deliveries";

/// Longest nak delay of a results message whose handling failed for a reason that may pass.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);
/// Redelivery delay of a dead letter that could not be applied yet.
const DEAD_RETRY_DELAY: Duration = Duration::from_secs(5);

/// The nak delay after failed delivery `attempt` (1-based): 1 s, doubling, at most 30 s. With
/// the default 10 deliveries a message outlives an outage of about 2.5 minutes.
pub(crate) fn retry_delay(attempt: u64) -> Duration {
    let exponent = attempt.saturating_sub(1).min(16) as u32;
    Duration::from_secs(1u64 << exponent).min(MAX_RETRY_DELAY)
}

/// Whether delivery `attempt` was the last one the consumer makes.
pub(crate) fn is_last_delivery(attempt: u64, max_deliver: i64) -> bool {
    max_deliver > 0 && i64::try_from(attempt).unwrap_or(i64::MAX) >= max_deliver
}

/// The metric's `reason` attribute: why handling failed, by kind.
pub(crate) fn reason_class(error: &EngineError) -> &'static str {
    match error {
        EngineError::Store(_) => "run_store",
        EngineError::Bus(_) => "bus",
        EngineError::Contention { .. } => "contention",
        _ => "other",
    }
}

/// The metric's `reason` of work a worker's consumer gave up on.
const GIVEN_UP_CLASS: &str = "deliveries";

/// The message a dead letter copies, and where it was.
pub(crate) struct Original<'a> {
    pub payload: &'a [u8],
    /// The subject it was published on.
    pub subject: &'a str,
    pub stream: &'a str,
    pub sequence: u64,
    pub deliveries: u64,
}

impl<'a> Original<'a> {
    /// A results-stream delivery at its last attempt.
    pub(crate) fn results(delivery: &'a Delivery) -> Original<'a> {
        Original {
            payload: delivery.payload(),
            subject: delivery.subject(),
            stream: Work::Results.stream_name(),
            sequence: delivery.stream_sequence(),
            deliveries: delivery.attempt(),
        }
    }
}

/// Copy `original` to the dead-letter stream with `reason`, and count it.
pub(crate) async fn dead_letter(
    engine: &Engine,
    original: &Original<'_>,
    kind: &str,
    run_id: &str,
    class: &str,
    reason: &str,
) -> Result<(), BusError> {
    let subject = engine.bus().subjects().dead(kind, run_id);
    let msg_id = format!("dead:{}:{}", original.stream, original.sequence);
    let deliveries = original.deliveries.to_string();
    // Header values are one line.
    let reason_line: String = reason
        .chars()
        .filter(|c| !c.is_control())
        .take(500)
        .collect();
    let headers = [
        (REASON_HEADER, reason_line.as_str()),
        (SUBJECT_HEADER, original.subject),
        (DELIVERIES_HEADER, deliveries.as_str()),
    ];
    engine
        .bus()
        .publish_bytes(&subject, original.payload.to_vec(), &msg_id, &headers)
        .await?;
    engine.metrics().dead_letters.add(
        1,
        &[
            KeyValue::new("kind", kind.to_string()),
            KeyValue::new("reason", class.to_string()),
        ],
    );
    tracing::error!(
        run_id,
        kind,
        reason,
        "message exhausted its deliveries; dead-lettered"
    );
    Ok(())
}

/// Applies each dead letter to its run (`RunEvent::DeadLettered`), retrying until it can.
pub struct DeadLetterLoop {
    pub engine: Engine,
    pub ack_wait: Duration,
}

impl DeadLetterLoop {
    pub async fn run(self, cancel: CancellationToken) -> Result<(), EngineError> {
        let options = ConsumerOptions {
            ack_wait: self.ack_wait,
            max_deliver: -1,
            max_ack_pending: 64,
        };
        let consumer = self.engine.bus().work_consumer(Work::Dead, options).await?;
        let consume = ConsumeOptions {
            concurrency: 4,
            pull_batch: 4,
            poll: Duration::from_secs(1),
            ack_wait: self.ack_wait,
            drain: Duration::from_secs(5),
        };
        let shared = Arc::new(self);
        run_consumer(consumer, consume, cancel, move |delivery, _lease| {
            let me = shared.clone();
            async move { me.handle(delivery).await }
        })
        .await;
        Ok(())
    }

    async fn handle(&self, delivery: Delivery) -> Settle {
        if delivery.subject().starts_with(MAX_DELIVERIES_ADVISORY) {
            return self.handle_advisory(&delivery).await;
        }
        let message: Message = match decode(delivery.payload()) {
            Ok(m) => m,
            Err(e) => return Settle::Term(format!("undecodable dead letter: {e}")),
        };
        let reason = delivery
            .header(REASON_HEADER)
            .unwrap_or_else(|| "deliveries exhausted".to_string());
        let Some(event) = RunEvent::dead_lettered(&message, &reason) else {
            return Settle::Ack;
        };
        let run_id = message.run_id().to_string();
        match self.engine.apply(&run_id, &event).await {
            Ok(_) | Err(EngineError::NotFound(_)) => Settle::Ack,
            Err(EngineError::Corrupt { .. }) | Err(EngineError::Inconsistent { .. }) => {
                Settle::Term("its run is unreadable or the transition was refused".into())
            }
            Err(e) => {
                tracing::warn!(run_id, error = %e, "dead letter not applied yet; will retry");
                Settle::Nak(Some(DEAD_RETRY_DELAY))
            }
        }
    }
}

impl DeadLetterLoop {
    /// A work consumer gave up on a message: dead-letter it (the step fails now, through the
    /// dead letter's own handling above) and take it off its work queue.
    async fn handle_advisory(&self, delivery: &Delivery) -> Settle {
        let Some(advisory) = MaxDeliveriesAdvisory::parse(
            delivery.subject(),
            delivery.payload(),
            &[STREAM_EXEC, STREAM_AUDIT],
        ) else {
            return Settle::Term("not a work stream's max-deliveries advisory".into());
        };
        let bus = self.engine.bus();
        let work = match bus
            .given_up_work(&advisory.stream, advisory.stream_seq)
            .await
        {
            Ok(Some(work)) => work,
            // Acked after all, or an earlier handling of this advisory removed it.
            Ok(None) => return Settle::Ack,
            Err(e) => {
                tracing::warn!(stream = %advisory.stream, seq = advisory.stream_seq, error = %e,
                    "given-up work not read yet; will retry");
                return Settle::Nak(Some(DEAD_RETRY_DELAY));
            }
        };
        let reason = format!(
            "{} gave up after {} deliveries",
            advisory.consumer, advisory.deliveries
        );
        match decode(&work.payload) {
            Ok(message) => {
                let original = Original {
                    payload: &work.payload,
                    subject: &work.subject,
                    stream: &advisory.stream,
                    sequence: advisory.stream_seq,
                    deliveries: advisory.deliveries,
                };
                let run_id = message.run_id().to_string();
                if let Err(e) = dead_letter(
                    &self.engine,
                    &original,
                    message.kind(),
                    &run_id,
                    GIVEN_UP_CLASS,
                    &reason,
                )
                .await
                {
                    tracing::warn!(run_id, error = %e, "given-up work not dead-lettered yet; will retry");
                    return Settle::Nak(Some(DEAD_RETRY_DELAY));
                }
            }
            // Nothing a run can be told about; it still leaves the queue.
            Err(e) => tracing::error!(stream = %advisory.stream, seq = advisory.stream_seq,
                error = %e, "undecodable work exhausted its deliveries; removed"),
        }
        // A retry after a failed removal publishes the dead letter again: its dedup id makes
        // that harmless.
        match bus
            .remove_given_up_work(&advisory.stream, advisory.stream_seq)
            .await
        {
            Ok(()) => Settle::Ack,
            Err(e) => {
                tracing::warn!(stream = %advisory.stream, seq = advisory.stream_seq, error = %e,
                    "given-up work not removed yet; will retry");
                Settle::Nak(Some(DEAD_RETRY_DELAY))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delays_double_up_to_thirty_seconds() {
        let cases = [
            (0, 1),
            (1, 1),
            (2, 2),
            (3, 4),
            (5, 16),
            (6, 30),
            (10, 30),
            (u64::MAX, 30),
        ];
        for (attempt, secs) in cases {
            assert_eq!(retry_delay(attempt), Duration::from_secs(secs), "{attempt}");
        }
        let outage: u64 = (1..10).map(|a| retry_delay(a).as_secs()).sum();
        assert!(outage >= 120, "10 deliveries outlive {outage} s");
    }

    #[test]
    fn the_last_delivery() {
        let cases = [
            (1, 10, false),
            (9, 10, false),
            (10, 10, true),
            (11, 10, true),
            (1, 1, true),
            (1000, -1, false),
            (5, 0, false),
        ];
        for (attempt, max, last) in cases {
            assert_eq!(is_last_delivery(attempt, max), last, "{attempt} of {max}");
        }
    }
}
