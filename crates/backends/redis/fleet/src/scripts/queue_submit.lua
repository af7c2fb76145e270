-- switchyard RedisFleetBackend: queue_submit (and queue_submit_once).
-- Submit one task now or later, optionally setting an idempotency key in the same step; a
-- duplicate submits nothing. A delayed task goes to the scheduled sets (ADR 0286).
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16 the call's op record
--   (ADR 0140), 17 the idempotency key (only with one)
-- ARGV: op_ttl, tier code, body, when ('' now, 'd<ms>' after a delay, 'a<unix seconds>' at an
--   instant on the server's clock), token (unique per call: names a copy in our own scheduled
--   set), then with an idempotency key: value, ttl_ms (0 = none)
-- Returns {1} submitted (or re-send of a submit), {0, current value, its PTTL} duplicate

if redis.call('EXISTS', K_OP) == 1 then return {1} end
if KEYS[17] then
  local ok
  if tonumber(ARGV[7]) > 0 then
    ok = redis.call('SET', KEYS[17], ARGV[6], 'NX', 'PX', ARGV[7])
  else
    ok = redis.call('SET', KEYS[17], ARGV[6], 'NX')
  end
  if not ok then return {0, redis.call('GET', KEYS[17]), redis.call('PTTL', KEYS[17])} end
end
local code = ARGV[2]
if not K_TIER[code] then code = 'n' end
local kind, arg = string.sub(ARGV[4], 1, 1), tonumber(string.sub(ARGV[4], 2))
local t = now()
local at
if kind == 'd' and arg and arg > 0 then at = t + arg / 1000 end
if kind == 'a' and arg and arg > t then at = arg end
if at then
  schedule(code, ARGV[3], at, ARGV[5])
else
  redis.call('RPUSH', K_TIER[code], ARGV[3])
  wake(K_WAKE, 1)
end
record('1')
return {1}
