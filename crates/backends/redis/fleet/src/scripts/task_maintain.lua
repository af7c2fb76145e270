-- switchyard RedisFleetBackend: queue_maintain (one step).
-- Remove what the queue's retention no longer keeps (ADR 0380, section 5): finished records past
-- their count or age, up to `max`, oldest first, and events past the log's count or age. On the
-- seed layout, repair dead records whose letters a seed consumer popped (section 7): the seed
-- pops only from the head, so the oldest dead records beyond the list's length end `failed`; and
-- walk the records (`HSCAN`, its cursor kept in `task:live`) for live ones submitted or last
-- started over 10 minutes ago whose task is found nowhere, which a seed consumer acked or dead-lettered without
-- telling us: they are removed without an event (we do not know how they ended). A re-send
-- removes what is due since: no op record.
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140; unused)
-- ARGV: max (records removed or repaired at most), seed ('1' on the seed layout, else '')
-- Returns how many records were removed or repaired

local max = tonumber(ARGV[1])
local t = now()
local ok_n, ok_ms, bad_n, bad_ms, ev_n, ev_ms = retention()
local n = 0
if ARGV[2] == '1' then
  local beyond = redis.call('ZCARD', K_DDEAD) - redis.call('LLEN', K_DEAD)
  if beyond > 0 then
    local popped = redis.call('ZPOPMIN', K_DDEAD, math.min(beyond, max))
    for i = 1, #popped, 2 do
      local id = popped[i]
      local r = rec_get(id)
      if r and r.st == 'dead' then end_task(id, r, 'failed', t) end
      n = n + 1
    end
  end
end
-- Where a live record's task may be: a reservation (ours under our receipt, the seed's under
-- the id), the scheduled sets, its body in a tier or the dead letters (the seed dead-letters the
-- body it reserved). A list is searched by value, at most its first 10,000 bodies: a longer one
-- not searched whole keeps the record (unknown is not gone). A body the seed rewrote (its nack
-- bumps `attempt`) is not found by value: its record goes too, and the task runs on as one the
-- seed pushed. Each step searches lists for at most 10 records; the others wait for the next
-- walk (kept meanwhile).
local SEARCH, searches = 10000, 10
local function found(id, r)
  if r.st == 'running' and r.loc ~= '' and redis.call('ZSCORE', K_PROC, r.loc) then return true end
  if redis.call('ZSCORE', K_PROC, id) then return true end
  if r.st == 'scheduled' and r.loc ~= 's' and redis.call('ZSCORE', K_OWN, r.loc) then return true end
  local body = redis.call('HGET', K_TBODY, id)
  if not body then return false end
  if redis.call('ZSCORE', K_SCHED, body) then return true end
  if searches <= 0 then return true end
  searches = searches - 1
  for _, k in ipairs({K_TIER[r.tier] or K_TIER.n, K_TIER.n, K_DEAD}) do
    if redis.call('LPOS', k, body, 'MAXLEN', SEARCH) or redis.call('LLEN', k) > SEARCH then
      return true
    end
  end
  return false
end
if ARGV[2] == '1' and n < max then
  local walk = redis.call('HSCAN', K_TASKS, redis.call('GET', K_LIVE) or '0', 'COUNT', 100)
  redis.call('SET', K_LIVE, walk[1])
  local seen = walk[2]
  for i = 1, #seen, 2 do
    local id, r = seen[i], rec_parse(seen[i + 1])
    if r and not ENDS[r.st] then
      local since = tonumber(r.start ~= '' and r.start or r.sub) or t
      if t - since > 600 and not found(id, r) then
        forget({id})
        n = n + 1
      end
    end
  end
end
n = n + trim(K_DOK, ok_n, ok_ms, t, max - n)
n = n + trim(K_DBAD, bad_n, bad_ms, t, max - n)
if redis.call('EXISTS', K_EV) == 1 then
  redis.call('XTRIM', K_EV, 'MAXLEN', ev_n)
  redis.call('XTRIM', K_EV, 'MINID', string.format('%d', math.floor(t * 1000 - ev_ms)))
end
return n
