-- switchyard RedisFleetBackend: queue_sweep_expired.
-- Return lapsed reservations to their tiers, keeping their attempt counts; a recorded task a
-- cancel reached ends `cancelled` instead (ADR 0380). A re-send sweeps what
-- lapsed since: no op record.
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140)
-- ARGV: limit (reservations examined at most)
-- Returns {requeued, examined}

local lapsed = redis.call('ZRANGEBYSCORE', K_PROC, '-inf', fmt(now()), 'LIMIT', 0, tonumber(ARGV[1]))
local moved = 0
local recorded = redis.call('HLEN', K_TASKS) > 0
local t = now()
for _, r in ipairs(lapsed) do
  redis.call('ZREM', K_PROC, r)
  local body = redis.call('HGET', K_BODY, r)
  local code, attempt, ident = parse_meta(redis.call('HGET', K_META, r))
  local id, rec
  if recorded then id, rec = rec_of_delivery(r, ident) end
  if rec and flag(rec, 'c') then
    -- A cancel reached it: it ends here instead of going back (ADR 0380).
    end_task(id, rec, 'cancelled', t, nil, r)
    body = nil
  elseif rec then
    keep_progress(id, r, rec)
    rec.st = 'waiting'; rec.loc = ''
    rec_put(id, rec)
  end
  redis.call('HDEL', K_BODY, r)
  redis.call('HDEL', K_META, r)
  redis.call('HDEL', K_PROG, r)
  -- An orphan without a body (seed crash between its two writes) is just cleaned.
  if body then
    -- Reserve leaves the identity out when no count was stored: derive it from the body.
    if ident == nil or ident == '' then ident = identity(body) end
    if attempt > 0 then put_count(K_ATT, ident, attempt) end
    redis.call('RPUSH', K_TIER[code] or K_TIER.n, body)
    moved = moved + 1
  end
end
wake(K_WAKE, moved)
return {moved, #lapsed}
