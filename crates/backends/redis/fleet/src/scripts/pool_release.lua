-- switchyard RedisFleetBackend: pool_release.
-- Free a claim, only if the token still holds it.
--
-- KEYS: 1 the claim key
-- ARGV: token
-- Returns 1 released, 0 not held by this token

if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
