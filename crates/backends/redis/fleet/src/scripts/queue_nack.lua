-- switchyard RedisFleetBackend: queue_nack and queue_release.
-- Return a reserved task to its own tier, now or after a delay, keeping its attempt count: the
-- caller's body (nack) or the body as delivered (release).
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16 the call's op record
--   (ADR 0140)
-- ARGV: op_ttl, receipt, body (ignored when releasing), delay_ms, mode ('b' the given body,
--   'd' the delivered one)
-- Returns 1 returned (or re-send of a return), 0 receipt not current

if redis.call('EXISTS', K_OP) == 1 then return 1 end
if redis.call('ZREM', K_PROC, ARGV[2]) == 0 then return 0 end
local code, attempt = parse_meta(redis.call('HGET', K_META, ARGV[2]))
local body = ARGV[3]
if ARGV[5] == 'd' then body = redis.call('HGET', K_BODY, ARGV[2]) or '' end
redis.call('HDEL', K_BODY, ARGV[2])
redis.call('HDEL', K_META, ARGV[2])
redis.call('HDEL', K_PROG, ARGV[2])
if not K_TIER[code] then code = 'n' end
if attempt > 0 then put_count(K_ATT, (identity(body)), attempt) end
local delay = tonumber(ARGV[4])
if delay > 0 then
  schedule(code, body, now() + delay / 1000, ARGV[2])
else
  redis.call('RPUSH', K_TIER[code], body)
  wake(K_WAKE, 1)
end
record('1')
return 1
