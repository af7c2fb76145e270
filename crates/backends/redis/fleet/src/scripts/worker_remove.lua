-- switchyard RedisFleetBackend: worker_remove.
-- Delete everything of a worker but its generation, history included.
--
-- KEYS: 1 the type's worker set, 2 hardware, 3 config, 4 state, 5 stats, 6 history, [7 the
--   all-workers set: seed layout only]
-- ARGV: worker id, all-set member
-- Returns 1 removed, 0 not registered

if redis.call('SREM', KEYS[1], ARGV[1]) == 0 then return 0 end
if KEYS[7] then redis.call('SREM', KEYS[7], ARGV[2]) end
-- Everything but the generation goes, history included, so a re-registered worker's generation never goes back.
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
return 1
