-- switchyard RedisFleetBackend: queue_nack and queue_release.
-- Return a reserved task to its own tier, now or after a delay, keeping its attempt count: the
-- caller's body (nack) or the body as delivered (release). A recorded task becomes waiting or
-- scheduled again; one a cancel reached ends `cancelled` instead, requeued nowhere (ADR 0380).
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140)
-- ARGV: op_ttl, receipt, body (ignored when releasing), delay_ms, mode ('b' the given body,
--   'd' the delivered one), then in mode 'b' the body's max_attempts ('' none) and last error
--   ('' none, else 'e' and the text)
-- Returns 1 returned (or re-send of a return), 0 receipt not current, {'c', id} the task was
--   cancelled and has ended (a re-send answers alike)

local done = redis.call('GET', K_OP)
if done then
  if string.sub(done, 1, 2) == 'c:' then return {'c', string.sub(done, 3)} end
  return 1
end
local rc = ARGV[2]
if redis.call('ZREM', K_PROC, rc) == 0 then return 0 end
local code, attempt, ident = parse_meta(redis.call('HGET', K_META, rc))
local id, rec
if ident and redis.call('HLEN', K_TASKS) > 0 then id, rec = rec_of_delivery(rc, ident) end
if rec and flag(rec, 'c') then
  end_task(id, rec, 'cancelled', now(), nil, rc)
  redis.call('HDEL', K_BODY, rc)
  redis.call('HDEL', K_META, rc)
  redis.call('HDEL', K_PROG, rc)
  record('c:' .. id)
  return {'c', id}
end
local body = ARGV[3]
if ARGV[5] == 'd' then body = redis.call('HGET', K_BODY, rc) or '' end
if rec then keep_progress(id, rc, rec) end
redis.call('HDEL', K_BODY, rc)
redis.call('HDEL', K_META, rc)
redis.call('HDEL', K_PROG, rc)
if not K_TIER[code] then code = 'n' end
if attempt > 0 then put_count(K_ATT, (identity(body)), attempt) end
local delay = tonumber(ARGV[4])
local loc = ''
if delay > 0 then
  loc = schedule(code, body, now() + delay / 1000, rc)
else
  redis.call('RPUSH', K_TIER[code], body)
  wake(K_WAKE, 1)
end
if rec then
  rec.loc = loc
  if delay > 0 then rec.st = 'scheduled' else rec.st = 'waiting' end
  if ARGV[5] == 'b' then given(id, rec, ARGV[6], ARGV[7]) end
  rec_put(id, rec)
  redis.call('HSET', K_TBODY, id, body)
end
record('1')
return 1
