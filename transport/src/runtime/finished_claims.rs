//! A step's claim read from outside the workers: the manager asks whether an episode it still
//! waits for has finished, and takes the result stored in its claim (a result message lost
//! between the worker and the manager is then not waited for until the step's deadline).

use async_nats::jetstream::kv;
use loopgate_protocol::wire::EpisodeRole;

use crate::bus::{with_timeout, Bus};
use crate::bus_error::{BusError, ClaimErrorKind};
use crate::runtime::claimed_episode::claim_role;
use crate::runtime::episode_claim::{claim_key, finished_result_of, StoredResult};

/// Read-only access to the `lg-episodes` bucket (cheap to clone once opened).
#[derive(Debug, Clone)]
pub struct FinishedClaims {
    bus: Bus,
    store: kv::Store,
}

impl FinishedClaims {
    /// Opens the bucket (the manager creates it with the topology).
    pub async fn open(bus: &Bus) -> Result<FinishedClaims, BusError> {
        let store = with_timeout(
            ClaimErrorKind::OpenBucket,
            bus.request_timeout(),
            bus.jetstream()
                .get_key_value(loopgate_protocol::subjects::EPISODE_BUCKET),
        )
        .await?;
        Ok(FinishedClaims {
            bus: bus.clone(),
            store,
        })
    }

    /// The result stored in the claim of `role`'s episode for `dispatch`, when that episode
    /// has finished; `None` while it runs, before it starts, or after it was released.
    pub async fn result(
        &self,
        role: EpisodeRole,
        dispatch: &str,
    ) -> Result<Option<StoredResult>, BusError> {
        let key = claim_key(claim_role(role), dispatch);
        let entry = with_timeout(
            ClaimErrorKind::Read,
            self.bus.request_timeout(),
            self.store.entry(key),
        )
        .await?;
        Ok(entry.as_ref().and_then(finished_result_of))
    }
}
