//! Results that never reached their run: every replica runs one pass every `every`. A run
//! that has waited `quiet_for` without a change for the one episode in flight (its executor
//! step or its audit) has that episode's claim read (`lg-episodes`): a claim that holds a
//! finished result means the worker published it and the run never applied it (a message
//! lost between them, or taken against a state that was not the run's). The stored result is
//! admitted exactly as one from the results stream (its subject, its id, a report's
//! signature) and applied; the record's compare-and-set makes exactly one replica act, and a
//! result that did arrive meanwhile makes this one a replay. Without this the run waited for
//! its step's deadline (the episode's whole time budget and a minute).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use loopgate_common::decide::{single_episode_in_flight, RunEvent};
use loopgate_common::state::{RunRecord, RunState};
use loopgate_protocol::report::signing::TrustedKeys;
use loopgate_protocol::wire::{decode, Message};
use loopgate_transport::runtime::{run_periodically, FinishedClaims, FirstPass, StoredResult};
use tokio_util::sync::CancellationToken;

use crate::admission::admit;
use crate::engine::{now_ms, Applied, Engine, EngineError};

/// How often a replica looks for overdue results, at most (half `[manager]
/// overdue_after_secs` when that is shorter). How long a run must wait without a change first
/// is that setting (default 30 s): a result normally reaches its run within a second of being
/// published, and a running episode's progress notices (at each of its turns) change the
/// record; a live episode found quiet costs one claim read.
pub const OVERDUE_EVERY: Duration = Duration::from_secs(15);
/// Runs looked at per pass, at most; the next pass goes on from where this one stopped, so a
/// larger index is covered over several passes.
const RUNS_PER_PASS: usize = 2000;

pub struct OverdueResults {
    pub engine: Engine,
    pub claims: FinishedClaims,
    /// Auditor keys a stored report must be signed by, as on the results stream.
    pub auditor_keys: TrustedKeys,
    pub every: Duration,
    pub quiet_for: Duration,
    /// Where in the index of running runs the next pass starts.
    pub next_offset: AtomicUsize,
}

impl OverdueResults {
    pub async fn run(self, cancel: CancellationToken) {
        let period = self.every;
        run_periodically(
            "overdue results",
            period,
            FirstPass::AfterPeriod,
            cancel,
            || self.pass_once(),
        )
        .await
    }

    /// One pass; returns how many runs took a result from a claim.
    pub async fn pass_once(&self) -> Result<usize, EngineError> {
        let offset = self.next_offset.load(Ordering::Relaxed);
        let ids = self
            .engine
            .store()
            .list(Some(RunState::Running.as_str()), offset, RUNS_PER_PASS)
            .await?;
        let next = if ids.len() < RUNS_PER_PASS {
            0
        } else {
            offset + ids.len()
        };
        self.next_offset.store(next, Ordering::Relaxed);
        let quiet_ms = i64::try_from(self.quiet_for.as_millis()).unwrap_or(i64::MAX);
        let now = now_ms();
        let mut taken = 0;
        // One run whose record cannot be decoded or whose transition is refused does not stop
        // the pass for the others; the pass fails (and says why) when none could be looked at.
        let (mut failed, mut first_error) = (0usize, None);
        let looked_at = ids.len();
        for id in ids {
            let outcome = match self.engine.load(&id).await {
                Ok(Some((_, record))) if now.saturating_sub(record.updated_at) >= quiet_ms => {
                    self.take_from_claim(&record).await
                }
                Ok(_) => Ok(false),
                Err(e) => Err(e),
            };
            match outcome {
                Ok(true) => taken += 1,
                Ok(false) => {}
                // Redis or NATS unreachable or slow: every other run would wait out the same
                // timeout, so the pass ends here and the next one starts again.
                Err(e @ (EngineError::Store(_) | EngineError::Bus(_))) => return Err(e),
                Err(e) => {
                    tracing::debug!(run_id = %id, error = %e, "overdue-result check failed for this run");
                    failed += 1;
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_error {
            if failed == looked_at {
                return Err(e);
            }
            tracing::warn!(failed, looked_at, error = %e, "overdue-result checks failed for some runs; the next pass tries them again");
        }
        Ok(taken)
    }

    /// Whether `record`'s episode in flight had finished with a result that is now applied.
    async fn take_from_claim(&self, record: &RunRecord) -> Result<bool, EngineError> {
        let Some((role, dispatch)) = single_episode_in_flight(record) else {
            return Ok(false);
        };
        let Some(stored) = self.claims.result(role, &dispatch).await? else {
            return Ok(false);
        };
        let Some(event) = self.admitted(record, &stored) else {
            return Ok(false);
        };
        let applied = self.engine.apply(&record.id, &event).await?;
        let outcome = match &applied {
            Applied::Changed(next) => format!("applied (round {})", next.round),
            Applied::Replayed => "a replay: it had been applied".to_string(),
            Applied::Ignored(why) => format!("ignored: {why}"),
        };
        tracing::warn!(run_id = %record.id, msg_id = %stored.msg_id, %outcome,
            "a finished episode's result had not reached its run: taken from its claim");
        Ok(matches!(applied, Applied::Changed(_)))
    }

    /// The stored result as an event, once admitted as the results stream admits a message;
    /// `None` (logged) when it is not one for this run.
    fn admitted(&self, record: &RunRecord, stored: &StoredResult) -> Option<RunEvent> {
        let refuse = |why: String| {
            tracing::warn!(run_id = %record.id, msg_id = %stored.msg_id, %why,
                "a claim's stored result was not taken");
            None
        };
        let bytes = match serde_json::to_vec(&stored.payload) {
            Ok(bytes) => bytes,
            Err(e) => return refuse(format!("unreadable: {e}")),
        };
        let message = match decode(&bytes) {
            Ok(message) => message,
            Err(e) => return refuse(format!("undecodable: {e}")),
        };
        let subjects = self.engine.bus().subjects();
        if let Err(why) = admit(
            subjects,
            &self.auditor_keys,
            &stored.subject,
            Some(&stored.msg_id),
            &message,
        ) {
            return refuse(format!("refused: {why}"));
        }
        if message.run_id() != record.id {
            return refuse(format!("a result for run {}", message.run_id()));
        }
        match message {
            Message::ExecResult(result) => Some(RunEvent::ExecFinished(result)),
            Message::AuditReport(report) => Some(RunEvent::AuditFinished(report)),
            other => refuse(format!("a {} is not a result", other.kind())),
        }
    }
}
