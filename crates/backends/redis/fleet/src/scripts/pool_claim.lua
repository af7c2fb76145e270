-- switchyard RedisFleetBackend: pool_claim_any.
-- Prune expired items, then claim the first unclaimed item whose tags match, latest expiry first,
-- items that never expire last.
--
-- KEYS: 1 the pool hash, 2 its expiry index, then (mode 'd') the claim keys of ARGV[6..]
-- ARGV: claim key prefix, where (JSON object), hold_ms, token, mode ('d' = claim keys declared
--   in KEYS, as a cluster needs; '' = built here from the prefix, standalone only), ids
-- Returns {id, raw item, now} or false (nothing claimable)

local function equal(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) ~= 'table' then return a == b end
  for k, v in pairs(a) do if not equal(v, b[k]) then return false end end
  for k, _ in pairs(b) do if a[k] == nil then return false end end
  return true
end
sync_index(KEYS[1], KEYS[2])
local t = now()
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], 0, fmt(t), 'LIMIT', 0, 32)
for _, id in ipairs(gone) do
  redis.call('HDEL', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
end
local declared = nil
if ARGV[5] == 'd' then
  declared = {}
  for i = 6, #ARGV do declared[ARGV[i]] = KEYS[i - 3] end
end
-- An item added after the caller listed the claim keys has none declared: skipped this time.
local function claim_key(id)
  if declared then return declared[id] end
  return ARGV[1] .. quote(id)
end
local where = cjson.decode(ARGV[2])
-- Latest expiry first; items that never expire (score -1) last.
local ids = redis.call('ZREVRANGEBYSCORE', KEYS[2], '+inf', '(' .. fmt(t))
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], -1, -1)) do table.insert(ids, id) end
for _, id in ipairs(ids) do
  local ck = claim_key(id)
  if ck and redis.call('EXISTS', ck) == 0 then
    local raw = redis.call('HGET', KEYS[1], id)
    if raw then
      local ok, item = pcall(cjson.decode, raw)
      if ok and type(item) == 'table' then
        local tags = item['t']
        if type(tags) ~= 'table' then tags = {} end
        local match = true
        for k, v in pairs(where) do
          if not equal(tags[k], v) then match = false; break end
        end
        if match then
          redis.call('SET', ck, ARGV[4], 'PX', ARGV[3])
          return {id, raw, fmt(t)}
        end
      end
    end
  end
end
return false
