-- switchyard RedisFleetBackend: queue_push.
-- Append pushed bodies to their tiers and wake blocked reservers; one call or a batch of
-- concurrent calls (ADR 0141).
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16 the call's op record
--   (ADR 0140)
-- ARGV: op_ttl, then (tier code, body) per pushed body, in call order
-- Returns 1 applied, 0 re-send of an applied push

if not redis.call('SET', K_OP, '1', 'NX', 'PX', ARGV[1]) then return 0 end
local by = {}
for i = 2, #ARGV, 2 do
  local code = ARGV[i]
  if not K_TIER[code] then code = 'n' end
  local list = by[code]
  if not list then list = {}; by[code] = list end
  list[#list + 1] = ARGV[i + 1]
end
local n = 0
for code, list in pairs(by) do
  push_all('RPUSH', K_TIER[code], list)
  n = n + #list
end
wake(K_WAKE, n)
return 1
