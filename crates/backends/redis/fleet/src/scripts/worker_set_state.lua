-- switchyard RedisFleetBackend: worker_set_state.
-- Write a registered worker's state fields.
--
-- KEYS: 1 the type's worker set, 2 the state hash
-- ARGV: worker id, state, last_seen, last_error, applied generation ('' = none)
-- Returns 1 written, 0 not registered

if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], 'state', ARGV[2], 'last_seen', ARGV[3], 'last_error', ARGV[4])
if ARGV[5] ~= '' then redis.call('HSET', KEYS[2], 'applied_gen', ARGV[5])
else redis.call('HDEL', KEYS[2], 'applied_gen') end
return 1
