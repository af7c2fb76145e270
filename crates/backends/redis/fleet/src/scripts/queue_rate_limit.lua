-- switchyard RedisFleetBackend: queue_set_rate_limit.
-- Set the queue's token bucket with a full bucket, or remove it (ADR 0285); blocked reservers
-- are woken so they take the tokens a new or removed limit gives.
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140)
-- ARGV: op_ttl, max ('' removes the limit), per_ms
-- Returns 1 (a re-send answers the same)

if redis.call('EXISTS', K_OP) == 1 then return 1 end
redis.call('DEL', K_RATE)
if ARGV[2] ~= '' then
  redis.call('HSET', K_RATE, 'max', ARGV[2], 'per_ms', ARGV[3], 'tokens', ARGV[2], 'at', fmt(now()))
end
wake(K_WAKE, redis.call('LLEN', K_TIER.h) + redis.call('LLEN', K_TIER.n) + redis.call('LLEN', K_TIER.l))
record('1')
return 1
