-- switchyard RedisFleetBackend: dlq_requeue.
-- Move the oldest dead letters back to a tier, atomically, with a fresh attempt count;
-- their dead records are waiting again (ADR 0380).
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140)
-- ARGV: op_ttl, n, tier code
-- Returns the number of bodies moved (a re-send answers the first count)

local done = redis.call('GET', K_OP)
if done then return tonumber(done) end
local got = redis.call('LPOP', K_DEAD, tonumber(ARGV[2]))
if not got then return 0 end
if redis.call('HLEN', K_TASKS) > 0 then
  local t = now()
  for _, body in ipairs(got) do letter_back(body, ARGV[3], t) end
end
push_all('RPUSH', K_TIER[ARGV[3]], got)
wake(K_WAKE, #got)
record(#got)
return #got
