-- switchyard RedisFleetBackend: the queue's shared scheduling steps (delayed tasks, due moves,
-- the token bucket), the last part of the fleet queue library (ADR 0400).
--
-- KEYS: the queue's keys (see queue_locals.lua)
-- ARGV: none of its own
-- Returns nothing: defines locals and functions only

-- Schedules `body` for tier `code` at server time `at` (ADR 0286). The seed's form first: the
-- body itself is the member, which a fleet-framework consumer drains into the normal tier. A
-- task of another tier, or a body already scheduled (a member holds one copy), waits in our own
-- set under `{tier}:{token}` with its body beside it; `token` is unique per call and copy.
-- Returns where it went: `s` (the seed's form) or the member of our own set.
local function schedule(code, body, at, token)
  local loc = 's'
  if code == 'n' and not redis.call('ZSCORE', K_SCHED, body) then
    redis.call('ZADD', K_SCHED, fmt(at), body)
  else
    local m = code .. ':' .. token
    redis.call('ZADD', K_OWN, fmt(at), m)
    redis.call('HSET', K_SBODY, m, body)
    loc = m
  end
  -- A waiting reserver recomputes its wait against the new due time.
  wake(K_WAKE, 1)
  return loc
end

-- A scheduled record whose body moved to its tier: waiting.
local function due_moved(body)
  local id = task_id(body)
  if not id then return end
  local r = rec_get(id)
  if r and r.st == 'scheduled' then
    r.st = 'waiting'; r.loc = ''
    rec_put(id, r)
  end
end

-- Moves due scheduled tasks, in due order and at most `limit` per set, to the end of their
-- tiers: the one move of due tasks, run by the reserve (before it pops) and by queue_promote.
-- Returns how many moved, and whether a set gave `limit` members (more may be due).
local function move_due(t, limit)
  local moved = 0
  local ft, lim = fmt(t), string.format('%d', limit)
  local due = redis.call('ZRANGEBYSCORE', K_SCHED, '-inf', ft, 'LIMIT', '0', lim)
  local own = redis.call('ZRANGEBYSCORE', K_OWN, '-inf', ft, 'LIMIT', '0', lim)
  -- Records are looked for only when something is due (most reserves move nothing).
  local recorded = (#due > 0 or #own > 0) and redis.call('HLEN', K_TASKS) > 0
  for _, m in ipairs(due) do
    redis.call('ZREM', K_SCHED, m)
    -- Members written before ADR 0286 are `{tier}:{receipt}` with the body in the hash.
    local body = redis.call('HGET', K_SBODY, m)
    if body then
      redis.call('HDEL', K_SBODY, m)
      redis.call('RPUSH', K_TIER[string.sub(m, 1, 1)] or K_TIER.n, body)
    else
      body = m
      redis.call('RPUSH', K_TIER.n, m)
    end
    if recorded then due_moved(body) end
    moved = moved + 1
  end
  for _, m in ipairs(own) do
    redis.call('ZREM', K_OWN, m)
    -- A member without its body has nothing to deliver: it is only cleaned.
    local body = redis.call('HGET', K_SBODY, m)
    if body then
      redis.call('HDEL', K_SBODY, m)
      redis.call('RPUSH', K_TIER[string.sub(m, 1, 1)] or K_TIER.n, body)
      if recorded then due_moved(body) end
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
