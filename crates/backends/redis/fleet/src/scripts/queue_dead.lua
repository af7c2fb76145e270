-- switchyard RedisFleetBackend: queue_dead.
-- Append a body to the dead-letter list.
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16 the call's op record
--   (ADR 0140)
-- ARGV: op_ttl, body
-- Returns 1 applied, 0 re-send of an applied call

if not redis.call('SET', K_OP, '1', 'NX', 'PX', ARGV[1]) then return 0 end
redis.call('RPUSH', K_DEAD, ARGV[2])
return 1
