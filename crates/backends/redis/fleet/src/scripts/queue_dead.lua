-- switchyard RedisFleetBackend: queue_dead.
-- Append a body to the dead-letter list. A body with a task id and no live record gets a record
-- that ends `dead` at once (ADR 0380).
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140)
-- ARGV: op_ttl, body, then its task id ('' none), max_attempts ('' none) and last error ('' none,
--   else 'e' and the text)
-- Returns 1 applied, 0 re-send of an applied call

if not redis.call('SET', K_OP, '1', 'NX', 'PX', ARGV[1]) then return 0 end
redis.call('RPUSH', K_DEAD, ARGV[2])
local id = ARGV[3] or ''
if id ~= '' then
  local rec = rec_get(id)
  -- A record whose task is still queued, running or dead is left alone; otherwise the letter
  -- is a task of its own, dead from the start (as the reference adapter does).
  if not rec or (ENDS[rec.st] and rec.st ~= 'dead') then
    local t = now()
    if rec then forget({id}) end
    rec_new(id, 'n', ARGV[2], t, ARGV[4], ARGV[5], 'dead', '')
    end_task(id, rec_get(id), 'dead', t)
  end
end
return 1
