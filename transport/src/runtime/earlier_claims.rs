//! A restarted worker takes back the steps its killed process held before it takes new work.
//! Their deliveries come back `ack_wait` after the dead process's last keep-alive at the
//! latest, and JetStream hands a consumer its redeliveries before new messages. A worker that
//! pulled new work at once would be busy when they came back, and on a saturated stack the step
//! it held would wait for a free worker (the chaos run measured 11-29 s after a kill, against
//! 5-8 s with a free one). Waiting for them first bounds that take-over by `ack_wait` and the
//! claim's margin. The wait ends early for each step another worker takes over.

use std::collections::BTreeMap;
use std::time::Duration;

use async_nats::jetstream::kv;
use futures::StreamExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{seen, EpisodeClaims, Seen};
use crate::bus::with_timeout;
use crate::bus_error::{BoxedSource, BusError, ClaimErrorKind};

/// How often the claims an earlier process held are read again while the worker waits.
const RECHECK: Duration = Duration::from_millis(250);

impl EpisodeClaims {
    /// Before this worker takes new work: wait for the running claims an earlier process of the
    /// same worker left (killed, or frozen and replaced; this process has claimed nothing yet)
    /// until another worker has taken each over or its delivery is due again (`ack_wait` after
    /// its last heartbeat), when this worker's first pulls get it. Returns how many it waited
    /// for. Never fails: claims that cannot be read are not waited for.
    pub async fn wait_for_earlier_claims(&self, cancel: &CancellationToken) -> usize {
        let held = match self.earlier_claims().await {
            Ok(held) => held,
            Err(err) => {
                tracing::warn!(error = %err, "could not read the claims an earlier process of this worker held; taking work now");
                return 0;
            }
        };
        let count = held.len();
        if count == 0 {
            return 0;
        }
        // A delivery is due again `ack_wait` after its last keep-alive, which the claim's last
        // heartbeat stamps closely enough (by the server's clock): the claim that went silent
        // last decides. A worker's claims are all of its role, so one probe of the clock serves.
        let mut open: BTreeMap<String, u64> = held
            .iter()
            .map(|(key, entry)| (key.clone(), entry.revision))
            .collect();
        let due = match held.iter().max_by_key(|(_, entry)| entry.created) {
            Some((key, entry)) => self
                .ack_wait
                .saturating_sub(self.silent_for(key, entry).await),
            None => Duration::ZERO,
        };
        let deadline = Instant::now() + due;
        tracing::info!(
            steps = count,
            wait = ?due,
            "an earlier process of this worker held steps: taking them back before new work"
        );
        while !open.is_empty() {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                () = tokio::time::sleep(RECHECK.min(deadline - now)) => {}
            }
            let mut still = BTreeMap::new();
            for (key, revision) in open {
                match self.entry(&key).await {
                    // Taken over, finished, released or gone: no longer waited for.
                    Ok(Some(entry)) if entry.revision != revision => {}
                    Ok(None) => {}
                    Ok(Some(_)) | Err(_) => {
                        still.insert(key, revision);
                    }
                }
            }
            open = still;
        }
        tracing::info!(
            left = open.len(),
            "taking work (the steps still held are due again and come first)"
        );
        count
    }

    /// The running claims whose holder is an earlier process of this worker, by key.
    async fn earlier_claims(&self) -> Result<BTreeMap<String, kv::Entry>, BusError> {
        let store = self.store().await?;
        let prefix = format!("{}/", self.worker);
        with_timeout(ClaimErrorKind::Read, self.bus.request_timeout(), async {
            let mut held = BTreeMap::new();
            if store.status().await?.values() == 0 {
                return Ok::<_, BoxedSource>(held);
            }
            // The bucket keeps one revision per key: a watch from each key's last value gives
            // every current value, and `delta` 0 marks the last one.
            let mut watch = store.watch_with_history(">").await?;
            while let Some(entry) = watch.next().await {
                let entry = entry?;
                if let Seen::Running { holder } = seen(Some(&entry)) {
                    if holder.starts_with(&prefix) {
                        held.insert(entry.key.clone(), entry.clone());
                    }
                }
                if entry.delta == 0 {
                    break;
                }
            }
            Ok(held)
        })
        .await
    }
}
