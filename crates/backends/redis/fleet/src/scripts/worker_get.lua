-- switchyard RedisFleetBackend: worker_get.
-- Every record of a registered worker in one read.
--
-- KEYS: 1 the type's worker set, 2 hardware, 3 config, 4 generation, 5 stats, 6 state hash
-- ARGV: worker id
-- Returns {hardware, config, generation, stats, state, last_seen, last_error, applied_gen}
--   (each possibly false), or false when not registered

if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return false end
return {redis.call('GET', KEYS[2]), redis.call('GET', KEYS[3]), redis.call('GET', KEYS[4]),
        redis.call('GET', KEYS[5]), redis.call('HGET', KEYS[6], 'state'),
        redis.call('HGET', KEYS[6], 'last_seen'), redis.call('HGET', KEYS[6], 'last_error'),
        redis.call('HGET', KEYS[6], 'applied_gen')}
