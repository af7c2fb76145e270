-- switchyard RedisFleetBackend: pool_size.
-- The number of live items (repairs the expiry index first, see sync_index.lua).
--
-- KEYS: 1 the pool hash, 2 its expiry index
-- ARGV: none
-- Returns the number of unexpired items

sync_index(KEYS[1], KEYS[2])
local t = now()
return redis.call('ZCOUNT', KEYS[2], '(' .. fmt(t), '+inf') + redis.call('ZCOUNT', KEYS[2], -1, -1)
