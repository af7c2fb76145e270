-- switchyard RedisFleetBackend: queue_extend.
-- Move a reservation's visibility deadline, unless a cancel reached its task. A re-send only moves it again, so there is no op
-- record.
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140)
-- ARGV: receipt, visibility_ms
-- Returns 1 extended, 0 receipt not current, {'c', id} a cancel reached the delivery's task:
--   nothing written (ADR 0380)

if not redis.call('ZSCORE', K_PROC, ARGV[1]) then return 0 end
if redis.call('HLEN', K_TASKS) > 0 then
  local _, _, ident = parse_meta(redis.call('HGET', K_META, ARGV[1]))
  local id, rec = rec_of_delivery(ARGV[1], ident)
  if rec and flag(rec, 'c') then return {'c', id} end
end
redis.call('ZADD', K_PROC, 'XX', fmt(now() + tonumber(ARGV[2]) / 1000), ARGV[1])
return 1
