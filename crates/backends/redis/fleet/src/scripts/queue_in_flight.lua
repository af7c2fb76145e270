-- switchyard RedisFleetBackend: queue_in_flight.
-- Read the queue's reservations, soonest deadline first, lapsed ones included; changes nothing.
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140)
-- ARGV: n (reservations at most)
-- Returns per reservation: body, tier code, attempt, deadline, progress (nil when none); a
--   reservation without a body (a seed crash between its two writes) is left out

local out = {}
local held = redis.call('ZRANGE', K_PROC, 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
for i = 1, #held, 2 do
  local r = held[i]
  local body = redis.call('HGET', K_BODY, r)
  if body then
    local code, attempt = parse_meta(redis.call('HGET', K_META, r))
    if not K_TIER[code] then code = 'n' end
    out[#out + 1] = body; out[#out + 1] = code; out[#out + 1] = math.max(1, attempt)
    out[#out + 1] = held[i + 1]; out[#out + 1] = redis.call('HGET', K_PROG, r)
  end
end
return out
