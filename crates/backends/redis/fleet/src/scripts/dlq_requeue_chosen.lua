-- switchyard RedisFleetBackend: dlq_requeue_chosen.
-- Move, per body given, the oldest dead letter with exactly those bytes to the end of a tier, in
-- one step; the letters not chosen keep their order. Dead records of the moved letters are waiting again
-- (ADR 0380).
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140)
-- ARGV: op_ttl, tier code, then the chosen bodies
-- Returns one '1' (moved) / '0' (no such letter left) per body, as one string (a re-send answers
--   the first reply)

local done = redis.call('GET', K_OP)
if done then return done end
local code = ARGV[2]
if not K_TIER[code] then code = 'n' end
local res, moved = {}, {}
for i = 3, #ARGV do
  -- LREM with count 1 removes the first match from the head: the oldest letter.
  if redis.call('LREM', K_DEAD, 1, ARGV[i]) == 1 then
    res[#res + 1] = '1'
    moved[#moved + 1] = ARGV[i]
  else
    res[#res + 1] = '0'
  end
end
local reply = table.concat(res)
if #moved > 0 then
  if redis.call('HLEN', K_TASKS) > 0 then
    local t = now()
    for _, body in ipairs(moved) do letter_back(body, code, t) end
  end
  push_all('RPUSH', K_TIER[code], moved)
  wake(K_WAKE, #moved)
  record(reply)
end
return reply
