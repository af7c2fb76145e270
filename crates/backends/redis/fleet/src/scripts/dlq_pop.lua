-- switchyard RedisFleetBackend: dlq_pop.
-- Pop the oldest dead letters; their dead records end `failed` (ADR 0380). The op record is a LIST of the popped bodies, which a re-send
-- returns.
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140)
-- ARGV: op_ttl, n
-- Returns the popped bodies

if redis.call('EXISTS', K_OP) == 1 then return redis.call('LRANGE', K_OP, 0, -1) end
local got = redis.call('LPOP', K_DEAD, tonumber(ARGV[2]))
if not got then return {} end
if redis.call('HLEN', K_TASKS) > 0 then
  local t = now()
  for _, body in ipairs(got) do letter_gone(body, t) end
end
push_all('RPUSH', K_OP, got)
redis.call('PEXPIRE', K_OP, ARGV[1])
return got
