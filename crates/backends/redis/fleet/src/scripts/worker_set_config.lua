-- switchyard RedisFleetBackend: worker_set_config.
-- Compare-and-set the config on its generation.
--
-- KEYS: 1 the type's worker set, 2 config, 3 generation
-- ARGV: worker id, config JSON, expected generation ('' = any)
-- Returns {-1} not registered, {0, current} generation mismatch, {1, new generation}

if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return {-1} end
local g = tonumber(redis.call('GET', KEYS[3]) or '0') or 0
if ARGV[3] ~= '' and tonumber(ARGV[3]) ~= g then return {0, g} end
redis.call('SET', KEYS[2], ARGV[2])
return {1, redis.call('INCR', KEYS[3])}
