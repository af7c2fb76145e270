-- switchyard RedisFleetBackend: the ends of recorded tasks (ADR 0380) — the end event, the
-- finished buckets and their trims, dead letters leaving — the part of the fleet queue library
-- (ADR 0400) after task_records.lua.
--
-- KEYS: the queue's keys (see queue_locals.lua)
-- ARGV: none of its own
-- Returns nothing: defines locals and functions only

-- Removes up to `budget` records of finished bucket `z` past its count `n` or its age `ms`,
-- oldest first; how many. `card`: the bucket's size when the caller knows it.
local function trim(z, n, ms, t, budget, card)
  if budget <= 0 then return 0 end
  local gone = {}
  local over = (card or redis.call('ZCARD', z)) - n
  if over > 0 then
    -- Read and removed by rank: about half the server time of a ZPOPMIN, whose reply carries
    -- every score as text.
    local k = math.min(over, budget)
    gone = redis.call('ZRANGE', z, 0, k - 1)
    redis.call('ZREMRANGEBYRANK', z, 0, k - 1)
  end
  if #gone < budget then
    local old = redis.call('ZRANGEBYSCORE', z, '-inf', fmt(t - ms / 1000), 'LIMIT', 0,
      budget - #gone)
    if #old > 0 then
      redis.call('ZREM', z, unpack(old))
      for _, id in ipairs(old) do gone[#gone + 1] = id end
    end
  end
  if #gone > 0 then forget_finished(gone) end
  return #gone
end
-- The last progress of the delivery under `receipt` becomes the record's (none: none).
-- Updates the flags of `r`; the caller writes it.
local function keep_progress(id, receipt, r)
  if flag(r, 'd') then
    local p = redis.call('HGET', K_PROG, receipt)
    if p then
      redis.call('HSET', K_TPROG, id, p)
      if not flag(r, 'g') then r.flags = r.flags .. 'g' end
    end
    unflag(r, 'd')
  elseif flag(r, 'g') then
    redis.call('HDEL', K_TPROG, id)
    unflag(r, 'g')
  end
end
-- A holder's new body (nack, fail) gives the record its `max_attempts` and last error, when it
-- has them.
local function given(id, r, max, err)
  if max and max ~= '' then r.max = max end
  if err and err ~= '' then
    redis.call('HSET', K_TERR, id, string.sub(err, 2))
    if not flag(r, 'e') then r.flags = r.flags .. 'e' end
  end
end

-- `s` cut to at most `n` bytes on a UTF-8 character boundary.
local function cut(s, n)
  if #s <= n then return s end
  while n > 0 do
    local b = string.byte(s, n + 1)
    if b < 128 or b >= 192 then break end
    n = n - 1
  end
  return string.sub(s, 1, n)
end
-- Appends the end event of task `id` to the log: its `state`, attempt `att` and finish time
-- `fin` (strings, as the record holds them: a number passed to a command is formatted again on
-- every call), and `flags` (`e`: its last error rides along); `result` nil for none.
local function append_event(id, att, fin, flags, state, result, ev_n)
  -- Each event names the one before it, so a reader can tell exactly whether a trim removed
  -- events after its cursor (trims do not move Redis 7.0's `max-deleted-entry-id`).
  local p = LAST_EV or (log_pos())
  local err = string.find(flags, 'e', 1, true) and redis.call('HGET', K_TERR, id)
  if not err and not result then
    -- The common end: no table to build and unpack.
    LAST_EV = redis.call('XADD', K_EV, 'MAXLEN', '~', ev_n, '*', 'id', id, 's', state, 'a', att,
      't', fin, 'p', p)
    return
  end
  local ev = {'id', id, 's', state, 'a', att, 't', fin, 'p', p}
  if err then ev[#ev + 1] = 'e'; ev[#ev + 1] = cut(err, 1024) end
  if result then
    ev[#ev + 1] = 'z'; ev[#ev + 1] = tostring(#result)
    if #result <= 1024 then ev[#ev + 1] = 'r'; ev[#ev + 1] = result end
  end
  LAST_EV = redis.call('XADD', K_EV, 'MAXLEN', '~', ev_n, '*', unpack(ev))
end
-- Puts ended records in finished bucket `z` (`zadd`: finished_at, id, ...) and trims it: once
-- it holds more than its count plus 1 % (at most 9), by count then by age, up to 10 records at a
-- time; exact for small counts. A count of 0 keeps none.
local function into_bucket(z, n, ms, t, zadd, ids)
  if n <= 0 then
    forget_finished(ids)
    return
  end
  local kept = KEPT[z]
  local added = redis.call('ZADD', z, unpack(zadd))
  if kept then kept = kept + added else kept = redis.call('ZCARD', z) end
  if kept - n > math.min(9, math.floor(n / 100)) then kept = kept - trim(z, n, ms, t, 10, kept) end
  KEPT[z] = kept
end
-- Ends task `id` (record `r`) in `state` at `t`, in the caller's step: its body goes, the
-- delivery's progress (receipt) moves to the record, the result is stored, the end is counted
-- and appended to the event log, and its finished bucket is trimmed by at most 10.
local function end_task(id, r, state, t, result, receipt)
  r.st = state; r.fin = fmt(t); r.loc = ''
  unflag(r, 'c')
  if receipt then keep_progress(id, receipt, r) end
  rec_put(id, r)
  redis.call('HDEL', K_TBODY, id)
  if result then redis.call('HSET', K_TRES, id, result) end
  redis.call('HINCRBY', K_ENDS, state, '1')
  local ok_n, ok_ms, bad_n, bad_ms, ev_n = retention()
  append_event(id, tostring(r.att), r.fin, r.flags, state, result, ev_n)
  if state == 'dead' then
    -- Dead records live as long as their letter (ADR 0380, section 5).
    redis.call('ZADD', K_DDEAD, r.fin, id)
  elseif state == 'completed' then
    into_bucket(K_DOK, ok_n, ok_ms, t, {r.fin, id}, {id})
  else
    into_bucket(K_DBAD, bad_n, bad_ms, t, {r.fin, id}, {id})
  end
end
-- Ends the deliveries `items` `completed` at `t`: as end_task does for each, with one write per
-- key for all of them (an ack batch's step). Each item is {id, receipt, result or nil, then the
-- running record's fields as rec_split gives them: head, attempt, flags}; no Lua table is built
-- per record, since this is the step every recorded task takes.
local function end_completed(items, t)
  if #items == 0 then return end
  local ok_n, ok_ms, _, _, ev_n = retention()
  local ft = fmt(t)
  local recs, ids, results, zadd = {}, {}, {}, {}
  for _, it in ipairs(items) do
    local id, receipt, result, head, att, flags = it[1], it[2], it[3], it[4], it[5], it[6]
    if flags ~= '' then
      -- As keep_progress, on the flags alone (a delivery flagged `c` ends cancelled instead).
      local r = {flags = flags}
      keep_progress(id, receipt, r)
      flags = r.flags
    end
    if result then results[#results + 1] = id; results[#results + 1] = result end
    append_event(id, att, ft, flags, 'completed', result, ev_n)
    recs[#recs + 1] = id
    recs[#recs + 1] = 'completed|' .. head .. '|' .. ft .. '|' .. flags .. '|'
    ids[#ids + 1] = id
    zadd[#zadd + 1] = ft; zadd[#zadd + 1] = id
  end
  redis.call('HSET', K_TASKS, unpack(recs))
  redis.call('HDEL', K_TBODY, unpack(ids))
  if #results > 0 then redis.call('HSET', K_TRES, unpack(results)) end
  redis.call('HINCRBY', K_ENDS, 'completed', string.format('%d', #items))
  into_bucket(K_DOK, ok_n, ok_ms, t, zadd, ids)
end
-- A dead record whose letter left the dead-letter list by a pop or a clear: `failed`.
local function letter_gone(body, t)
  local id = task_id(body)
  if not id then return end
  local r = rec_get(id)
  if r and r.st == 'dead' then
    redis.call('ZREM', K_DDEAD, id)
    end_task(id, r, 'failed', t)
  end
end
-- A dead record whose letter went back to tier `code`: waiting again, attempts from 0.
local function letter_back(body, code, t)
  local id = task_id(body)
  if not id then return end
  local r = rec_get(id)
  if r and r.st == 'dead' then
    redis.call('ZREM', K_DDEAD, id)
    r.st = 'waiting'; r.tier = code; r.att = 0; r.start = ''; r.fin = ''; r.loc = ''
    unflag(r, 'c')
    if flag(r, 'g') then redis.call('HDEL', K_TPROG, id); unflag(r, 'g') end
    rec_put(id, r)
    redis.call('HSET', K_TBODY, id, body)
  end
end
