-- switchyard RedisFleetBackend: pool_list.
-- Every item of a pool with its claim's remaining time.
--
-- KEYS: 1 the pool hash, then (mode 'd') the claim keys of ARGV[3..]
-- ARGV: claim key prefix, mode ('d' = claim keys declared in KEYS, as a cluster needs; '' = built
--   here from the prefix, standalone only), ids
-- Returns {now, then per item: id, raw item, claim PTTL}

local out = {fmt(now())}
local function emit(id, raw, ck)
  table.insert(out, id)
  table.insert(out, raw)
  table.insert(out, redis.call('PTTL', ck))
end
if ARGV[2] == 'd' then
  for i = 3, #ARGV do
    local raw = redis.call('HGET', KEYS[1], ARGV[i])
    if raw then emit(ARGV[i], raw, KEYS[i - 1]) end
  end
else
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do emit(all[i], all[i + 1], ARGV[1] .. quote(all[i])) end
end
return out
