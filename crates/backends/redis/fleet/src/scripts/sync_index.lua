-- switchyard RedisFleetBackend: `sync_index(hash, index)`, prepended to pool_size and pool_claim.
-- Rebuilds a pool's expiry index when it disagrees with the hash (items written by the seed,
-- which keeps no index).
--
-- KEYS: none of its own (the caller passes the pool hash and its index)
-- ARGV: none of its own
-- Returns nothing: defines `sync_index` only

local function sync_index(hash, index)
  if redis.call('HLEN', hash) == redis.call('ZCARD', index) then return end
  redis.call('DEL', index)
  local all = redis.call('HGETALL', hash)
  for i = 1, #all, 2 do
    local score = -1
    local ok, item = pcall(cjson.decode, all[i + 1])
    if ok and type(item) == 'table' and type(item['x']) == 'number' then score = item['x'] end
    redis.call('ZADD', index, fmt(score), all[i])
  end
end
