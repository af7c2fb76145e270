-- switchyard RedisFleetBackend: dlq_clear.
-- Delete the dead-letter list; its dead records end `failed` (ADR 0380).
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140)
-- ARGV: op_ttl
-- Returns the number of bodies deleted (a re-send answers the first count)

local done = redis.call('GET', K_OP)
if done then return tonumber(done) end
local n = redis.call('LLEN', K_DEAD)
if n > 0 then
  if redis.call('HLEN', K_TASKS) > 0 then
    local t = now()
    for i = 0, n - 1, 1000 do
      for _, body in ipairs(redis.call('LRANGE', K_DEAD, i, i + 999)) do letter_gone(body, t) end
    end
  end
  redis.call('DEL', K_DEAD)
  record(n)
end
return n
