-- switchyard RedisFleetBackend: lock_extend.
-- Extend a lock's hold, only if the token still holds it.
--
-- KEYS: 1 the lock
-- ARGV: token, hold_ms
-- Returns 1 extended, 0 not held by this token

if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
