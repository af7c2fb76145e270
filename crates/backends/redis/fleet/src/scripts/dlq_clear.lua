-- switchyard RedisFleetBackend: dlq_clear.
-- Delete the dead-letter list.
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16 the call's op record
--   (ADR 0140)
-- ARGV: op_ttl
-- Returns the number of bodies deleted (a re-send answers the first count)

local done = redis.call('GET', K_OP)
if done then return tonumber(done) end
local n = redis.call('LLEN', K_DEAD)
if n > 0 then
  redis.call('DEL', K_DEAD)
  record(n)
end
return n
