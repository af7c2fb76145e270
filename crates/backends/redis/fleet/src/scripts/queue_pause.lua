-- switchyard RedisFleetBackend: queue_pause and queue_resume.
-- Set or clear the queue's pause flag, which the reserve script checks (ADR 0285); a resume
-- wakes as many blocked reservers as there are tasks ready for them.
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140)
-- ARGV: op_ttl, 'p' (pause) or 'r' (resume)
-- Returns 1 the state changed, 0 it already was so (a re-send answers the first reply)

local done = redis.call('GET', K_OP)
if done then return tonumber(done) end
local changed
if ARGV[2] == 'p' then
  changed = redis.call('SET', K_PAUSED, '1', 'NX') and 1 or 0
else
  changed = redis.call('DEL', K_PAUSED)
  if changed == 1 then
    local t = fmt(now())
    wake(K_WAKE, redis.call('LLEN', K_TIER.h) + redis.call('LLEN', K_TIER.n)
      + redis.call('LLEN', K_TIER.l) + redis.call('ZCOUNT', K_SCHED, '-inf', t)
      + redis.call('ZCOUNT', K_OWN, '-inf', t))
  end
end
if changed == 1 then record(1) end
return changed
