-- switchyard RedisFleetBackend: queue_fail.
-- Remove a reservation and dead-letter the body, atomically. A recorded task ends `dead`; one a
-- cancel reached ends `cancelled` instead, with no dead letter (ADR 0380).
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140)
-- ARGV: op_ttl, receipt, body, the body's max_attempts ('' none), its last error ('' none, else
--   'e' and the text)
-- Returns 1 dead-lettered (or re-send), 0 receipt not current, {'c', id} the task was cancelled
--   and has ended (a re-send answers alike)

local done = redis.call('GET', K_OP)
if done then
  if string.sub(done, 1, 2) == 'c:' then return {'c', string.sub(done, 3)} end
  return 1
end
local rc = ARGV[2]
if redis.call('ZREM', K_PROC, rc) == 0 then return 0 end
local id, rec
if redis.call('HLEN', K_TASKS) > 0 then
  local _, _, ident = parse_meta(redis.call('HGET', K_META, rc))
  id, rec = rec_of_delivery(rc, ident)
end
local reply = 1
if rec and flag(rec, 'c') then
  end_task(id, rec, 'cancelled', now(), nil, rc)
  reply = {'c', id}
  record('c:' .. id)
else
  redis.call('RPUSH', K_DEAD, ARGV[3])
  if rec then
    given(id, rec, ARGV[4], ARGV[5])
    end_task(id, rec, 'dead', now(), nil, rc)
  end
  record('1')
end
redis.call('HDEL', K_BODY, rc)
redis.call('HDEL', K_META, rc)
redis.call('HDEL', K_PROG, rc)
return reply
