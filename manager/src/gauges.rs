//! Periodic gauges only the control plane can see: runs by state (Redis indexes) and work
//! waiting in each JetStream consumer (queue lag).

use std::time::Duration;

use loopgate_common::state::RunState;
use loopgate_common::subjects::{STREAM_AUDIT, STREAM_EXEC, STREAM_RESULTS};
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
    for (stream, consumer) in CONSUMERS {
        let info = tokio::time::timeout(Duration::from_secs(5), async {
            let mut s = js.get_stream(stream).await.ok()?;
            let _ = s.info().await.ok()?;
            s.consumer_info(consumer).await.ok().map(|c| c.num_pending)
        })
        .await;
        if let Ok(Some(pending)) = info {
            metrics.queue_pending.record(
                pending,
                &[
                    KeyValue::new("stream", stream),
                    KeyValue::new("consumer", consumer),
                ],
            );
        }
    }
    Ok(())
}
