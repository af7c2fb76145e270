-- switchyard RedisStreamBridge, cluster layout: publish.lua plus an `SPUBLISH` of the new id on
-- the run's wake channel (same hash tag, so the same slot) in the same atomic step, so no
-- subscriber can read the entry before its wake-up is sent (ADR 0093).
--
-- KEYS: 1 stream
-- ARGV: 1 MAXLEN  2 TTL seconds (0 = none)  3 wake channel  4.. field/value pairs
-- Returns the new entry id.
local args = {'XADD', KEYS[1], 'MAXLEN', ARGV[1], '*'}
for i = 4, #ARGV do args[#args + 1] = ARGV[i] end
local id = redis.call(unpack(args))
local ttl = tonumber(ARGV[2])
if ttl > 0 then redis.call('EXPIRE', KEYS[1], ttl) end
redis.call('SPUBLISH', ARGV[3], id)
return id
