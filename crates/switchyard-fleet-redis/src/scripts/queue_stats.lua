-- switchyard RedisFleetBackend: queue_stats.
-- Every count of the queue in one read-only snapshot (ADR 0110). The cut-offs are those of sweep
-- and reserve (`<= now`).
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 the call's op record (ADR 0140)
-- ARGV: none
-- Returns {high, normal, low, in_flight, overdue, scheduled, due, dead}

local t = fmt(now())
return {
  redis.call('LLEN', K_TIER.h), redis.call('LLEN', K_TIER.n), redis.call('LLEN', K_TIER.l),
  redis.call('ZCARD', K_PROC), redis.call('ZCOUNT', K_PROC, '-inf', t),
  redis.call('ZCARD', K_SCHED), redis.call('ZCOUNT', K_SCHED, '-inf', t),
  redis.call('LLEN', K_DEAD)
}
