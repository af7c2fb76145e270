-- switchyard RedisFleetBackend: queue_reserve (and queue_reserve_many).
-- Move due scheduled tasks back to their tiers, then reserve up to one task per reserving call
-- (high, normal, low), counting the attempt; one call or a batch (ADR 0141). Nothing while the
-- queue is paused; no more tasks than the rate limit's whole tokens (ADR 0285).
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140)
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
move_due(t, 256)
local asked = math.floor((#ARGV - 1) / 2)
local want = asked
local whole, tokens, max, per = bucket(t)
if whole and whole < want then want = whole end
-- Counts exist only for requeued copies; with none stored no body needs decoding.
local counted = redis.call('HLEN', K_ATT) > 0
-- Likewise records (ADR 0380): a queue that has none decodes nothing for them.
local recorded = redis.call('HLEN', K_TASKS) > 0
local rids, ratt, rloc = {}, {}, {}
local out = {0, -1}
-- Per task only what differs: one deadline string per visibility asked, one metadata string
-- per tier while no count is stored (ADR 0335).
local zadd, bodies, metas, deadlines = {}, {}, {}, {}
local n = 0
for _, code in ipairs({'h', 'n', 'l'}) do
  if n >= want then break end
  local got = redis.call('LPOP', K_TIER[code], string.format('%d', want - n))
  if got then
    local fresh = code .. '|1|'
    for _, body in ipairs(got) do
      n = n + 1
      local r, vis = ARGV[2 * n], ARGV[2 * n + 1]
      local attempt, meta = 1, fresh
      local id
      if counted then
        local ident
        ident, id = identity(body)
        attempt = take_count(K_ATT, ident) + 1
        meta = code .. '|' .. attempt .. '|' .. ident
      elseif recorded then
        id = task_id(body)
      end
      if recorded and id then
        -- The record is found again from the receipt through the identity (ADR 0063's form);
        -- the records of the batch are read and written once, below.
        -- (A first attempt takes the tier's prefix as is: a number joined to a string is
        -- formatted as a float, a cost per task.)
        meta = (attempt == 1 and fresh or code .. '|' .. attempt .. '|') .. 'i:' .. id
        rids[#rids + 1] = id
        ratt[#rids] = attempt == 1 and '1' or string.format('%d', attempt)
        rloc[#rids] = r
      end
      local deadline = deadlines[vis]
      if not deadline then
        deadline = fmt(t + tonumber(vis) / 1000)
        deadlines[vis] = deadline
      end
      local k = 2 * n
      zadd[k - 1] = deadline; zadd[k] = r
      bodies[k - 1] = r; bodies[k] = body
      metas[k - 1] = r; metas[k] = meta
      k = 2 * k
      out[k - 1] = body; out[k] = code; out[k + 1] = attempt; out[k + 2] = deadline
    end
  end
end
out[1] = n
if #rids > 0 then
  local recs = redis.call('HMGET', K_TASKS, unpack(rids))
  local started = fmt(t)
  local put = {}
  for j, id in ipairs(rids) do
    -- The record rewritten running from its split fields, without a table (every recorded
    -- task takes this step): state, tier, max_attempts and submitted, finished, flags.
    local st, tier, kept, fin, flags
    if recs[j] then
      st, tier, kept, fin, flags = string.match(recs[j],
        '^([^|]*)|([^|]*)|[^|]*|([^|]*|[^|]*)|[^|]*|([^|]*)|([^|]*)|')
    end
    if st and not ENDS[st] then
      if string.find(flags, 'd', 1, true) then flags = string.gsub(flags, 'd', '') end
      put[#put + 1] = id
      put[#put + 1] = 'running|' .. tier .. '|' .. ratt[j] .. '|' .. kept .. '|' .. started .. '|'
        .. fin .. '|' .. flags .. '|' .. rloc[j]
    end
  end
  if #put > 0 then redis.call('HSET', K_TASKS, unpack(put)) end
end
if n > 0 then
  -- Small sets are listpacks, where every member or field added is looked for by a scan (and
  -- each score passed in the sorted set parsed again): a batch costs the square of its size. A
  -- first member or field longer than any listpack holds makes Redis store the key as a
  -- skiplist or hash table, which it keeps once the placeholder is removed (ADR 0335). The three
  -- keys hold one entry per reservation, so one count decides for all three.
  local wide = n + redis.call('ZCARD', K_PROC) >= WIDE_AT
  if wide then
    redis.call('ZADD', K_PROC, 0, WIDE, unpack(zadd))
    redis.call('ZREM', K_PROC, WIDE)
  else
    redis.call('ZADD', K_PROC, unpack(zadd))
  end
  hset_as(K_BODY, bodies, wide)
  hset_as(K_META, metas, wide)
  record(string.format('%d', n))
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
