-- switchyard RedisFleetBackend: queue_submit_once.
-- Set the idempotency key and push in one step.
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 the call's op record (ADR 0140)
--   13 the idempotency key
-- ARGV: op_ttl, tier, body, value, ttl_ms (0 = none)
-- Returns {1} pushed (or re-send of a push), {0, current value, its PTTL} duplicate

if redis.call('EXISTS', K_OP) == 1 then return {1} end
local ok
if tonumber(ARGV[5]) > 0 then
  ok = redis.call('SET', KEYS[13], ARGV[4], 'NX', 'PX', ARGV[5])
else
  ok = redis.call('SET', KEYS[13], ARGV[4], 'NX')
end
if not ok then return {0, redis.call('GET', KEYS[13]), redis.call('PTTL', KEYS[13])} end
redis.call('RPUSH', K_TIER[ARGV[2]], ARGV[3])
wake(K_WAKE, 1)
record('1')
return {1}
