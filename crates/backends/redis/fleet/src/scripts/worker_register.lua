-- switchyard RedisFleetBackend: worker_register.
-- Store the hardware document, add the worker to its sets, and start its config (a generation left
-- by a removed worker is bumped).
--
-- KEYS: 1 hardware, 2 config, 3 generation, 4 the type's worker set, [5 the all-workers set: seed
--   layout only]
-- ARGV: hardware JSON, worker id, all-set member
-- Returns 1

redis.call('SET', KEYS[1], ARGV[1])
redis.call('SADD', KEYS[4], ARGV[2])
if KEYS[5] then redis.call('SADD', KEYS[5], ARGV[3]) end
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('SET', KEYS[2], '{}')
  -- A generation left by a removed worker is bumped, never reset, so it never goes back.
  if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('INCR', KEYS[3])
  else redis.call('SET', KEYS[3], '0') end
end
return 1
