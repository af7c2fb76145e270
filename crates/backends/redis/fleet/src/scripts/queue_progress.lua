-- switchyard RedisFleetBackend: queue_progress.
-- Store a progress document on a current delivery, replacing the last one, unless a cancel
-- reached its task.
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140)
-- ARGV: op_ttl, receipt, document
-- Returns 1 stored (or re-send of a store), 0 receipt not current, {'c', id} a cancel reached
--   the delivery's task: nothing written (ADR 0380)

if redis.call('EXISTS', K_OP) == 1 then return 1 end
if not redis.call('ZSCORE', K_PROC, ARGV[2]) then return 0 end
if redis.call('HLEN', K_TASKS) > 0 then
  local _, _, ident = parse_meta(redis.call('HGET', K_META, ARGV[2]))
  local id, rec = rec_of_delivery(ARGV[2], ident)
  if rec and flag(rec, 'c') then return {'c', id} end
  -- The record learns that its delivery has progress, which its end keeps.
  if rec and not flag(rec, 'd') then rec.flags = rec.flags .. 'd'; rec_put(id, rec) end
end
redis.call('HSET', K_PROG, ARGV[2], ARGV[3])
record('1')
return 1
