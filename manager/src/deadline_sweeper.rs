//! The deadline sweeper: every replica runs one. It reads runs whose next deadline has passed
//! from `lg:deadlines` and applies a `Tick`; the record's compare-and-set makes exactly one
//! replica act, the others see the deadline already handled and do nothing.

use std::time::{Duration, Instant};

use loopgate_protocol::capabilities::DEFAULT_CAPABILITY_TTL_SECS;

use loopgate_common::decide::RunEvent;
use loopgate_protocol::subjects::Capability;
use loopgate_transport::runtime::{run_periodically, CapabilityBoard, FirstPass};
use tokio_util::sync::CancellationToken;

use crate::engine::{now_ms, Applied, Engine, EngineError};

pub struct DeadlineSweeper {
    pub engine: Engine,
    pub interval: Duration,
    pub batch: usize,
    /// The capabilities live executors announce: a start deadline passing while one serves
    /// the step's capability is queue wait, not a failed round. `None`: every passed start
    /// deadline is a miss.
    pub capabilities: Option<Serving>,
}

/// What the sweeper knows about live executors.
#[derive(Debug, Clone)]
pub struct Serving {
    pub board: CapabilityBoard,
    /// When the board began listening. For one heartbeat period (a third of the default TTL,
    /// plus a second) after that it may not have heard every live worker yet (a replica just
    /// started), so every capability counts as served.
    pub listening_since: Instant,
}

impl Serving {
    pub fn new(board: CapabilityBoard) -> Serving {
        Serving {
            board,
            listening_since: Instant::now(),
        }
    }

    fn serving(&self) -> Vec<Capability> {
        let warm_up = Duration::from_secs(DEFAULT_CAPABILITY_TTL_SECS / 3 + 1);
        let warming_up = self.listening_since.elapsed() < warm_up;
        [Capability::Cli, Capability::Gui]
            .into_iter()
            .filter(|c| warming_up || self.board.offers(*c, true))
            .collect()
    }
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
        let event = match &self.capabilities {
            Some(serving) => RunEvent::Sweep {
                serving: serving.serving(),
            },
            None => RunEvent::Tick,
        };
        let mut changed = 0;
        for run_id in due {
            match self.engine.apply(&run_id, &event).await {
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
