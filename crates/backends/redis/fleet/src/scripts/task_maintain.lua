-- switchyard RedisFleetBackend: queue_maintain (one step).
-- Remove what the queue's retention no longer keeps (ADR 0380, section 5): finished records past
-- their count or age, up to `max`, oldest first, and events past the log's count or age. On the
-- seed layout, repair dead records whose letters a seed consumer popped (section 7): the seed
-- pops only from the head, so the oldest dead records beyond the list's length end `failed`. A
-- re-send removes what is due since: no op record.
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
n = n + trim(K_DOK, ok_n, ok_ms, t, max - n)
n = n + trim(K_DBAD, bad_n, bad_ms, t, max - n)
if redis.call('EXISTS', K_EV) == 1 then
  redis.call('XTRIM', K_EV, 'MAXLEN', ev_n)
  redis.call('XTRIM', K_EV, 'MINID', string.format('%d', math.floor(t * 1000 - ev_ms)))
end
return n
