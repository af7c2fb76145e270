-- switchyard RedisStreamBridge: a subscriber's atomic snapshot of one stream. The seed's
-- `XRANGE - + COUNT 1`, `XREVRANGE + - COUNT 1` and `XREAD COUNT n STREAMS key id`, plus `XLEN`
-- and `XINFO STREAM`'s `entries-added` (Redis >= 7.0; -1 before), which tell a cursor-less
-- subscriber whether anything it was owed has been trimmed.
--
-- KEYS: 1 stream
-- ARGV: 1 the id to read after  2 COUNT  3 '1' to report entries-added (only cursor-less
--       subscribers not yet given anything need it)
-- Returns {0, added} for a missing or empty stream, else
--         {1, first, last, last_fields, added, len, entries}.
local key = KEYS[1]
local function added()
  if ARGV[3] ~= '1' then return -1 end
  local ok, info = pcall(redis.call, 'XINFO', 'STREAM', key)
  if not ok then return -1 end
  for i = 1, #info, 2 do
    if info[i] == 'entries-added' then return info[i + 1] end
  end
  return -1
end
if redis.call('EXISTS', key) == 0 then return {0, 0} end
local first = redis.call('XRANGE', key, '-', '+', 'COUNT', 1)
if #first == 0 then return {0, added()} end
local last = redis.call('XREVRANGE', key, '+', '-', 'COUNT', 1)
local read = redis.call('XREAD', 'COUNT', ARGV[2], 'STREAMS', key, ARGV[1])
local entries = {}
if read then entries = read[1][2] end
return {1, first[1][1], last[1][1], last[1][2], added(), redis.call('XLEN', key), entries}
