//! The deadline sweeper: every replica runs one. It reads runs whose next deadline has passed
//! from `lg:deadlines` and applies a `Tick`; the record's compare-and-set makes exactly one
//! replica act, the others see the deadline already handled and do nothing.

use std::time::Duration;

use loopgate_common::decide::RunEvent;
use loopgate_transport::runtime::{run_periodically, FirstPass};
use tokio_util::sync::CancellationToken;

use crate::engine::{now_ms, Applied, Engine, EngineError};

pub struct DeadlineSweeper {
    pub engine: Engine,
    pub interval: Duration,
    pub batch: usize,
}

impl DeadlineSweeper {
    pub async fn run(self, cancel: CancellationToken) {
        let period = self.interval;
        run_periodically(
            "deadline sweep",
            period,
            FirstPass::AfterPeriod,
            cancel,
            || self.sweep_once(),
        )
        .await
    }

    /// One pass; returns how many runs changed.
    pub async fn sweep_once(&self) -> Result<usize, EngineError> {
        let due = self
            .engine
            .store()
            .due_deadlines(now_ms(), self.batch)
            .await?;
        let mut changed = 0;
        for run_id in due {
            match self.engine.apply(&run_id, &RunEvent::Tick).await {
                Ok(Applied::Changed(record)) => {
                    changed += 1;
                    tracing::info!(run_id, state = record.state.as_str(), "deadline handled");
                }
                Ok(_) => {}
                Err(EngineError::NotFound(_)) | Err(EngineError::Corrupt { .. }) => {
                    // The run expired or is unreadable: nothing will ever clear its deadline.
                    self.engine.store().clear_deadline(&run_id).await?;
                }
                Err(e) => tracing::warn!(run_id, error = %e, "deadline tick failed"),
            }
        }
        Ok(changed)
    }
}
