-- switchyard RedisFleetBackend: stream_trim.
-- Trim a stream by age (the server's clock) and length.
--
-- KEYS: 1 the stream
-- ARGV: max_len (0 = none), ttl_ms (0 = none)
-- Returns 1

local ttl = tonumber(ARGV[2])
if ttl > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. fmt(now() - ttl / 1000))
end
local max = tonumber(ARGV[1])
if max > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(max + 1)) end
return 1
