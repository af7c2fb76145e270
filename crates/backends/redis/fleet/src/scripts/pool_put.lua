-- switchyard RedisFleetBackend: pool_put.
-- Write an item with its expiry, index it, and prune a bounded batch of expired items.
--
-- KEYS: 1 the pool hash, 2 its expiry index
-- ARGV: id, the encoded item without its closing `"x": …}` tail, ttl_ms (0 = never)
-- Returns 1

local t = now()
local ttl = tonumber(ARGV[3])
local score, x = -1, 'null'
if ttl > 0 then score = t + ttl / 1000; x = fmt(score) end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. x .. '}')
redis.call('ZADD', KEYS[2], fmt(score), ARGV[1])
-- Prune a bounded batch of expired items through the index, not the whole pool (the seed scanned every item on every put).
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], 0, fmt(t), 'LIMIT', 0, 32)
for _, id in ipairs(gone) do
  redis.call('HDEL', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
end
return 1
