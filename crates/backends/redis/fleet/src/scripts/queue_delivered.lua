-- switchyard RedisFleetBackend: queue_delivered.
-- Read the current delivery of a receipt; changes nothing.
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140)
-- ARGV: receipt
-- Returns {} when the receipt is not current, else {body, tier code, attempt, deadline}

local deadline = redis.call('ZSCORE', K_PROC, ARGV[1])
if not deadline then return {} end
local code, attempt = parse_meta(redis.call('HGET', K_META, ARGV[1]))
if not K_TIER[code] then code = 'n' end
return {redis.call('HGET', K_BODY, ARGV[1]) or '', code, math.max(1, attempt), deadline}
