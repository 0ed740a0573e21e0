//! Admission control (`[manager] max_active_runs`): new runs wait in `queued` (phase
//! `admission`) and are started first come, first served while fewer than the limit are
//! active. Active: `running`, plus `queued` runs already admitted (their first decision is
//! pending). Runs waiting for a person (`waiting_for_input`) hold no slot. One replica at a
//! time admits (a short Redis lease per pass), so the limit is not overshot by racing passes.

use std::time::Duration;

use loopgate_common::decide::RunEvent;
use loopgate_common::state::{Phase, RunState};
use loopgate_transport::runtime::{run_periodically, FirstPass};
use tokio_util::sync::CancellationToken;

use crate::engine::{now_ms, Applied, Engine, EngineError};

/// Queued runs read per pass.
const SCAN_LIMIT: usize = 10_000;

/// Pure: how many of `waiting` runs to admit with `active` runs of at most `max`.
pub(crate) fn slots_free(max: u64, active: u64) -> u64 {
    max.saturating_sub(active)
}

pub struct RunAdmission {
    pub engine: Engine,
    pub max_active: u64,
    pub every: Duration,
}

impl RunAdmission {
    pub async fn run(self, cancel: CancellationToken) {
        run_periodically("run admission", self.every, FirstPass::Now, cancel, || {
            self.admit_once()
        })
        .await
    }

    /// One pass; returns how many runs were admitted.
    pub async fn admit_once(&self) -> Result<usize, EngineError> {
        let store = self.engine.store();
        if !store.take_admission_lease(self.every).await? {
            return Ok(0);
        }
        let queued = store
            .list(Some(RunState::Queued.as_str()), 0, SCAN_LIMIT)
            .await?;
        let mut waiting = Vec::new();
        for id in &queued {
            if let Some((_, record)) = self.engine.load(id).await? {
                if record.phase == Phase::Admission {
                    waiting.push((record.created_at, record.id));
                }
            }
        }
        waiting.sort();
        let admitted_queued = (queued.len() - waiting.len()) as u64;
        let active = store.count(RunState::Running.as_str()).await? + admitted_queued;
        let free = slots_free(self.max_active, active);
        let now = now_ms();
        let metrics = self.engine.metrics();
        metrics.admission_waiting.record(waiting.len() as u64, &[]);
        metrics.admission_oldest_wait.record(
            waiting
                .first()
                .map(|(created, _)| (now - created).max(0) as f64 / 1000.0)
                .unwrap_or(0.0),
            &[],
        );
        let mut admitted = 0;
        for (_, id) in waiting.into_iter().take(free as usize) {
            match self.engine.apply(&id, &RunEvent::Admit).await {
                Ok(Applied::Changed(_)) => {
                    admitted += 1;
                    tracing::info!(run_id = id, "run admitted");
                }
                Ok(_) | Err(EngineError::NotFound(_)) => {}
                Err(e) => tracing::warn!(run_id = id, error = %e, "admission failed"),
            }
        }
        Ok(admitted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_slots() {
        for (max, active, free) in [(4, 0, 4), (4, 3, 1), (4, 4, 0), (4, 9, 0), (1, 0, 1)] {
            assert_eq!(slots_free(max, active), free, "{active} of {max}");
        }
    }
}
