//! The Lua scripts that make each write atomic: the record, its version, the log, the evidence,
//! the accepted reports, the pending effects (the outbox) and the indexes change together or
//! not at all.

pub(super) const CREATE_SCRIPT: &str = r#"
-- KEYS: run, log, state index, all index, deadlines, outbox, outbox index.
-- ARGV: id, record, created_ms, deadline ms (-1 = none), log max entries, n effects,
--       effect id, effect json..., log entries...
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'version', 1, 'record', ARGV[2])
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[1])
if tonumber(ARGV[4]) >= 0 then redis.call('ZADD', KEYS[5], ARGV[4], ARGV[1]) end
local n_effects = tonumber(ARGV[6])
local i = 7
for _ = 1, n_effects do
  redis.call('HSET', KEYS[6], ARGV[i], ARGV[i + 1])
  i = i + 2
end
if n_effects > 0 then redis.call('ZADD', KEYS[7], 'NX', ARGV[3], ARGV[1]) end
while i <= #ARGV do
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], '*', 'entry', ARGV[i])
  i = i + 1
end
return 1
"#;

/// Undo a creation nothing has acted on: the record still at version 1 and its pending effects
/// still in the outbox, unclaimed by the relay (their index score still the creation time).
pub(super) const DISCARD_SCRIPT: &str = r#"
-- KEYS: run, log, state index, all index, deadlines, outbox, outbox index.
-- ARGV: id, created_ms. Returns 1 discarded, 2 nothing stored, 0 refused (acted on).
if redis.call('EXISTS', KEYS[1]) == 0 then return 2 end
if redis.call('HGET', KEYS[1], 'version') ~= '1' then return 0 end
if redis.call('HLEN', KEYS[6]) == 0 then return 0 end
local score = redis.call('ZSCORE', KEYS[7], ARGV[1])
if not score or tonumber(score) ~= tonumber(ARGV[2]) then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[6])
redis.call('SREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('ZREM', KEYS[7], ARGV[1])
return 1
"#;

pub(super) const CAS_SCRIPT: &str = r#"
-- KEYS: run, log, evidence, deadlines, reports, outbox, outbox index[, from index, to index]
-- ARGV: expected version, record, id, expire ms (0 = none), n log entries, n evidence pairs,
--       deadline ms (-1 = none), n report pairs, now ms, log min id ms (0 = none),
--       log max entries, n effects, log entries..., evidence field, value...,
--       report snapshot, value..., effect id, effect json...
local current = redis.call('HGET', KEYS[1], 'version')
if not current then return {0, 0} end
current = tonumber(current)
if current ~= tonumber(ARGV[1]) then return {0, current} end
local new_version = current + 1
redis.call('HSET', KEYS[1], 'version', new_version, 'record', ARGV[2])
local n_log = tonumber(ARGV[5])
local n_evidence = tonumber(ARGV[6])
local n_reports = tonumber(ARGV[8])
local n_effects = tonumber(ARGV[12])
if tonumber(ARGV[7]) >= 0 then
  redis.call('ZADD', KEYS[4], ARGV[7], ARGV[3])
else
  redis.call('ZREM', KEYS[4], ARGV[3])
end
local i = 13
-- Trim by age before appending: this write's own entries are never older than the cut-off,
-- even when the manager's clock runs ahead of Redis's (their ids are Redis's time).
if n_log > 0 and tonumber(ARGV[10]) > 0 then
  redis.call('XTRIM', KEYS[2], 'MINID', '~', ARGV[10])
end
for _ = 1, n_log do
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[11], '*', 'entry', ARGV[i])
  i = i + 1
end
for _ = 1, n_evidence do
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
  i = i + 2
end
for _ = 1, n_reports do
  redis.call('HSET', KEYS[5], ARGV[i], ARGV[i + 1])
  i = i + 2
end
for _ = 1, n_effects do
  redis.call('HSET', KEYS[6], ARGV[i], ARGV[i + 1])
  i = i + 2
end
-- NX: a run's score is the time its oldest unpublished effect was stored.
if n_effects > 0 then redis.call('ZADD', KEYS[7], 'NX', ARGV[9], ARGV[3]) end
if #KEYS >= 9 then
  redis.call('SREM', KEYS[8], ARGV[3])
  redis.call('SADD', KEYS[9], ARGV[3])
end
local expire_ms = tonumber(ARGV[4])
if expire_ms > 0 then
  for _, k in ipairs({1, 2, 3, 5, 6}) do
    if redis.call('EXISTS', KEYS[k]) == 1 then redis.call('PEXPIRE', KEYS[k], expire_ms) end
  end
end
return {1, new_version}
"#;

/// Effects published: forget them; the run leaves the index once none is pending.
pub(super) const PUBLISHED_SCRIPT: &str = r#"
-- KEYS: outbox, outbox index. ARGV: id, effect ids...
for i = 2, #ARGV do redis.call('HDEL', KEYS[1], ARGV[i]) end
if redis.call('HLEN', KEYS[1]) == 0 then redis.call('ZREM', KEYS[2], ARGV[1]) end
return 1
"#;

/// Claim runs whose oldest pending effect is older than the cutoff: each claimed run's score
/// moves to now, so other replicas leave it alone until it is that old again.
pub(super) const CLAIM_SCRIPT: &str = r#"
-- KEYS: outbox index. ARGV: cutoff ms, now ms, batch.
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do redis.call('ZADD', KEYS[1], 'XX', ARGV[2], id) end
return ids
"#;
