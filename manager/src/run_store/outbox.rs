//! The outbox's reads and writes: pending effects are stored by the transition's own script
//! (`CasWrite::effects`); these mark them published and let any replica claim old ones.

use super::{check_name, outbox_key, RunStore, StoreError, ADMISSION_LEASE_KEY, OUTBOX_KEY};

impl RunStore {
    /// The log's retention cut-off for a write at `now_ms` (0: none).
    pub(super) fn log_min_ms(&self, now_ms: i64) -> i64 {
        self.log_retention
            .map(|r| now_ms.saturating_sub(i64::try_from(r.as_millis()).unwrap_or(i64::MAX)))
            .filter(|cutoff| *cutoff > 0)
            .unwrap_or(0)
    }

    /// The effects `effect_ids` of run `id` were published: forget them (the run leaves
    /// `lg:outbox` once none is pending). Unknown ids are ignored.
    pub async fn mark_published(&self, id: &str, effect_ids: &[String]) -> Result<(), StoreError> {
        check_name("run id", id)?;
        if effect_ids.is_empty() {
            return Ok(());
        }
        let mut invocation = self.published_script.prepare_invoke();
        invocation.key(outbox_key(id)).key(OUTBOX_KEY).arg(id);
        for effect in effect_ids {
            invocation.arg(effect);
        }
        let mut conn = self.link.conn();
        let _: i64 = self
            .call(
                "mark_published",
                self.timeout,
                invocation.invoke_async(&mut conn),
            )
            .await?;
        Ok(())
    }

    /// Claim up to `batch` runs whose oldest pending effect was stored (or last claimed) at or
    /// before `cutoff_ms`; their score moves to `now_ms`, so another replica claims them again
    /// only once they are that old again. With replica acknowledgements the claim (a write)
    /// waits for the replicas too: that covers every write the primary took before it, so
    /// effects are republished only once their transitions (whoever wrote them) are on the
    /// replicas.
    pub async fn claim_pending(
        &self,
        cutoff_ms: i64,
        now_ms: i64,
        batch: usize,
    ) -> Result<Vec<String>, StoreError> {
        let mut invocation = self.claim_script.prepare_invoke();
        invocation
            .key(OUTBOX_KEY)
            .arg(cutoff_ms)
            .arg(now_ms)
            .arg(batch.max(1));
        let (claimed, acked): (Vec<String>, _) = self
            .write_script("claim_pending", &self.claim_script, &invocation)
            .await?;
        if !claimed.is_empty() {
            super::replicated("claim_pending", acked)?;
        }
        Ok(claimed)
    }

    /// The pending effects of run `id`: `(dedup id, stored effect json)`.
    pub async fn pending_effects(&self, id: &str) -> Result<Vec<(String, String)>, StoreError> {
        check_name("run id", id)?;
        let mut conn = self.link.conn();
        self.call(
            "pending_effects",
            self.timeout,
            redis::cmd("HGETALL")
                .arg(outbox_key(id))
                .query_async(&mut conn),
        )
        .await
    }

    /// How many runs have unpublished effects.
    pub async fn pending_runs(&self) -> Result<u64, StoreError> {
        let mut conn = self.link.conn();
        self.call(
            "pending_runs",
            self.timeout,
            redis::cmd("ZCARD").arg(OUTBOX_KEY).query_async(&mut conn),
        )
        .await
    }

    /// Take the admission pass's lease for `ttl` (false: another replica holds it).
    pub async fn take_admission_lease(&self, ttl: std::time::Duration) -> Result<bool, StoreError> {
        let mut conn = self.link.conn();
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let reply: Option<String> = self
            .call(
                "admission_lease",
                self.timeout,
                redis::cmd("SET")
                    .arg(ADMISSION_LEASE_KEY)
                    .arg(1)
                    .arg("NX")
                    .arg("PX")
                    .arg(ttl_ms)
                    .query_async(&mut conn),
            )
            .await?;
        Ok(reply.is_some())
    }

    /// Drop run `id` from `lg:outbox` (its effects expired with it).
    pub async fn forget_pending(&self, id: &str) -> Result<(), StoreError> {
        self.mark_published(id, &[String::new()]).await
    }
}
