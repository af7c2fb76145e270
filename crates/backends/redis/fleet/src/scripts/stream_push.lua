-- switchyard RedisFleetBackend: stream_push.
-- Add an envelope, trim by age and length, and publish the `{name}.emit` event.
--
-- KEYS: 1 the stream
-- ARGV: envelope, score, max_len (0 = none), ttl_ms (0 = none), channel
-- Returns 1

redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. string.format('%.17g', tonumber(ARGV[2]) - ttl / 1000))
end
local max = tonumber(ARGV[3])
if max > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(max + 1)) end
redis.call('PUBLISH', ARGV[5], ARGV[2])
return 1
