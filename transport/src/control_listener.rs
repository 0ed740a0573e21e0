//! Listening for control notices on `<prefix>.control.>` (core NATS), shared by the workers.

use futures::StreamExt;
use loopgate_common::wire::{decode, CancelEpisodes, Message};
use tokio_util::sync::CancellationToken;

use crate::Subscriber;

/// Apply every `CancelEpisodes` notice from `notices` with `on_cancel` (which returns how many
/// in-flight episodes it stopped) until `stop` fires or the subscription ends.
pub async fn listen_for_cancels(
    mut notices: Subscriber,
    stop: CancellationToken,
    on_cancel: impl Fn(&CancelEpisodes) -> usize,
) {
    loop {
        let notice = tokio::select! {
            () = stop.cancelled() => break,
            notice = notices.next() => notice,
        };
        let Some(notice) = notice else {
            tracing::warn!("control subscription ended");
            break;
        };
        match decode(&notice.payload) {
            Ok(Message::CancelEpisodes(notice)) => {
                let stopped = on_cancel(&notice);
                tracing::info!(
                    run_id = %notice.run_id,
                    generation = notice.generation,
                    reason = %notice.reason,
                    stopped,
                    "cancel notice"
                );
            }
            Ok(other) => tracing::debug!(kind = other.kind(), "ignoring control message"),
            Err(err) => tracing::warn!(error = %err, "undecodable control message"),
        }
    }
    let _ = notices.unsubscribe().await;
}
