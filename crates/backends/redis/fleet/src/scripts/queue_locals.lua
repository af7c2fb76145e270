-- switchyard RedisFleetBackend: names for the queue KEYS and the queue's shared steps (delayed
-- tasks, due moves, the token bucket), prepended to every queue script.
--
-- KEYS: 1 high, 2 normal, 3 low, 4 processing, 5 processing:body, 6 processing:meta,
--   7 scheduled, 8 scheduled:body, 9 attempts, 10 dead, 11 wake, 12 scheduled:own, 13 progress,
--   14 paused, 15 rate, 16 the call's op record
-- ARGV: 1 op_ttl (ms the op record lives) in the scripts that call `record`
-- Returns nothing: defines locals and functions only

local K_TIER = {h = KEYS[1], n = KEYS[2], l = KEYS[3]}
local K_PROC, K_BODY, K_META = KEYS[4], KEYS[5], KEYS[6]
local K_SCHED, K_SBODY, K_ATT, K_DEAD, K_WAKE = KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11]
local K_OWN, K_PROG, K_PAUSED, K_RATE = KEYS[12], KEYS[13], KEYS[14], KEYS[15]
local K_OP = KEYS[16]
local function record(v) redis.call('SET', K_OP, v, 'PX', ARGV[1]) end

-- Schedules `body` for tier `code` at server time `at` (ADR 0286). The seed's form first: the
-- body itself is the member, which a fleet-framework consumer drains into the normal tier. A
-- task of another tier, or a body already scheduled (a member holds one copy), waits in our own
-- set under `{tier}:{token}` with its body beside it; `token` is unique per call and copy.
local function schedule(code, body, at, token)
  if code == 'n' and not redis.call('ZSCORE', K_SCHED, body) then
    redis.call('ZADD', K_SCHED, fmt(at), body)
  else
    local m = code .. ':' .. token
    redis.call('ZADD', K_OWN, fmt(at), m)
    redis.call('HSET', K_SBODY, m, body)
  end
  -- A waiting reserver recomputes its wait against the new due time.
  wake(K_WAKE, 1)
end

-- Moves due scheduled tasks, in due order and at most `limit` per set, to the end of their
-- tiers: the one move of due tasks, run by the reserve (before it pops) and by queue_promote.
-- Returns how many moved, and whether a set gave `limit` members (more may be due).
local function move_due(t, limit)
  local moved = 0
  local due = redis.call('ZRANGEBYSCORE', K_SCHED, '-inf', fmt(t), 'LIMIT', 0, limit)
  for _, m in ipairs(due) do
    redis.call('ZREM', K_SCHED, m)
    -- Members written before ADR 0286 are `{tier}:{receipt}` with the body in the hash.
    local body = redis.call('HGET', K_SBODY, m)
    if body then
      redis.call('HDEL', K_SBODY, m)
      redis.call('RPUSH', K_TIER[string.sub(m, 1, 1)] or K_TIER.n, body)
    else
      redis.call('RPUSH', K_TIER.n, m)
    end
    moved = moved + 1
  end
  local own = redis.call('ZRANGEBYSCORE', K_OWN, '-inf', fmt(t), 'LIMIT', 0, limit)
  for _, m in ipairs(own) do
    redis.call('ZREM', K_OWN, m)
    -- A member without its body has nothing to deliver: it is only cleaned.
    local body = redis.call('HGET', K_SBODY, m)
    if body then
      redis.call('HDEL', K_SBODY, m)
      redis.call('RPUSH', K_TIER[string.sub(m, 1, 1)] or K_TIER.n, body)
      moved = moved + 1
    end
  end
  return moved, #due == limit or #own == limit
end

-- Milliseconds until the next scheduled task is due; nil when none is scheduled.
local function next_due_ms(t)
  local best
  for _, k in ipairs({K_SCHED, K_OWN}) do
    local nxt = redis.call('ZRANGE', k, 0, 0, 'WITHSCORES')
    if nxt[2] then
      local s = tonumber(nxt[2])
      if not best or s < best then best = s end
    end
  end
  if not best then return nil end
  return math.max(0, math.floor((best - t) * 1000))
end

-- The token bucket at time t (ADR 0285): nil without a limit, else the whole tokens available
-- now, the exact token count, max and per_ms. Tokens refill continuously at max per per_ms.
local function bucket(t)
  local r = redis.call('HMGET', K_RATE, 'max', 'per_ms', 'tokens', 'at')
  local max, per = tonumber(r[1]), tonumber(r[2])
  if not max or not per or max < 1 or per < 1 then return nil end
  local tokens, at = tonumber(r[3]) or max, tonumber(r[4]) or t
  if t > at then tokens = math.min(max, tokens + (t - at) * 1000 * max / per) end
  return math.floor(tokens), tokens, max, per
end

-- Milliseconds until the bucket holds a whole token again (at least 1).
local function token_wait_ms(tokens, max, per)
  return math.max(1, math.ceil((1 - (tokens - math.floor(tokens))) * per / max))
end
