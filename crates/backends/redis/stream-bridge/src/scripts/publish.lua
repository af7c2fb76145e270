-- switchyard RedisStreamBridge, seed layout: the seed's `XADD key MAXLEN N * f v …` and
-- `EXPIRE key ttl` in one atomic step (a script pipelines with concurrent callers; a MULTI on a
-- shared fred client would drain it).
--
-- KEYS: 1 stream
-- ARGV: 1 MAXLEN  2 TTL seconds (0 = none)  3.. field/value pairs
-- Returns the new entry id.
local args = {'XADD', KEYS[1], 'MAXLEN', ARGV[1], '*'}
for i = 3, #ARGV do args[#args + 1] = ARGV[i] end
local id = redis.call(unpack(args))
local ttl = tonumber(ARGV[2])
if ttl > 0 then redis.call('EXPIRE', KEYS[1], ttl) end
return id
