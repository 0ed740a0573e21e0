//! The Lua scripts that make each write atomic: the record, its version, the log, the evidence,
//! the accepted reports and the indexes change together or not at all.

pub(super) const CREATE_SCRIPT: &str = r#"
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

pub(super) const CAS_SCRIPT: &str = r#"
-- KEYS: run, log, evidence, deadlines, reports[, from index, to index]
-- ARGV: expected version, record, id, expire ms (0 = none), n log entries, n evidence pairs,
--       deadline ms (-1 = none), n report pairs, log entries..., evidence field, value...,
--       report snapshot, value...
local current = redis.call('HGET', KEYS[1], 'version')
if not current then return {0, 0} end
current = tonumber(current)
if current ~= tonumber(ARGV[1]) then return {0, current} end
local new_version = current + 1
redis.call('HSET', KEYS[1], 'version', new_version, 'record', ARGV[2])
local n_log = tonumber(ARGV[5])
local n_evidence = tonumber(ARGV[6])
local n_reports = tonumber(ARGV[8])
if tonumber(ARGV[7]) >= 0 then
  redis.call('ZADD', KEYS[4], ARGV[7], ARGV[3])
else
  redis.call('ZREM', KEYS[4], ARGV[3])
end
local i = 9
for _ = 1, n_log do
  redis.call('XADD', KEYS[2], '*', 'entry', ARGV[i])
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
if #KEYS >= 7 then
  redis.call('SREM', KEYS[6], ARGV[3])
  redis.call('SADD', KEYS[7], ARGV[3])
end
local expire_ms = tonumber(ARGV[4])
if expire_ms > 0 then
  for _, k in ipairs({1, 2, 3, 5}) do
    if redis.call('EXISTS', KEYS[k]) == 1 then redis.call('PEXPIRE', KEYS[k], expire_ms) end
  end
end
return {1, new_version}
"#;
