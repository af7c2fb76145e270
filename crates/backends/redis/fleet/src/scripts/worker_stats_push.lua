-- switchyard RedisFleetBackend: worker_stats_push.
-- Add a stats frame to a registered worker's history, trimmed by length.
--
-- KEYS: 1 the type's worker set, 2 the history
-- ARGV: worker id, ts, frame JSON, max_entries (0 = none)
-- Returns 1 written, 0 not registered

if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
local max = tonumber(ARGV[4])
if max > 0 then redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(max + 1)) end
return 1
