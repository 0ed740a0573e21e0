//! Run state in Redis. Records are opaque JSON strings; every write is one Lua script so the
//! record, its version, the log, the evidence and the indexes change together or not at all.
//!
//! Keys: `lg:run:<id>` HASH {version, record}; `lg:run:<id>:log` STREAM (field `entry`);
//! `lg:run:<id>:evidence` HASH; `lg:run:<id>:reports` HASH (accepted audit reports as received,
//! signature included, by snapshot id: a completed run's certificate is the one of its final
//! snapshot); `lg:runs:<state>` SET; `lg:runs:all` ZSET by created-at millis;
//! `lg:deadlines` ZSET of run ids scored by their next deadline (unix millis), written in the
//! same script as the record so the two never disagree; `lg:run:<id>:outbox` HASH of the
//! transition effects not yet published (dedup id -> stored effect) and `lg:outbox` ZSET of
//! run ids with pending effects, scored by when the oldest was stored (or last claimed): the
//! transactional outbox (see `crate::outbox`); `lg:replica:barrier` a counter written only so
//! that `WAIT` has a write to wait behind ([`RunStore::replica_barrier`]).
//!
//! With `[redis] min_replicas_acked`, every write that stores effects (creation, transition,
//! the relay's claim) is followed by `WAIT` in its pipeline and is acknowledged only when
//! enough replicas hold it ([`StoreError::NotReplicated`] otherwise).
//!
//! The log is bounded: each append trims it to about `log_max_entries`, and (on live runs)
//! drops entries older than the retention; a terminal run's keys expire after the retention.

mod error;
mod link;
mod outbox;
mod queries;
mod scripts;

use std::time::Duration;

pub(crate) use self::error::bounded;
pub use self::error::StoreError;
use self::link::Link;
pub use self::link::RedisTarget;
use self::scripts::{CAS_SCRIPT, CLAIM_SCRIPT, CREATE_SCRIPT, DISCARD_SCRIPT, PUBLISHED_SCRIPT};

/// Refill rounds when listing prunes ids of expired runs.
const LIST_PRUNE_ROUNDS: usize = 8;
/// Extra time allowed past a blocking read's `block` before giving up.
const BLOCK_GRACE: Duration = Duration::from_secs(2);
/// Default cap on a run's log (entries; trimmed approximately, on append).
pub const DEFAULT_LOG_MAX_ENTRIES: u64 = 10_000;

/// How many replicas must hold a write before it is acknowledged, and how long to wait for
/// them (Redis `WAIT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaAcks {
    pub replicas: u64,
    pub timeout: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    pub version: u64,
    pub record: String,
}

/// One compare-and-set transition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CasWrite {
    pub expected_version: u64,
    pub record: String,
    /// Appended to `lg:run:<id>:log` in order.
    pub log_entries: Vec<String>,
    /// `(field, json)` pairs set in `lg:run:<id>:evidence`.
    pub evidence: Vec<(String, String)>,
    /// `(snapshot id, report json)` pairs set in `lg:run:<id>:reports`.
    pub reports: Vec<(String, String)>,
    /// Move the id from `lg:runs:<from>` to `lg:runs:<to>`.
    pub state_change: Option<(String, String)>,
    /// Expire all the run's keys after this long (terminal runs).
    pub expire_after: Option<Duration>,
    /// The run's next deadline (unix millis) in `lg:deadlines`; None removes it.
    pub deadline_ms: Option<i64>,
    /// `(dedup id, stored effect json)` pairs added to the run's pending effects (the
    /// outbox), published after the write and marked done with [`RunStore::mark_published`].
    pub effects: Vec<(String, String)>,
    /// When the transition was decided (unix millis): the pending effects' age, and the
    /// retention cut-off of the log.
    pub now_ms: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CasOutcome {
    Applied {
        new_version: u64,
    },
    /// The stored version differs; `current_version` is 0 when the run does not exist.
    Conflict {
        current_version: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    /// Redis stream id (`<millis>-<seq>`); pass as `after` to continue reading.
    pub id: String,
    pub entry: String,
}

pub fn run_key(id: &str) -> String {
    format!("lg:run:{id}")
}
pub fn log_key(id: &str) -> String {
    format!("lg:run:{id}:log")
}
pub fn evidence_key(id: &str) -> String {
    format!("lg:run:{id}:evidence")
}
pub fn reports_key(id: &str) -> String {
    format!("lg:run:{id}:reports")
}
pub fn state_index_key(state: &str) -> String {
    format!("lg:runs:{state}")
}
pub fn outbox_key(id: &str) -> String {
    format!("lg:run:{id}:outbox")
}
pub const ALL_RUNS_KEY: &str = "lg:runs:all";
/// Run ids with unpublished effects, scored by the age of the oldest (unix millis).
pub const OUTBOX_KEY: &str = "lg:outbox";
/// Held (with a TTL) by the replica running an admission pass.
pub const ADMISSION_LEASE_KEY: &str = "lg:admission:lease";
/// Run ids scored by their next deadline (unix millis).
pub const DEADLINES_KEY: &str = "lg:deadlines";
/// A counter [`RunStore::replica_barrier`] increments: a write for `WAIT` to wait behind.
pub const REPLICA_BARRIER_KEY: &str = "lg:replica:barrier";

/// Ids and states become key parts: refuse anything that could alias another key.
pub fn check_name(what: &'static str, value: &str) -> Result<(), StoreError> {
    if value.is_empty() || value.contains(':') || value.chars().any(char::is_whitespace) {
        return Err(StoreError::InvalidName {
            what,
            value: value.to_string(),
        });
    }
    Ok(())
}

/// A state name: a valid name that is not `all` (that key is the created-at index).
pub fn check_state(state: &str) -> Result<(), StoreError> {
    check_name("state", state)?;
    if state == "all" {
        return Err(StoreError::InvalidName {
            what: "state",
            value: state.to_string(),
        });
    }
    Ok(())
}

/// Handle on the run store. Cheap to clone; reconnects on its own.
#[derive(Clone)]
pub struct RunStore {
    link: Link,
    timeout: Duration,
    /// Transitions and creations wait for these replica acknowledgements (None: none).
    replica_acks: Option<ReplicaAcks>,
    create_script: redis::Script,
    discard_script: redis::Script,
    cas_script: redis::Script,
    published_script: redis::Script,
    claim_script: redis::Script,
    log_max_entries: u64,
    /// Live runs' log entries older than this are trimmed (None: only the entry cap).
    log_retention: Option<Duration>,
}

impl std::fmt::Debug for RunStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunStore")
            .field("timeout", &self.timeout)
            .field("replica_acks", &self.replica_acks)
            .finish()
    }
}

impl RunStore {
    /// Connect to `url` (`redis://host:port/db`); `timeout` bounds connecting and every call.
    pub async fn connect(url: &str, timeout: Duration) -> Result<RunStore, StoreError> {
        RunStore::connect_to(RedisTarget::Url(url.to_string()), timeout).await
    }

    /// Connect to `target`'s primary (with sentinels: the one they name, followed when it
    /// moves); `timeout` bounds connecting and every call.
    pub async fn connect_to(
        target: RedisTarget,
        timeout: Duration,
    ) -> Result<RunStore, StoreError> {
        let link = Link::connect(target, timeout).await?;
        Ok(RunStore {
            link,
            timeout,
            replica_acks: None,
            create_script: redis::Script::new(CREATE_SCRIPT),
            discard_script: redis::Script::new(DISCARD_SCRIPT),
            cas_script: redis::Script::new(CAS_SCRIPT),
            published_script: redis::Script::new(PUBLISHED_SCRIPT),
            claim_script: redis::Script::new(CLAIM_SCRIPT),
            log_max_entries: DEFAULT_LOG_MAX_ENTRIES,
            log_retention: None,
        })
    }

    /// Acknowledge a creation or transition only once `acks.replicas` replicas hold it
    /// (`WAIT` on the connection that wrote it, in the same pipeline); zero replicas: off.
    pub fn with_replica_acks(mut self, acks: Option<ReplicaAcks>) -> RunStore {
        self.replica_acks = acks.filter(|a| a.replicas > 0);
        self
    }

    /// [`bounded`], and on an error that may mean the primary moved, look for it again.
    pub(crate) async fn call<T>(
        &self,
        op: &'static str,
        after: Duration,
        fut: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, StoreError> {
        let result = bounded(op, after, fut).await;
        if let Err(err) = &result {
            self.link.after_error(err).await;
        }
        result
    }

    /// With replica acknowledgements: returns once the replicas hold every write the primary
    /// took before this call (a one-key write, then `WAIT`, in one pipeline: `WAIT` waits for
    /// the replication offset of this connection's last write, which is past all of them).
    /// Without: at once. For effects published again (a redelivered event's replay), whose
    /// transition may have been stored by a write that was not acknowledged.
    pub async fn replica_barrier(&self) -> Result<(), StoreError> {
        let Some(acks) = self.replica_acks else {
            return Ok(());
        };
        let wait_ms = u64::try_from(acks.timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let mut pipe = redis::pipe();
        pipe.cmd("INCR")
            .arg(REPLICA_BARRIER_KEY)
            .ignore()
            .cmd("WAIT")
            .arg(acks.replicas)
            .arg(wait_ms);
        let mut conn = self.link.conn();
        let (acked,): (u64,) = self
            .call(
                "replica_barrier",
                self.timeout + acks.timeout,
                pipe.query_async(&mut conn),
            )
            .await?;
        replicated("replica_barrier", Some((acked, acks.replicas)))
    }

    /// Run `invocation` of `script`; with replica acknowledgements, in one pipeline with
    /// `SCRIPT LOAD` and `WAIT`, so the wait covers this very write. The reply, and how many
    /// replicas acknowledged it (None when none are required).
    async fn write_script<T: redis::FromRedisValue>(
        &self,
        op: &'static str,
        script: &redis::Script,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> Result<(T, Option<(u64, u64)>), StoreError> {
        let mut conn = self.link.conn();
        let Some(acks) = self.replica_acks else {
            let reply = self
                .call(op, self.timeout, invocation.invoke_async(&mut conn))
                .await?;
            return Ok((reply, None));
        };
        let wait_ms = u64::try_from(acks.timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let mut pipe = redis::pipe();
        pipe.load_script(script)
            .ignore()
            .invoke_script(invocation)
            .cmd("WAIT")
            .arg(acks.replicas)
            .arg(wait_ms);
        let (reply, acked): (T, u64) = self
            .call(op, self.timeout + acks.timeout, pipe.query_async(&mut conn))
            .await?;
        Ok((reply, Some((acked, acks.replicas))))
    }

    /// Bound every run's log: about `max_entries` entries (at least 1), and on live runs none
    /// older than `retention` (the age after which terminal runs expire).
    pub fn with_log_limits(mut self, max_entries: u64, retention: Option<Duration>) -> RunStore {
        self.log_max_entries = max_entries.max(1);
        self.log_retention = retention;
        self
    }

    pub async fn ping(&self) -> Result<(), StoreError> {
        let mut conn = self.link.conn();
        let reply: String = self
            .call(
                "ping",
                self.timeout,
                redis::cmd("PING").query_async(&mut conn),
            )
            .await?;
        if reply == "PONG" {
            Ok(())
        } else {
            Err(StoreError::Protocol {
                op: "ping",
                detail: reply,
            })
        }
    }

    /// Create run `id` at version 1 in state `state`; false if it already exists.
    pub async fn create(
        &self,
        id: &str,
        record_json: &str,
        state: &str,
        created_ms: u64,
        deadline_ms: Option<i64>,
        first_log: Option<&str>,
    ) -> Result<bool, StoreError> {
        let log: Vec<String> = first_log.map(String::from).into_iter().collect();
        self.create_with_effects(id, record_json, state, created_ms, deadline_ms, &log, &[])
            .await
    }

    /// [`RunStore::create`] that also stores the first transition's pending effects, with its
    /// log entries in order.
    #[allow(clippy::too_many_arguments)]
    pub async fn create_with_effects(
        &self,
        id: &str,
        record_json: &str,
        state: &str,
        created_ms: u64,
        deadline_ms: Option<i64>,
        log: &[String],
        effects: &[(String, String)],
    ) -> Result<bool, StoreError> {
        check_name("run id", id)?;
        check_state(state)?;
        let mut invocation = self.create_script.prepare_invoke();
        invocation
            .key(run_key(id))
            .key(log_key(id))
            .key(state_index_key(state))
            .key(ALL_RUNS_KEY)
            .key(DEADLINES_KEY)
            .key(outbox_key(id))
            .key(OUTBOX_KEY)
            .arg(id)
            .arg(record_json)
            .arg(created_ms)
            .arg(deadline_ms.unwrap_or(-1))
            .arg(self.log_max_entries)
            .arg(effects.len());
        for (effect_id, effect) in effects {
            invocation.arg(effect_id).arg(effect);
        }
        for entry in log {
            invocation.arg(entry);
        }
        let (created, acked): (i64, _) = self
            .write_script("create", &self.create_script, &invocation)
            .await?;
        if created == 1 {
            replicated("create", acked)?;
        }
        Ok(created == 1)
    }

    /// Undo a creation whose write was refused (e.g. no replica acknowledged it in time) while
    /// nothing has acted on the run: `Ok(true)` once no trace of it is stored, replicas
    /// included as for any write; `Ok(false)` when it was acted on (the relay claimed its
    /// effects) and must stand.
    pub async fn discard_unstarted(
        &self,
        id: &str,
        state: &str,
        created_ms: u64,
    ) -> Result<bool, StoreError> {
        check_name("run id", id)?;
        check_state(state)?;
        let mut invocation = self.discard_script.prepare_invoke();
        invocation
            .key(run_key(id))
            .key(log_key(id))
            .key(state_index_key(state))
            .key(ALL_RUNS_KEY)
            .key(DEADLINES_KEY)
            .key(outbox_key(id))
            .key(OUTBOX_KEY)
            .arg(id)
            .arg(created_ms);
        let (outcome, acked): (i64, _) = self
            .write_script("discard", &self.discard_script, &invocation)
            .await?;
        if outcome == 1 {
            replicated("discard", acked)?;
        }
        Ok(outcome != 0)
    }

    /// The run's record and version, read from the primary only. `ROLE` goes in the same
    /// pipeline: a replica's answer, present or absent, may be old (an old primary restarted
    /// as a replica serves the dump of its last sync until it syncs again, or nothing).
    pub async fn load(&self, id: &str) -> Result<Option<Versioned>, StoreError> {
        check_name("run id", id)?;
        let mut conn = self.link.conn();
        let (role, (version, record)): (Vec<redis::Value>, (Option<u64>, Option<String>)) = self
            .call(
                "load",
                self.timeout,
                redis::pipe()
                    .cmd("ROLE")
                    .cmd("HMGET")
                    .arg(run_key(id))
                    .arg("version")
                    .arg("record")
                    .query_async(&mut conn),
            )
            .await?;
        self.refuse_unless_primary("load", &role).await?;
        match (version, record) {
            (Some(version), Some(record)) => Ok(Some(Versioned { version, record })),
            (None, None) => Ok(None),
            _ => Err(StoreError::Protocol {
                op: "load",
                detail: format!("run {id} has a version or a record but not both"),
            }),
        }
    }

    /// `NotPrimary` (retryable; with sentinels the store asks them again) unless the `ROLE`
    /// reply names a master.
    async fn refuse_unless_primary(
        &self,
        op: &'static str,
        role: &[redis::Value],
    ) -> Result<(), StoreError> {
        let role = link::role_name(role);
        if role.as_deref() == Some("master") {
            return Ok(());
        }
        let err = StoreError::NotPrimary {
            op,
            role: role.unwrap_or_else(|| "node of unknown role".into()),
        };
        self.link.after_error(&err).await;
        Err(err)
    }

    /// Atomically apply `write` if the stored version equals `write.expected_version`.
    pub async fn compare_and_set(
        &self,
        id: &str,
        write: CasWrite,
    ) -> Result<CasOutcome, StoreError> {
        check_name("run id", id)?;
        let mut invocation = self.cas_script.prepare_invoke();
        invocation
            .key(run_key(id))
            .key(log_key(id))
            .key(evidence_key(id))
            .key(DEADLINES_KEY)
            .key(reports_key(id))
            .key(outbox_key(id))
            .key(OUTBOX_KEY);
        if let Some((from, to)) = &write.state_change {
            check_state(from)?;
            check_state(to)?;
            invocation
                .key(state_index_key(from))
                .key(state_index_key(to));
        }
        let expire_ms = write
            .expire_after
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1))
            .unwrap_or(0);
        invocation
            .arg(write.expected_version)
            .arg(&write.record)
            .arg(id)
            .arg(expire_ms)
            .arg(write.log_entries.len())
            .arg(write.evidence.len())
            .arg(write.deadline_ms.unwrap_or(-1))
            .arg(write.reports.len())
            .arg(write.now_ms)
            .arg(self.log_min_ms(write.now_ms))
            .arg(self.log_max_entries)
            .arg(write.effects.len());
        for entry in &write.log_entries {
            invocation.arg(entry);
        }
        for (field, value) in &write.evidence {
            invocation.arg(field).arg(value);
        }
        for (snapshot, value) in &write.reports {
            invocation.arg(snapshot).arg(value);
        }
        for (effect_id, effect) in &write.effects {
            invocation.arg(effect_id).arg(effect);
        }
        let ((applied, version), acked): ((i64, u64), _) = self
            .write_script("compare_and_set", &self.cas_script, &invocation)
            .await?;
        if applied == 1 {
            replicated("compare_and_set", acked)?;
        }
        Ok(if applied == 1 {
            CasOutcome::Applied {
                new_version: version,
            }
        } else {
            CasOutcome::Conflict {
                current_version: version,
            }
        })
    }
}

/// A write stored on the primary is acknowledged only when enough replicas hold it.
fn replicated(op: &'static str, acked: Option<(u64, u64)>) -> Result<(), StoreError> {
    match acked {
        Some((acked, wanted)) if acked < wanted => {
            Err(StoreError::NotReplicated { op, acked, wanted })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
