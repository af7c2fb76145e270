-- switchyard RedisFleetBackend: queue_reserve (and queue_reserve_many).
-- Move due scheduled tasks back to their tiers, then reserve up to one task per reserving call
-- (high, normal, low), counting the attempt; one call or a batch (ADR 0141). Nothing while the
-- queue is paused; no more tasks than the rate limit's whole tokens (ADR 0285).
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16 the call's op record
--   (ADR 0140)
-- ARGV: op_ttl, then (receipt, visibility_ms) per reserving call; receipts are filled in order
-- Returns {reserved, wait_ms|-1, then per reserved receipt: body, tier, attempt, deadline};
--   wait_ms (when fewer were reserved than asked) is how long until a scheduled task is due or,
--   when tasks wait but the rate limit has no token, until the next token; -1 for neither (or
--   paused: resume wakes the waiters);
--   tier '' marks a reservation gone before its re-send (it lapsed and was swept: the task is
--   back in its tier)

local done = redis.call('GET', K_OP)
if done then
  local out = {tonumber(done), -1}
  for i = 1, tonumber(done) do
    local r = ARGV[2 * i]
    local body = redis.call('HGET', K_BODY, r)
    if body then
      local code, attempt = parse_meta(redis.call('HGET', K_META, r))
      local deadline = redis.call('ZSCORE', K_PROC, r) or '0'
      out[#out + 1] = body; out[#out + 1] = code; out[#out + 1] = attempt; out[#out + 1] = deadline
    else
      out[#out + 1] = ''; out[#out + 1] = ''; out[#out + 1] = 0; out[#out + 1] = '0'
    end
  end
  return out
end
local t = now()
if redis.call('EXISTS', K_PAUSED) == 1 then return {0, -1} end
move_due(t)
local asked = math.floor((#ARGV - 1) / 2)
local want = asked
local whole, tokens, max, per = bucket(t)
if whole and whole < want then want = whole end
-- Counts exist only for requeued copies; with none stored no body needs decoding.
local counted = redis.call('HLEN', K_ATT) > 0
local out = {0, -1}
local zadd, bodies, metas = {}, {}, {}
local n = 0
for _, code in ipairs({'h', 'n', 'l'}) do
  if n >= want then break end
  local got = redis.call('LPOP', K_TIER[code], want - n)
  if got then
    for _, body in ipairs(got) do
      n = n + 1
      local r = ARGV[2 * n]
      local attempt, ident = 1, ''
      if counted then
        ident = identity(body)
        attempt = take_count(K_ATT, ident) + 1
      end
      local deadline = fmt(t + tonumber(ARGV[2 * n + 1]) / 1000)
      zadd[#zadd + 1] = deadline; zadd[#zadd + 1] = r
      bodies[#bodies + 1] = r; bodies[#bodies + 1] = body
      metas[#metas + 1] = r; metas[#metas + 1] = code .. '|' .. attempt .. '|' .. ident
      out[#out + 1] = body; out[#out + 1] = code; out[#out + 1] = attempt; out[#out + 1] = deadline
    end
  end
end
out[1] = n
if n > 0 then
  redis.call('ZADD', K_PROC, unpack(zadd))
  redis.call('HSET', K_BODY, unpack(bodies))
  redis.call('HSET', K_META, unpack(metas))
  record(n)
end
if whole then
  redis.call('HSET', K_RATE, 'tokens', string.format('%.17g', tokens - n), 'at', fmt(t))
end
if n < asked then
  local wait = next_due_ms(t)
  if n == want and n < asked and whole then
    -- Stopped by the bucket: tasks may be waiting for the next token.
    local waiting = redis.call('LLEN', K_TIER.h) + redis.call('LLEN', K_TIER.n) + redis.call('LLEN', K_TIER.l)
    if waiting > 0 then
      local tw = token_wait_ms(tokens - n, max, per)
      if not wait or tw < wait then wait = tw end
    end
  end
  if wait then out[2] = wait end
end
return out
