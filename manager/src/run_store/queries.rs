//! Reads of the run store: the log (optionally blocking for new entries), due deadlines,
//! counts, evidence, accepted reports and the run listings (pruning index entries of expired runs).

use std::time::Duration;

use redis::streams::{StreamId, StreamRangeReply, StreamReadReply};
use redis::AsyncCommands;

use super::{
    check_name, check_state, evidence_key, log_key, reports_key, run_key, state_index_key,
    LogRecord, RunStore, StoreError, ALL_RUNS_KEY, BLOCK_GRACE, DEADLINES_KEY, LIST_PRUNE_ROUNDS,
};

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
            let mut conn = self.link.conn();
            let reply: StreamRangeReply = self
                .call(
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
        // The client's default response timeout (500 ms) is far below `block`: without its
        // own, every blocking read would time out, warn and reconnect about once a second.
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(block + self.timeout + BLOCK_GRACE));
        let mut conn = self
            .call(
                "connect",
                self.timeout,
                self.link
                    .client()
                    .get_multiplexed_async_connection_with_config(&config),
            )
            .await?;
        let reply: Option<StreamReadReply> = self
            .call(
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
        let mut conn = self.link.conn();
        self.call(
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
        let mut conn = self.link.conn();
        self.call("count", self.timeout, conn.scard(state_index_key(state)))
            .await
    }

    /// Drop a run from the deadline index (e.g. its record expired or is unreadable).
    pub async fn clear_deadline(&self, id: &str) -> Result<(), StoreError> {
        let mut conn = self.link.conn();
        let _: i64 = self
            .call("clear_deadline", self.timeout, conn.zrem(DEADLINES_KEY, id))
            .await?;
        Ok(())
    }

    pub async fn evidence(&self, id: &str) -> Result<Vec<(String, String)>, StoreError> {
        check_name("run id", id)?;
        let mut conn = self.link.conn();
        let mut pairs: Vec<(String, String)> = self
            .call("evidence", self.timeout, conn.hgetall(evidence_key(id)))
            .await?;
        pairs.sort();
        Ok(pairs)
    }

    /// The accepted audit report stored for `snapshot` (its JSON as received), if any.
    pub async fn report(&self, id: &str, snapshot: &str) -> Result<Option<String>, StoreError> {
        check_name("run id", id)?;
        let mut conn = self.link.conn();
        self.call("report", self.timeout, conn.hget(reports_key(id), snapshot))
            .await
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
        let mut conn = self.link.conn();
        for _ in 0..LIST_PRUNE_ROUNDS {
            let stop = isize::try_from(offset + limit - 1).unwrap_or(isize::MAX);
            let start = isize::try_from(offset).unwrap_or(isize::MAX);
            let ids: Vec<String> = self
                .call(
                    "list",
                    self.timeout,
                    conn.zrevrange(ALL_RUNS_KEY, start, stop),
                )
                .await?;
            let stale = self.missing_runs(&ids).await?;
            if stale.is_empty() {
                return Ok(ids);
            }
            let _: i64 = self
                .call("list prune", self.timeout, conn.zrem(ALL_RUNS_KEY, &stale))
                .await?;
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
        let mut conn = self.link.conn();
        let index = state_index_key(state);
        let members: Vec<String> = self
            .call("list", self.timeout, conn.smembers(&index))
            .await?;
        let stale = self.missing_runs(&members).await?;
        if !stale.is_empty() {
            let _: i64 = self
                .call("list prune", self.timeout, conn.srem(&index, &stale))
                .await?;
            let _: i64 = self
                .call("list prune", self.timeout, conn.zrem(ALL_RUNS_KEY, &stale))
                .await?;
        }
        let live: Vec<String> = members.into_iter().filter(|m| !stale.contains(m)).collect();
        if live.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in &live {
            pipe.zscore(ALL_RUNS_KEY, id);
        }
        let scores: Vec<Option<f64>> = self
            .call("list", self.timeout, pipe.query_async(&mut conn))
            .await?;
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

    /// Ids of runs (any state, unordered) that start with `prefix`, at most `limit`: a scan of
    /// the run index. `prefix` must be hex digits and dashes (a run id's characters), so it is
    /// no glob pattern. Ids of expired runs may be among them (the caller loads each).
    pub async fn ids_with_prefix(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        if prefix.is_empty() || !prefix.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            return Err(StoreError::Protocol {
                op: "ids_with_prefix",
                detail: format!("'{prefix}' is not a run id prefix"),
            });
        }
        let pattern = format!("{}*", prefix.to_ascii_lowercase());
        let mut conn = self.link.conn();
        let mut cursor: u64 = 0;
        let mut ids = Vec::new();
        loop {
            let (next, page): (u64, Vec<String>) = self
                .call(
                    "ids_with_prefix",
                    self.timeout,
                    redis::cmd("ZSCAN")
                        .arg(ALL_RUNS_KEY)
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(&pattern)
                        .arg("COUNT")
                        .arg(1000)
                        .query_async(&mut conn),
                )
                .await?;
            // ZSCAN answers member, score, member, score, ...
            ids.extend(page.into_iter().step_by(2));
            if next == 0 || ids.len() >= limit {
                ids.sort();
                ids.dedup();
                ids.truncate(limit);
                return Ok(ids);
            }
            cursor = next;
        }
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
        let mut conn = self.link.conn();
        let exists: Vec<bool> = self
            .call("exists", self.timeout, pipe.query_async(&mut conn))
            .await?;
        Ok(ids
            .iter()
            .zip(exists)
            .filter(|(_, exists)| !exists)
            .map(|(id, _)| id.clone())
            .collect())
    }
}
