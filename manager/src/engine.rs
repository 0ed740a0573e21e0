//! The run engine: load -> pure `decide` -> compare-and-set in Redis (the record and its
//! effects, the outbox) -> publish the effects -> mark them published. Holds no run state in
//! memory, so any replica can apply any event; effects left unpublished (a failed publish, a
//! replica that stopped) are published by any replica's `OutboxRelay`.

use std::time::Duration;

use crate::admission::record_distrust;
use crate::effects::stored_effects;
use crate::run_store::{CasOutcome, CasWrite, RunStore, StoreError};
use loopgate_common::decide::{decide, start_run_with, Decision, RunEvent, Step};
use loopgate_common::state::LogEvent;
use loopgate_common::state::{
    InconsistentRecord, MsgIdSecret, Outgoing, RepoOrigin, RunRecord, Target,
};
use loopgate_common::task::Task;
use loopgate_protocol::subjects::Subjects;
use loopgate_protocol::wire::Envelope;
use loopgate_telemetry::metrics::Metrics;
use loopgate_telemetry::otel::{current_traceparent, TRACEPARENT};
use loopgate_transport::{Bus, BusError, PublishError, PublishErrorKind};
use opentelemetry::KeyValue;

/// CAS retries before giving up (the caller naks and the event is redelivered).
const MAX_CAS_ATTEMPTS: u32 = 25;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Bus(#[from] BusError),
    #[error("run record {id} is unreadable: {reason}")]
    Corrupt { id: String, reason: String },
    /// A transition (or a new run) whose record would disagree with itself; nothing was
    /// stored.
    #[error("refused to store an inconsistent record: {source}")]
    Inconsistent {
        id: String,
        #[source]
        source: InconsistentRecord,
    },
    #[error("run {0} does not exist")]
    NotFound(String),
    #[error("run {0} already exists")]
    Exists(String),
    #[error("run {id}: gave up after {attempts} compare-and-set conflicts")]
    Contention { id: String, attempts: u32 },
    /// Creating a run failed after its write may have landed, and it could not be undone: the
    /// run may be stored and may still start.
    #[error("run {id} may have been stored and may still start (GET /v1/runs/{id} before submitting again): {source}")]
    MaybeStored {
        id: String,
        #[source]
        source: StoreError,
    },
}

/// What applying an event did.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    Changed(Box<RunRecord>),
    Replayed,
    Ignored(String),
}

#[derive(Clone)]
pub struct Engine {
    bus: Bus,
    store: RunStore,
    subjects: Subjects,
    retention: Duration,
    metrics: Metrics,
    /// New runs wait for admission (`[manager] max_active_runs` is set).
    admission: bool,
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Engine {
    pub fn new(bus: Bus, store: RunStore, retention: Duration, metrics: Metrics) -> Engine {
        let subjects = bus.subjects().clone();
        Engine {
            bus,
            store,
            subjects,
            retention,
            metrics,
            admission: false,
        }
    }

    /// New runs wait in `queued` until `RunAdmission` admits them.
    pub fn with_admission(mut self, admission: bool) -> Engine {
        self.admission = admission;
        self
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn bus(&self) -> &Bus {
        &self.bus
    }

    pub fn store(&self) -> &RunStore {
        &self.store
    }

    /// The whole run log, oldest first (paged reads of the Redis stream).
    pub async fn full_log(
        &self,
        id: &str,
    ) -> Result<Vec<crate::run_store::LogRecord>, EngineError> {
        let mut records = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let batch = self.store.read_log(id, after.as_deref(), 500, None).await?;
            let Some(last) = batch.last() else { break };
            after = Some(last.id.clone());
            records.extend(batch);
        }
        Ok(records)
    }

    pub async fn load(&self, id: &str) -> Result<Option<(u64, RunRecord)>, EngineError> {
        let Some(v) = self.store.load(id).await? else {
            return Ok(None);
        };
        Ok(Some((v.version, decode_record(id, &v.record)?)))
    }

    /// Store a new run with its log entries and publish its first step.
    pub async fn create_run(
        &self,
        id: &str,
        task: Task,
        base_snapshot: &str,
        origin: Option<RepoOrigin>,
    ) -> Result<RunRecord, EngineError> {
        let mut step = start_run_with(
            id,
            task,
            base_snapshot,
            now_ms(),
            self.admission,
            fresh_msg_id_secret(),
        );
        // The caller's span (`invoke_workflow loopgate`) is the run's root.
        step.record.trace_parent = current_traceparent();
        step.record.origin = origin;
        step.record
            .check_consistency()
            .map_err(|source| refused(id, source))?;
        let record_json = to_json(&step.record);
        let log: Vec<String> = step.log.iter().map(to_json).collect();
        let effects = stored_effects(step.outgoing(), step.record.trace_parent.as_deref());
        let created_ms = step.record.created_at.max(0) as u64;
        let state = step.record.state.as_str();
        let created = match self
            .store
            .create_with_effects(
                id,
                &record_json,
                state,
                created_ms,
                step.record.next_deadline_ms(),
                &log,
                &effects,
            )
            .await
        {
            Ok(created) => created,
            Err(err) => return Err(self.undo_refused_create(id, state, created_ms, err).await),
        };
        if !created {
            return Err(EngineError::Exists(id.to_string()));
        }
        self.publish_effects(
            &step.record.id,
            step.record.trace_parent.as_deref(),
            step.outgoing(),
        )
        .await;
        self.publish_events(&step).await;
        Ok(step.record)
    }

    /// A creation refused after its write may have landed (a timeout, too few replicas): undo
    /// it while nothing has acted on it, so a refused `POST /v1/runs` leaves no run behind.
    /// When that cannot be done the answer says the run may be stored.
    async fn undo_refused_create(
        &self,
        id: &str,
        state: &str,
        created_ms: u64,
        err: StoreError,
    ) -> EngineError {
        if !err.is_retryable() {
            return EngineError::Store(err);
        }
        match self.store.discard_unstarted(id, state, created_ms).await {
            Ok(true) => {
                tracing::warn!(run_id = id, error = %err, "creating the run was refused; undone");
                EngineError::Store(err)
            }
            Ok(false) => {
                tracing::warn!(run_id = id, error = %err, "creating the run was refused but the run was acted on; it stands");
                EngineError::MaybeStored {
                    id: id.to_string(),
                    source: err,
                }
            }
            Err(undo) => {
                tracing::warn!(run_id = id, error = %err, undo = %undo, "creating the run was refused and could not be undone");
                EngineError::MaybeStored {
                    id: id.to_string(),
                    source: err,
                }
            }
        }
    }

    /// Apply one event with optimistic concurrency; retries on CAS conflicts.
    pub async fn apply(&self, id: &str, event: &RunEvent) -> Result<Applied, EngineError> {
        for attempt in 1..=MAX_CAS_ATTEMPTS {
            let Some((version, mut record)) = self.load(id).await? else {
                return Err(EngineError::NotFound(id.to_string()));
            };
            if record.msg_id_secret.is_empty() {
                // A record stored before run secrets existed: it gets one with its next
                // transition (stored in the same compare-and-set).
                record.msg_id_secret = fresh_msg_id_secret();
            }
            match decide(&record, event, now_ms()) {
                Decision::Ignore(reason) => {
                    if drops_work_when_ignored(event) {
                        // An ignored result is acked and gone: judge it only against a state
                        // the replicas hold too. A primary cut off from its replicas (an old
                        // one the sentinels have not yet demoted) may hold an older state than
                        // the promoted one; its barrier fails and the result comes again.
                        self.store.replica_barrier().await?;
                    }
                    tracing::debug!(run_id = id, %reason, "event ignored");
                    return Ok(Applied::Ignored(reason));
                }
                Decision::Distrusted(why) => {
                    record_distrust(&self.metrics, id, &why);
                    return Ok(Applied::Ignored(why.detail));
                }
                Decision::Replay(outbox) => {
                    // The first delivery's write may not have been acknowledged by the
                    // replicas (that is why this one came): publish only once it is.
                    self.store.replica_barrier().await?;
                    tracing::info!(
                        run_id = id,
                        messages = outbox.len(),
                        "event redelivered; republishing outbox"
                    );
                    let published = self
                        .publish_effects(id, record.trace_parent.as_deref(), &outbox)
                        .await;
                    if published.len() < outbox.len() {
                        // Still stored as pending unless published before: the relay has them.
                        return Err(EngineError::Bus(BusError::Publish {
                            subject: self.subjects.results_all(),
                            source: PublishError::new(
                                PublishErrorKind::Send,
                                "a replayed effect could not be published",
                            ),
                        }));
                    }
                    return Ok(Applied::Replayed);
                }
                Decision::Refused(source) => return Err(refused(id, source)),
                Decision::Apply(step) => {
                    let write = self.cas_write(version, &step);
                    match self.store.compare_and_set(id, write).await? {
                        CasOutcome::Applied { .. } => {
                            // Stored with the record: a failed publish stays pending and the
                            // relay publishes it, so the transition itself has succeeded.
                            self.publish_effects(
                                id,
                                step.record.trace_parent.as_deref(),
                                step.outgoing(),
                            )
                            .await;
                            self.publish_events(&step).await;
                            self.count(&step);
                            if step.previous_state != step.record.state {
                                tracing::info!(
                                    run_id = id,
                                    from = step.previous_state.as_str(),
                                    to = step.record.state.as_str(),
                                    round = step.record.round,
                                    "run state changed"
                                );
                            }
                            return Ok(Applied::Changed(Box::new(step.record)));
                        }
                        CasOutcome::Conflict { .. } => {
                            let backoff = Duration::from_millis(u64::from(attempt.min(10)) * 3);
                            tokio::time::sleep(backoff).await;
                        }
                    }
                }
            }
        }
        Err(EngineError::Contention {
            id: id.to_string(),
            attempts: MAX_CAS_ATTEMPTS,
        })
    }

    fn cas_write(&self, version: u64, step: &Step) -> CasWrite {
        let state_change = (step.previous_state != step.record.state).then(|| {
            (
                step.previous_state.as_str().to_string(),
                step.record.state.as_str().to_string(),
            )
        });
        CasWrite {
            expected_version: version,
            record: to_json(&step.record),
            log_entries: step.log.iter().map(to_json).collect(),
            evidence: step
                .evidence
                .iter()
                .map(|e| (format!("{}:{}", e.artifact_version, e.check_id), to_json(e)))
                .collect(),
            reports: step
                .audit_report
                .iter()
                .map(|r| (r.snapshot.clone(), to_json(r)))
                .collect(),
            state_change,
            expire_after: step.record.state.is_terminal().then_some(self.retention),
            deadline_ms: step.record.next_deadline_ms(),
            effects: stored_effects(step.outgoing(), step.record.trace_parent.as_deref()),
            now_ms: step.record.updated_at,
        }
    }

    /// Metrics from the transition's log entries (stored, so counted once).
    fn count(&self, step: &Step) {
        for entry in &step.log {
            match &entry.event {
                LogEvent::Decision { route, .. } => self.metrics.rounds.add(
                    1,
                    &[
                        KeyValue::new("route", route.as_str()),
                        KeyValue::new("outcome", "decided"),
                    ],
                ),
                LogEvent::AuditReport { verdicts, .. } => self.metrics.audit_verdicts.add(
                    1,
                    &[
                        KeyValue::new("status", format!("{:?}", verdicts.status).to_lowercase()),
                        KeyValue::new(
                            "integrity",
                            format!("{:?}", verdicts.integrity).to_lowercase(),
                        ),
                        KeyValue::new(
                            "contract",
                            format!("{:?}", verdicts.contract).to_lowercase(),
                        ),
                    ],
                ),
                LogEvent::Gate { passed, .. } => {
                    let result = if *passed { "passed" } else { "closed" };
                    self.metrics.gate.add(1, &[KeyValue::new("result", result)]);
                    self.metrics.rounds.add(
                        1,
                        &[
                            KeyValue::new("route", "cli"),
                            KeyValue::new("outcome", result),
                        ],
                    );
                }
                LogEvent::DoneRefused { .. } => self
                    .metrics
                    .gate
                    .add(1, &[KeyValue::new("result", "refused")]),
                LogEvent::EpisodeStarted {
                    queued_ms: Some(ms),
                    ..
                } => self.metrics.queue_wait.record(*ms as f64 / 1000.0, &[]),
                LogEvent::QueueWait { capability, .. } => self
                    .metrics
                    .queue_waits
                    .add(1, &[KeyValue::new("capability", capability.as_str())]),
                _ => {}
            }
        }
    }

    /// Publish `outgoing` (effects stored as pending) and mark each one published once it is;
    /// returns the dedup ids published. What fails stays pending for the outbox relay.
    pub(crate) async fn publish_effects(
        &self,
        run_id: &str,
        run_trace: Option<&str>,
        outgoing: &[Outgoing],
    ) -> Vec<String> {
        // Workers' spans join the current span when there is one, else the run's root.
        let traceparent = current_traceparent().or_else(|| run_trace.map(str::to_string));
        let headers: Vec<(&str, &str)> = traceparent
            .as_deref()
            .map(|tp| vec![(TRACEPARENT, tp)])
            .unwrap_or_default();
        let mut published = Vec::new();
        for out in outgoing {
            let result = match out.target {
                Target::Exec { capability } => {
                    self.publish_durable(&self.subjects.exec(capability), out, &headers)
                        .await
                }
                Target::Audit => {
                    self.publish_durable(&self.subjects.audit_request(), out, &headers)
                        .await
                }
                Target::Decide => {
                    self.publish_durable(&self.subjects.decide(run_id), out, &headers)
                        .await
                }
                // Core NATS: only episodes running right now need to hear it; their late
                // results are ignored by generation and phase anyway.
                Target::Control => {
                    self.bus
                        .publish_core_json(
                            &self.subjects.control(run_id),
                            &Envelope::new(&out.message),
                        )
                        .await
                }
            };
            match result {
                Ok(()) => published.push(out.msg_id.clone()),
                Err(e) => tracing::warn!(
                    run_id,
                    effect = out.msg_id,
                    error = %e,
                    "effect not published; left pending for the outbox relay"
                ),
            }
        }
        if let Err(e) = self.store.mark_published(run_id, &published).await {
            // Published but still marked pending: the relay publishes them again (deduped).
            tracing::warn!(run_id, error = %e, "published effects not marked done");
        }
        published
    }

    async fn publish_durable(
        &self,
        subject: &str,
        out: &Outgoing,
        headers: &[(&str, &str)],
    ) -> Result<(), BusError> {
        self.bus
            .publish_json(subject, &Envelope::new(&out.message), &out.msg_id, headers)
            .await
    }

    /// Best-effort: watchers on NATS get each log entry; the Redis log is the source of truth.
    async fn publish_events(&self, step: &Step) {
        let subject = self.subjects.events(&step.record.id);
        for entry in &step.log {
            if let Err(e) = self.bus.publish_core_json(&subject, entry).await {
                tracing::debug!(error = %e, "event publish failed");
            }
        }
    }
}

/// A fresh secret for a run's results-stream dedup ids (`MsgIdSecret`): 244 random bits from
/// the OS (two v4 UUIDs), never sent to a worker.
fn fresh_msg_id_secret() -> MsgIdSecret {
    MsgIdSecret::new(format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    ))
}

/// A stored record, any schema this build reads; anything else (a newer schema included) is
/// [`EngineError::Corrupt`].
fn decode_record(id: &str, json: &str) -> Result<RunRecord, EngineError> {
    RunRecord::from_json(json).map_err(|e| EngineError::Corrupt {
        id: id.to_string(),
        reason: e.to_string(),
    })
}

/// Logged here, where it is refused: it is a bug in `decide` (or a stored record that already
/// disagreed), never something to retry into the store.
fn refused(id: &str, source: InconsistentRecord) -> EngineError {
    tracing::error!(run_id = id, error = %source, "transition refused: the record would be inconsistent");
    EngineError::Inconsistent {
        id: id.to_string(),
        source,
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// Whether ignoring `event` drops work that no one sends again: an episode's result or an
/// audit's report (a progress notice or a steering call is followed or answered anyway).
fn drops_work_when_ignored(event: &RunEvent) -> bool {
    matches!(
        event,
        RunEvent::ExecFinished(_) | RunEvent::AuditFinished(_)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str =
        include_str!("../../common/tests/fixtures/run_record/running_deciding_streaks.json");

    #[test]
    fn records_decode_or_are_corrupt() {
        let newer = OLD.replacen('{', "{\"schema\": 2,", 1);
        struct Case {
            name: &'static str,
            json: String,
            corrupt: Option<&'static str>,
        }
        let cases = [
            Case {
                name: "a record stored before `schema` existed",
                json: OLD.to_string(),
                corrupt: None,
            },
            Case {
                name: "a newer schema",
                json: newer,
                corrupt: Some("schema 2 is newer than this build reads"),
            },
            Case {
                name: "not a record",
                json: "{\"id\": 7}".to_string(),
                corrupt: Some("is not valid"),
            },
        ];
        for case in cases {
            match (decode_record("r1", &case.json), case.corrupt) {
                (Ok(record), None) => assert_eq!(record.schema, 1, "{}", case.name),
                (Err(EngineError::Corrupt { id, reason }), Some(want)) => {
                    assert_eq!(id, "r1");
                    assert!(reason.contains(want), "{}: {reason}", case.name);
                }
                (other, _) => panic!("{}: {other:?}", case.name),
            }
        }
    }
}
