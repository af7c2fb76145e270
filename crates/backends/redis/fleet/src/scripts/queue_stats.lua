-- switchyard RedisFleetBackend: queue_stats.
-- Every count of the queue in one read-only snapshot (ADR 0110). The cut-offs are those of sweep
-- and reserve (`<= now`).
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140)
-- ARGV: none
-- Returns {high, normal, low, in_flight, overdue, scheduled, due, dead, paused (0/1),
--   rate max (0 = no limit), rate per_ms, throttled_ms, then the ends of recorded tasks
--   (ADR 0380): completed, failed, dead, cancelled}

local now_t = now()
local t = fmt(now_t)
local whole, tokens, max, per = bucket(now_t)
local ends = redis.call('HMGET', K_ENDS, 'completed', 'failed', 'dead', 'cancelled')
local throttled = 0
if whole and whole < 1 then throttled = token_wait_ms(tokens, max, per) end
return {
  redis.call('LLEN', K_TIER.h), redis.call('LLEN', K_TIER.n), redis.call('LLEN', K_TIER.l),
  redis.call('ZCARD', K_PROC), redis.call('ZCOUNT', K_PROC, '-inf', t),
  redis.call('ZCARD', K_SCHED) + redis.call('ZCARD', K_OWN),
  redis.call('ZCOUNT', K_SCHED, '-inf', t) + redis.call('ZCOUNT', K_OWN, '-inf', t),
  redis.call('LLEN', K_DEAD), redis.call('EXISTS', K_PAUSED), max or 0, per or 0, throttled,
  tonumber(ends[1]) or 0, tonumber(ends[2]) or 0, tonumber(ends[3]) or 0, tonumber(ends[4]) or 0
}
