-- switchyard RedisFleetBackend: queue_submit (and queue_submit_once).
-- Submit one task now or later, optionally setting an idempotency key in the same step; a
-- duplicate submits nothing. A delayed task goes to the scheduled sets (ADR 0286).
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140), 17 the idempotency key (only with one)
-- ARGV: op_ttl, tier code, body, when ('' now, 'd<ms>' after a delay, 'a<unix seconds>' at an
--   instant on the server's clock), token (unique per call: names a copy in our own scheduled
--   set), task id ('' none), max_attempts ('' none), last error ('' none, else 'e' and the text),
--   then with an idempotency key: value, ttl_ms (0 = none)
-- Returns {1} submitted (or re-send of a submit), {0, current value, its PTTL} duplicate, {2}
--   the task id is taken by a live or dead task (ADR 0380: nothing written; a completed,
--   failed or cancelled task's record is replaced)

if redis.call('EXISTS', K_OP) == 1 then return {1} end
local id = ARGV[6]
-- The idempotency key answers first; a taken id must then not leave the key set.
if KEYS[29] then
  local cur = redis.call('GET', KEYS[29])
  if cur then return {0, cur, redis.call('PTTL', KEYS[29])} end
end
-- A finished task's record gives its id up to the new task (forgotten below, after the key).
local reuse = false
if id ~= '' then
  local cur = redis.call('HGET', K_TASKS, id)
  if cur then
    if not rec_free(cur) then return {2} end
    reuse = true
  end
end
if KEYS[29] then
  if tonumber(ARGV[10]) > 0 then
    redis.call('SET', KEYS[29], ARGV[9], 'PX', ARGV[10])
  else
    redis.call('SET', KEYS[29], ARGV[9])
  end
end
if reuse then forget({id}) end
local code = ARGV[2]
if not K_TIER[code] then code = 'n' end
local kind, arg = string.sub(ARGV[4], 1, 1), tonumber(string.sub(ARGV[4], 2))
local t = now()
local at
if kind == 'd' and arg and arg > 0 then at = t + arg / 1000 end
if kind == 'a' and arg and arg > t then at = arg end
if at then
  local loc = schedule(code, ARGV[3], at, ARGV[5])
  if id ~= '' then rec_new(id, code, ARGV[3], t, ARGV[7], ARGV[8], 'scheduled', loc) end
else
  redis.call('RPUSH', K_TIER[code], ARGV[3])
  if id ~= '' then rec_new(id, code, ARGV[3], t, ARGV[7], ARGV[8], 'waiting', '') end
  wake(K_WAKE, 1)
end
record('1')
return {1}
