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
//! transactional outbox (see `crate::outbox`).
//!
//! The log is bounded: each append trims it to about `log_max_entries`, and (on live runs)
//! drops entries older than the retention; a terminal run's keys expire after the retention.

mod outbox;
mod queries;
mod scripts;

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use self::scripts::{CAS_SCRIPT, CLAIM_SCRIPT, CREATE_SCRIPT, PUBLISHED_SCRIPT};

/// Refill rounds when listing prunes ids of expired runs.
const LIST_PRUNE_ROUNDS: usize = 8;
/// Extra time allowed past a blocking read's `block` before giving up.
const BLOCK_GRACE: Duration = Duration::from_secs(2);
/// Default cap on a run's log (entries; trimmed approximately, on append).
pub const DEFAULT_LOG_MAX_ENTRIES: u64 = 10_000;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("redis {op} failed: {source}")]
    Redis {
        op: &'static str,
        #[source]
        source: redis::RedisError,
    },
    #[error("redis {op} timed out after {after:?}")]
    Timeout { op: &'static str, after: Duration },
    #[error("invalid {what} '{value}': must be non-empty, without ':' or whitespace (states: not 'all')")]
    InvalidName { what: &'static str, value: String },
    #[error("unexpected reply to {op}: {detail}")]
    Protocol { op: &'static str, detail: String },
}

impl StoreError {
    /// Whether the same call may succeed later: Redis was unreachable, restarting or slow.
    pub fn is_retryable(&self) -> bool {
        match self {
            StoreError::Redis { source, .. } => {
                source.is_io_error()
                    || source.is_connection_refusal()
                    || source.is_connection_dropped()
                    || source.is_timeout()
                    || source.is_cluster_error()
                    || matches!(
                        source.kind(),
                        redis::ErrorKind::Server(redis::ServerErrorKind::BusyLoading)
                    )
            }
            StoreError::Timeout { .. } => true,
            StoreError::InvalidName { .. } | StoreError::Protocol { .. } => false,
        }
    }
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
    client: redis::Client,
    conn: ConnectionManager,
    timeout: Duration,
    create_script: redis::Script,
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
            .finish()
    }
}

pub(crate) async fn bounded<T>(
    op: &'static str,
    after: Duration,
    fut: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(after, fut).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(source)) => Err(StoreError::Redis { op, source }),
        Err(_) => Err(StoreError::Timeout { op, after }),
    }
}

impl RunStore {
    /// Connect to `url` (`redis://host:port/db`); `timeout` bounds connecting and every call.
    pub async fn connect(url: &str, timeout: Duration) -> Result<RunStore, StoreError> {
        let client =
            redis::Client::open(url).map_err(|source| StoreError::Redis { op: "open", source })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(3)
            .set_max_delay(Duration::from_secs(2));
        let conn = bounded(
            "connect",
            timeout.saturating_mul(2),
            ConnectionManager::new_with_config(client.clone(), config),
        )
        .await?;
        Ok(RunStore {
            client,
            conn,
            timeout,
            create_script: redis::Script::new(CREATE_SCRIPT),
            cas_script: redis::Script::new(CAS_SCRIPT),
            published_script: redis::Script::new(PUBLISHED_SCRIPT),
            claim_script: redis::Script::new(CLAIM_SCRIPT),
            log_max_entries: DEFAULT_LOG_MAX_ENTRIES,
            log_retention: None,
        })
    }

    /// Bound every run's log: about `max_entries` entries (at least 1), and on live runs none
    /// older than `retention` (the age after which terminal runs expire).
    pub fn with_log_limits(mut self, max_entries: u64, retention: Option<Duration>) -> RunStore {
        self.log_max_entries = max_entries.max(1);
        self.log_retention = retention;
        self
    }

    pub async fn ping(&self) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        let reply: String = bounded(
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
        let mut conn = self.conn.clone();
        let created: i64 =
            bounded("create", self.timeout, invocation.invoke_async(&mut conn)).await?;
        Ok(created == 1)
    }

    pub async fn load(&self, id: &str) -> Result<Option<Versioned>, StoreError> {
        check_name("run id", id)?;
        let mut conn = self.conn.clone();
        let (version, record): (Option<u64>, Option<String>) = bounded(
            "load",
            self.timeout,
            redis::cmd("HMGET")
                .arg(run_key(id))
                .arg("version")
                .arg("record")
                .query_async(&mut conn),
        )
        .await?;
        match (version, record) {
            (Some(version), Some(record)) => Ok(Some(Versioned { version, record })),
            (None, None) => Ok(None),
            _ => Err(StoreError::Protocol {
                op: "load",
                detail: format!("run {id} has a version or a record but not both"),
            }),
        }
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
        let mut conn = self.conn.clone();
        let (applied, version): (i64, u64) = bounded(
            "compare_and_set",
            self.timeout,
            invocation.invoke_async(&mut conn),
        )
        .await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_moves_into_tasks() {
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<RunStore>();
    }

    #[test]
    fn name_checks() {
        let cases = [
            ("r1", true),
            ("0190-abc_x.y", true),
            ("", false),
            ("a:b", false),
            ("a b", false),
            ("a\n", false),
        ];
        for (value, ok) in cases {
            assert_eq!(check_name("run id", value).is_ok(), ok, "{value:?}");
        }
        assert!(check_state("running").is_ok());
        assert!(check_state("all").is_err());
    }

    #[test]
    fn key_layout() {
        assert_eq!(run_key("r"), "lg:run:r");
        assert_eq!(log_key("r"), "lg:run:r:log");
        assert_eq!(evidence_key("r"), "lg:run:r:evidence");
        assert_eq!(reports_key("r"), "lg:run:r:reports");
        assert_eq!(state_index_key("running"), "lg:runs:running");
        assert_eq!(outbox_key("r"), "lg:run:r:outbox");
    }
}
