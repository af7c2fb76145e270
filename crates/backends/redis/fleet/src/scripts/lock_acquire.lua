-- switchyard RedisFleetBackend: lock_acquire.
-- Take a free lock and raise its fencing number.
--
-- KEYS: 1 the lock, 2 its fence counter
-- ARGV: token, hold_ms
-- Returns the new fence, or 0 when the lock is held

if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0
