-- switchyard RedisFleetBackend: queue_purge (one step).
-- Remove up to `max` scheduled and waiting tasks (tiers high, normal, low, then the scheduled
-- sets); the records among them end `cancelled` (ADR 0380); bodies without one are dropped.
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140)
-- ARGV: op_ttl, max
-- Returns how many were removed (a re-send answers the first count)

local done = redis.call('GET', K_OP)
if done then return tonumber(done) end
local max = tonumber(ARGV[2])
local recorded = redis.call('HLEN', K_TASKS) > 0
local t = now()
local n = 0
local function gone(body)
  n = n + 1
  if not recorded then return end
  local id = task_id(body)
  if not id then return end
  local r = rec_get(id)
  if r and (r.st == 'waiting' or r.st == 'scheduled') then end_task(id, r, 'cancelled', t) end
end
for _, code in ipairs({'h', 'n', 'l'}) do
  if n >= max then break end
  local got = redis.call('LPOP', K_TIER[code], max - n)
  if got then for _, body in ipairs(got) do gone(body) end end
end
for _, set in ipairs({K_SCHED, K_OWN}) do
  if n < max then
    local members = redis.call('ZRANGE', set, 0, max - n - 1)
    for _, m in ipairs(members) do
      redis.call('ZREM', set, m)
      -- Our own members (and seed-form members written before ADR 0286) keep their body beside.
      local body = redis.call('HGET', K_SBODY, m)
      if body then
        redis.call('HDEL', K_SBODY, m)
        gone(body)
      elseif set == K_SCHED then
        gone(m)
      end
    end
  end
end
if n > 0 then record(n) end
return n
