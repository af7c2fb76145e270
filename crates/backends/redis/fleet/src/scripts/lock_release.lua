-- switchyard RedisFleetBackend: lock_release.
-- Free a lock, only if the token still holds it.
--
-- KEYS: 1 the lock
-- ARGV: token
-- Returns 1 released, 0 not held by this token

if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
