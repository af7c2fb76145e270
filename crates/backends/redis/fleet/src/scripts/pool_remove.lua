-- switchyard RedisFleetBackend: pool_remove.
-- Delete an item, its index entry and its claim.
--
-- KEYS: 1 the pool hash, 2 its expiry index, 3 the item's claim key
-- ARGV: id
-- Returns 1 a live item was removed, 0 it was absent or already expired

local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
local existed = redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[3])
if existed == 0 then return 0 end
if score and tonumber(score) ~= -1 and tonumber(score) <= now() then return 0 end
return 1
