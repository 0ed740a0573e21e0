//! Periodic gauges only the control plane can see: runs by state (Redis indexes) and work
//! waiting in each JetStream consumer (queue lag).

use std::time::Duration;

use loopgate_common::state::RunState;
use loopgate_protocol::subjects::{STREAM_AUDIT, STREAM_EXEC, STREAM_RESULTS};
use loopgate_transport::runtime::{run_periodically, FirstPass};
use opentelemetry::KeyValue;
use tokio_util::sync::CancellationToken;

use crate::engine::Engine;

const CONSUMERS: [(&str, &str); 4] = [
    (STREAM_EXEC, "exec-cli"),
    (STREAM_EXEC, "exec-gui"),
    (STREAM_AUDIT, "audit"),
    (STREAM_RESULTS, "manager"),
];

pub async fn run_gauges(engine: Engine, every: Duration, cancel: CancellationToken) {
    run_periodically("gauges", every, FirstPass::Now, cancel, || refresh(&engine)).await
}

/// One refresh; a gauge that cannot be read now keeps its last value.
async fn refresh(engine: &Engine) -> Result<(), std::convert::Infallible> {
    let metrics = engine.metrics();
    for state in RunState::ALL {
        if let Ok(n) = engine.store().count(state.as_str()).await {
            metrics
                .runs
                .record(n, &[KeyValue::new("state", state.as_str())]);
        }
    }
    let js = engine.bus().jetstream();
    let mut held = std::collections::BTreeMap::new();
    for stream in [STREAM_EXEC, STREAM_AUDIT, STREAM_RESULTS] {
        let oldest = tokio::time::timeout(Duration::from_secs(5), async {
            let mut s = js.get_stream(stream).await.ok()?;
            let state = &s.info().await.ok()?.state;
            Some((state.messages, state.first_timestamp))
        })
        .await;
        if let Ok(Some((messages, first))) = oldest {
            let now = time::OffsetDateTime::now_utc();
            metrics.queue_oldest_age.record(
                oldest_age_secs(messages, first, now),
                &[KeyValue::new("stream", stream)],
            );
            held.insert(stream, messages);
        }
    }
    // Per stream: what its consumers still deliver or hold; None once one cannot be read.
    let mut outstanding_by_stream: std::collections::BTreeMap<&str, Option<u64>> =
        std::collections::BTreeMap::new();
    for (stream, consumer) in CONSUMERS {
        let info = tokio::time::timeout(Duration::from_secs(5), async {
            let mut s = js.get_stream(stream).await.ok()?;
            let _ = s.info().await.ok()?;
            s.consumer_info(consumer)
                .await
                .ok()
                .map(|c| (c.num_pending, c.num_ack_pending))
        })
        .await;
        let entry = outstanding_by_stream.entry(stream).or_insert(Some(0));
        if let Ok(Some((pending, ack_pending))) = info {
            let labels = [
                KeyValue::new("stream", stream),
                KeyValue::new("consumer", consumer),
            ];
            let sum = outstanding(pending, ack_pending);
            metrics.queue_pending.record(pending, &labels);
            metrics.queue_outstanding.record(sum, &labels);
            *entry = entry.map(|total| total.saturating_add(sum));
        } else {
            *entry = None;
        }
    }
    for (stream, total) in outstanding_by_stream {
        if let (Some(messages), Some(total)) = (held.get(stream), total) {
            metrics.queue_dead_letters.record(
                dead_letters(*messages, total),
                &[KeyValue::new("stream", stream)],
            );
        }
    }
    Ok(())
}

/// Waiting plus in flight (delivered, not yet acked): the number KEDA's nats-jetstream scaler
/// scales on (`num_pending + num_ack_pending`), so the HPA alternative sees the same one.
pub(crate) fn outstanding(num_pending: u64, num_ack_pending: usize) -> u64 {
    num_pending.saturating_add(u64::try_from(num_ack_pending).unwrap_or(u64::MAX))
}

/// Messages a work-queue stream still holds that none of its consumers will deliver again
/// (deliveries exhausted at max_deliver, or terminated): the stream's count minus what its
/// consumers have waiting or in flight.
pub(crate) fn dead_letters(stream_messages: u64, consumers_outstanding: u64) -> u64 {
    stream_messages.saturating_sub(consumers_outstanding)
}

/// Seconds since the oldest message a stream still holds was stored; 0 for an empty stream.
pub(crate) fn oldest_age_secs(
    messages: u64,
    first: time::OffsetDateTime,
    now: time::OffsetDateTime,
) -> f64 {
    if messages == 0 {
        return 0.0;
    }
    (now - first).as_seconds_f64().max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outstanding_counts_waiting_and_in_flight() {
        for (pending, ack_pending, want) in [(0, 0, 0), (3, 0, 3), (0, 4, 4), (2, 5, 7)] {
            assert_eq!(outstanding(pending, ack_pending), want);
        }
    }

    #[test]
    fn dead_letters_are_what_no_consumer_still_delivers() {
        for (messages, outstanding, want) in [(0, 0, 0), (5, 5, 0), (7, 4, 3), (2, 3, 0)] {
            assert_eq!(dead_letters(messages, outstanding), want);
        }
    }

    #[test]
    fn oldest_age_is_zero_for_an_empty_stream_and_never_negative() {
        let now = time::OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(100);
        let at = |s: i64| time::OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(s);
        for (messages, first, want) in [(0, at(10), 0.0), (2, at(40), 60.0), (1, at(130), 0.0)] {
            assert_eq!(oldest_age_secs(messages, first, now), want);
        }
    }
}
