-- switchyard RedisFleetBackend: queue_fail.
-- Remove a reservation and dead-letter the body, atomically.
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16 the call's op record
--   (ADR 0140)
-- ARGV: op_ttl, receipt, body
-- Returns 1 dead-lettered (or re-send), 0 receipt not current

if redis.call('EXISTS', K_OP) == 1 then return 1 end
if redis.call('ZREM', K_PROC, ARGV[2]) == 0 then return 0 end
redis.call('HDEL', K_BODY, ARGV[2])
redis.call('HDEL', K_META, ARGV[2])
redis.call('HDEL', K_PROG, ARGV[2])
redis.call('RPUSH', K_DEAD, ARGV[3])
record('1')
return 1
