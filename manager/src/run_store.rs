//! Run state in Redis. Records are opaque JSON strings; every write is one Lua script so the
//! record, its version, the log, the evidence and the indexes change together or not at all.
//!
//! Keys: `lg:run:<id>` HASH {version, record}; `lg:run:<id>:log` STREAM (field `entry`);
//! `lg:run:<id>:evidence` HASH; `lg:runs:<state>` SET; `lg:runs:all` ZSET by created-at millis;
//! `lg:deadlines` ZSET of run ids scored by their next deadline (unix millis), written in the
//! same script as the record so the two never disagree.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::streams::{StreamId, StreamRangeReply, StreamReadReply};
use redis::AsyncCommands;

const CREATE_SCRIPT: &str = r#"
-- KEYS: run, log, state index, all index, deadlines.
-- ARGV: id, record, created_ms, deadline ms (-1 = none)[, first log entry]
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'version', 1, 'record', ARGV[2])
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[1])
if tonumber(ARGV[4]) >= 0 then redis.call('ZADD', KEYS[5], ARGV[4], ARGV[1]) end
if #ARGV >= 5 then redis.call('XADD', KEYS[2], '*', 'entry', ARGV[5]) end
return 1
"#;

const CAS_SCRIPT: &str = r#"
-- KEYS: run, log, evidence, deadlines[, from index, to index]
-- ARGV: expected version, record, id, expire ms (0 = none), n log entries, n evidence pairs,
--       deadline ms (-1 = none), log entries..., evidence field, value...
local current = redis.call('HGET', KEYS[1], 'version')
if not current then return {0, 0} end
current = tonumber(current)
if current ~= tonumber(ARGV[1]) then return {0, current} end
local new_version = current + 1
redis.call('HSET', KEYS[1], 'version', new_version, 'record', ARGV[2])
local n_log = tonumber(ARGV[5])
local n_evidence = tonumber(ARGV[6])
if tonumber(ARGV[7]) >= 0 then
  redis.call('ZADD', KEYS[4], ARGV[7], ARGV[3])
else
  redis.call('ZREM', KEYS[4], ARGV[3])
end
local i = 8
for _ = 1, n_log do
  redis.call('XADD', KEYS[2], '*', 'entry', ARGV[i])
  i = i + 1
end
for _ = 1, n_evidence do
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
  i = i + 2
end
if #KEYS >= 6 then
  redis.call('SREM', KEYS[5], ARGV[3])
  redis.call('SADD', KEYS[6], ARGV[3])
end
local expire_ms = tonumber(ARGV[4])
if expire_ms > 0 then
  for k = 1, 3 do
    if redis.call('EXISTS', KEYS[k]) == 1 then redis.call('PEXPIRE', KEYS[k], expire_ms) end
  end
end
return {1, new_version}
"#;

/// Refill rounds when listing prunes ids of expired runs.
const LIST_PRUNE_ROUNDS: usize = 8;
/// Extra time allowed past a blocking read's `block` before giving up.
const BLOCK_GRACE: Duration = Duration::from_secs(2);

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
    /// Move the id from `lg:runs:<from>` to `lg:runs:<to>`.
    pub state_change: Option<(String, String)>,
    /// Expire all the run's keys after this long (terminal runs).
    pub expire_after: Option<Duration>,
    /// The run's next deadline (unix millis) in `lg:deadlines`; None removes it.
    pub deadline_ms: Option<i64>,
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
pub fn state_index_key(state: &str) -> String {
    format!("lg:runs:{state}")
}
pub const ALL_RUNS_KEY: &str = "lg:runs:all";
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
}

impl std::fmt::Debug for RunStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunStore")
            .field("timeout", &self.timeout)
            .finish()
    }
}

async fn bounded<T>(
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

fn to_log_record(op: &'static str, item: StreamId) -> Result<LogRecord, StoreError> {
    let entry = item
        .get::<String>("entry")
        .ok_or_else(|| StoreError::Protocol {
            op,
            detail: format!("log entry {} has no 'entry' field", item.id),
        })?;
    Ok(LogRecord { id: item.id, entry })
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
        })
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
        check_name("run id", id)?;
        check_state(state)?;
        let mut invocation = self.create_script.prepare_invoke();
        invocation
            .key(run_key(id))
            .key(log_key(id))
            .key(state_index_key(state))
            .key(ALL_RUNS_KEY)
            .key(DEADLINES_KEY)
            .arg(id)
            .arg(record_json)
            .arg(created_ms)
            .arg(deadline_ms.unwrap_or(-1));
        if let Some(entry) = first_log {
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
            .key(DEADLINES_KEY);
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
            .arg(write.deadline_ms.unwrap_or(-1));
        for entry in &write.log_entries {
            invocation.arg(entry);
        }
        for (field, value) in &write.evidence {
            invocation.arg(field).arg(value);
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

    /// Log entries after stream id `after` (from the start when None), at most `count`. With
    /// `block`, waits up to that long for new entries when there are none (on a dedicated
    /// connection, so other calls are not held up).
    pub async fn read_log(
        &self,
        id: &str,
        after: Option<&str>,
        count: usize,
        block: Option<Duration>,
    ) -> Result<Vec<LogRecord>, StoreError> {
        check_name("run id", id)?;
        let count = count.max(1);
        let key = log_key(id);
        let Some(block) = block else {
            let start = after
                .map(|a| format!("({a}"))
                .unwrap_or_else(|| "-".to_string());
            let mut conn = self.conn.clone();
            let reply: StreamRangeReply = bounded(
                "read_log",
                self.timeout,
                redis::cmd("XRANGE")
                    .arg(&key)
                    .arg(start)
                    .arg("+")
                    .arg("COUNT")
                    .arg(count)
                    .query_async(&mut conn),
            )
            .await?;
            return reply
                .ids
                .into_iter()
                .map(|i| to_log_record("read_log", i))
                .collect();
        };
        let block_ms = u64::try_from(block.as_millis()).unwrap_or(u64::MAX).max(1);
        let mut conn = bounded(
            "connect",
            self.timeout,
            self.client.get_multiplexed_async_connection(),
        )
        .await?;
        let reply: Option<StreamReadReply> = bounded(
            "read_log",
            block + self.timeout + BLOCK_GRACE,
            redis::cmd("XREAD")
                .arg("COUNT")
                .arg(count)
                .arg("BLOCK")
                .arg(block_ms)
                .arg("STREAMS")
                .arg(&key)
                .arg(after.unwrap_or("0-0"))
                .query_async(&mut conn),
        )
        .await?;
        reply
            .map(|r| r.keys)
            .unwrap_or_default()
            .into_iter()
            .flat_map(|k| k.ids)
            .map(|i| to_log_record("read_log", i))
            .collect()
    }

    /// All evidence `(field, json)` pairs, sorted by field.
    /// Run ids whose next deadline is at or before `now_ms`, earliest first, at most `limit`.
    /// Any replica may act on them: the record's compare-and-set makes exactly one win.
    pub async fn due_deadlines(
        &self,
        now_ms: i64,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let mut conn = self.conn.clone();
        bounded(
            "due_deadlines",
            self.timeout,
            redis::cmd("ZRANGEBYSCORE")
                .arg(DEADLINES_KEY)
                .arg("-inf")
                .arg(now_ms)
                .arg("LIMIT")
                .arg(0)
                .arg(limit.max(1))
                .query_async(&mut conn),
        )
        .await
    }

    /// Runs currently indexed under `state` (for the `loopgate_runs` gauge).
    pub async fn count(&self, state: &str) -> Result<u64, StoreError> {
        check_state(state)?;
        let mut conn = self.conn.clone();
        bounded("count", self.timeout, conn.scard(state_index_key(state))).await
    }

    /// Drop a run from the deadline index (e.g. its record expired or is unreadable).
    pub async fn clear_deadline(&self, id: &str) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        let _: i64 = bounded("clear_deadline", self.timeout, conn.zrem(DEADLINES_KEY, id)).await?;
        Ok(())
    }

    pub async fn evidence(&self, id: &str) -> Result<Vec<(String, String)>, StoreError> {
        check_name("run id", id)?;
        let mut conn = self.conn.clone();
        let mut pairs: Vec<(String, String)> =
            bounded("evidence", self.timeout, conn.hgetall(evidence_key(id))).await?;
        pairs.sort();
        Ok(pairs)
    }

    /// Run ids, newest first; all runs or those in `state`. Ids of runs whose keys expired are
    /// pruned from the indexes on the way.
    pub async fn list(
        &self,
        state: Option<&str>,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        match state {
            None => self.list_all(offset, limit).await,
            Some(state) => {
                check_state(state)?;
                self.list_state(state, offset, limit).await
            }
        }
    }

    async fn list_all(&self, offset: usize, limit: usize) -> Result<Vec<String>, StoreError> {
        let mut conn = self.conn.clone();
        for _ in 0..LIST_PRUNE_ROUNDS {
            let stop = isize::try_from(offset + limit - 1).unwrap_or(isize::MAX);
            let start = isize::try_from(offset).unwrap_or(isize::MAX);
            let ids: Vec<String> = bounded(
                "list",
                self.timeout,
                conn.zrevrange(ALL_RUNS_KEY, start, stop),
            )
            .await?;
            let stale = self.missing_runs(&ids).await?;
            if stale.is_empty() {
                return Ok(ids);
            }
            let _: i64 =
                bounded("list prune", self.timeout, conn.zrem(ALL_RUNS_KEY, &stale)).await?;
        }
        Err(StoreError::Protocol {
            op: "list",
            detail: "index kept changing while pruning expired runs".into(),
        })
    }

    async fn list_state(
        &self,
        state: &str,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let mut conn = self.conn.clone();
        let index = state_index_key(state);
        let members: Vec<String> = bounded("list", self.timeout, conn.smembers(&index)).await?;
        let stale = self.missing_runs(&members).await?;
        if !stale.is_empty() {
            let _: i64 = bounded("list prune", self.timeout, conn.srem(&index, &stale)).await?;
            let _: i64 =
                bounded("list prune", self.timeout, conn.zrem(ALL_RUNS_KEY, &stale)).await?;
        }
        let live: Vec<String> = members.into_iter().filter(|m| !stale.contains(m)).collect();
        if live.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in &live {
            pipe.zscore(ALL_RUNS_KEY, id);
        }
        let scores: Vec<Option<f64>> =
            bounded("list", self.timeout, pipe.query_async(&mut conn)).await?;
        let mut scored: Vec<(f64, String)> = live
            .into_iter()
            .zip(scores)
            .map(|(id, score)| (score.unwrap_or(0.0), id))
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        Ok(scored
            .into_iter()
            .skip(offset)
            .take(limit)
            .map(|(_, id)| id)
            .collect())
    }

    /// Which of `ids` have no `lg:run:<id>` key any more.
    async fn missing_runs(&self, ids: &[String]) -> Result<Vec<String>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in ids {
            pipe.exists(run_key(id));
        }
        let mut conn = self.conn.clone();
        let exists: Vec<bool> =
            bounded("exists", self.timeout, pipe.query_async(&mut conn)).await?;
        Ok(ids
            .iter()
            .zip(exists)
            .filter(|(_, exists)| !exists)
            .map(|(id, _)| id.clone())
            .collect())
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
        assert_eq!(state_index_key("running"), "lg:runs:running");
    }
}
