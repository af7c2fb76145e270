-- switchyard RedisFleetBackend: task_cancel.
-- Cancel tasks by id in one step (ADR 0380, section 4): a scheduled or waiting task leaves its
-- set or tier and ends `cancelled`; a running one is marked, so its holder's next extend,
-- progress or ack meets the cancel; an ended one is left as it is.
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140)
-- ARGV: op_ttl, then the ids (distinct)
-- Returns one character per id, as one string: 'c' cancelled, 'r' cancel requested, 'u'
--   unknown, or the end it had: 'C' completed, 'F' failed, 'D' dead, 'X' cancelled (a re-send
--   answers the first reply)

local done = redis.call('GET', K_OP)
if done then return done end
local FIN = {completed = 'C', failed = 'F', dead = 'D', cancelled = 'X'}
local t = now()
local out = {}
local changed = false
for i = 2, #ARGV do
  local id = ARGV[i]
  local r = rec_get(id)
  local c
  if not r then
    c = 'u'
  elseif FIN[r.st] then
    c = FIN[r.st]
  elseif r.st == 'running' and redis.call('ZSCORE', K_PROC, r.loc) then
    if not flag(r, 'c') then r.flags = r.flags .. 'c'; rec_put(id, r) end
    c = 'r'
  else
    local body = redis.call('HGET', K_TBODY, id)
    local removed = 0
    if body then
      if r.st == 'scheduled' then
        if r.loc == 's' then
          removed = redis.call('ZREM', K_SCHED, body)
        elseif r.loc ~= '' then
          removed = redis.call('ZREM', K_OWN, r.loc)
          redis.call('HDEL', K_SBODY, r.loc)
        end
      end
      -- Waiting, or moved to a tier by a seed consumer (drained when due, or swept back).
      if removed == 0 then removed = redis.call('LREM', K_TIER[r.tier] or K_TIER.n, 1, body) end
      if removed == 0 and r.tier ~= 'n' then removed = redis.call('LREM', K_TIER.n, 1, body) end
    end
    if removed > 0 then
      end_task(id, r, 'cancelled', t)
      c = 'c'
    else
      -- Held by a consumer that keeps no records (the seed): marked, so it never completes
      -- through us once it comes back.
      if not flag(r, 'c') then r.flags = r.flags .. 'c'; rec_put(id, r) end
      c = 'r'
    end
  end
  if c == 'c' or c == 'r' then changed = true end
  out[#out + 1] = c
end
local reply = table.concat(out)
if changed then record(reply) end
return reply
