-- switchyard RedisFleetBackend: queue_promote_due.
-- Move due scheduled tasks of both sets (the seed's `scheduled`, our `scheduled:own`) to the end
-- of their tiers by the reserve's own step (`move_due`), reserving nothing, and wake as many
-- blocked reservers. Nothing while the queue is paused, as its reserve (ADR 0353). A re-send
-- moves what fell due since: no op record, as the sweep.
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140; unused)
-- ARGV: limit (members taken at most from each set)
-- Returns {moved, more}: more is 1 when a set gave `limit` members (call again), else 0

if redis.call('EXISTS', K_PAUSED) == 1 then return {0, 0} end
local moved, more = move_due(now(), tonumber(ARGV[1]))
wake(K_WAKE, moved)
return {moved, more and 1 or 0}
