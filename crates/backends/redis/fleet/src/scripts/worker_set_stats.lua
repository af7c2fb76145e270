-- switchyard RedisFleetBackend: worker_set_stats.
-- Write a registered worker's stats document.
--
-- KEYS: 1 the type's worker set, 2 stats
-- ARGV: worker id, stats JSON
-- Returns 1 written, 0 not registered

if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
return 1
