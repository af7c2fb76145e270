-- switchyard RedisFleetBackend: names for the queue KEYS and the queue's shared steps (delayed
-- tasks, due moves, the token bucket), prepended to every queue script.
--
-- KEYS: 1 high, 2 normal, 3 low, 4 processing, 5 processing:body, 6 processing:meta,
--   7 scheduled, 8 scheduled:body, 9 attempts, 10 dead, 11 wake, 12 scheduled:own, 13 progress,
--   14 paused, 15 rate, then the task keys of ADR 0380: 16 tasks, 17 task:body, 18 task:result,
--   19 task:error, 20 task:progress, 21 done:ok, 22 done:bad, 23 done:dead, 24 task:live,
--   25 events, 26 ends, 27 retention; 28 the call's op record
-- ARGV: 1 op_ttl (ms the op record lives) in the scripts that call `record`
-- Returns nothing: defines locals and functions only

local K_TIER = {h = KEYS[1], n = KEYS[2], l = KEYS[3]}
local K_PROC, K_BODY, K_META = KEYS[4], KEYS[5], KEYS[6]
local K_SCHED, K_SBODY, K_ATT, K_DEAD, K_WAKE = KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11]
local K_OWN, K_PROG, K_PAUSED, K_RATE = KEYS[12], KEYS[13], KEYS[14], KEYS[15]
local K_TASKS, K_TBODY, K_TRES, K_TERR, K_TPROG = KEYS[16], KEYS[17], KEYS[18], KEYS[19], KEYS[20]
local K_DOK, K_DBAD, K_DDEAD, K_LIVE = KEYS[21], KEYS[22], KEYS[23], KEYS[24]
local K_EV, K_ENDS, K_RET = KEYS[25], KEYS[26], KEYS[27]
local K_OP = KEYS[28]
local function record(v) redis.call('SET', K_OP, v, 'PX', ARGV[1]) end

-- Task records (ADR 0380). A record is `state|tier|attempt|max|submitted|started|finished|
-- flags|loc` under the task's id; `loc` is our receipt while running, the `scheduled:own`
-- member or `s` (the seed's form, the body itself is the member) while scheduled. `flags` holds
-- `c` cancel requested, `e` a last error is stored, `d` the delivery stored progress, `g` a
-- progress is kept: they spare the ending step the reads and deletes of what is not there.
-- Only bodies submitted with an id have one; a queue without records pays one HLEN per step.
local ENDS = {completed = true, failed = true, dead = true, cancelled = true}
-- The ends whose id a submit may take again (guarantee `task.unique_id`): a dead letter keeps
-- its id until it leaves the dead-letter list.
local FREE = {completed = true, failed = true, cancelled = true}
local function rec_free(s) return FREE[string.match(s, '^[^|]*')] == true end
local function rec_parse(s)
  local st, tier, att, max, sub, start, fin, flags, loc = string.match(s,
    '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
  if not st then return nil end
  return {st = st, tier = tier, att = tonumber(att) or 0, max = max, sub = sub, start = start,
    fin = fin, flags = flags, loc = loc}
end
-- A record's fields for the hot steps (reserve, ack), without a table: state, `head` (tier,
-- attempt, max_attempts, submitted and started, joined by `|` as stored), attempt, finished,
-- flags and loc; nil for a malformed record.
local REC_SPLIT = '^([^|]*)|(([^|]*)|([^|]*)|[^|]*|[^|]*|[^|]*)|([^|]*)|([^|]*)|(.*)$'
local function rec_split(s)
  local st, head, _, att, fin, flags, loc = string.match(s, REC_SPLIT)
  return st, head, att, fin, flags, loc
end
local function rec_get(id)
  local s = redis.call('HGET', K_TASKS, id)
  if not s then return nil end
  return rec_parse(s)
end
local function rec_put(id, r)
  redis.call('HSET', K_TASKS, id, table.concat({r.st, r.tier, r.att, r.max, r.sub, r.start,
    r.fin, r.flags, r.loc}, '|'))
end
local function flag(r, f) return string.find(r.flags, f, 1, true) ~= nil end
local function unflag(r, f) r.flags = string.gsub(r.flags, f, '') end
-- The record of the delivery under receipt `r` whose metadata identity is `ident`: nil unless
-- the identity names a task id whose record is running under this very receipt.
local function rec_of_delivery(r, ident)
  if not ident or string.sub(ident, 1, 2) ~= 'i:' then return nil end
  local id = string.sub(ident, 3)
  local rec = rec_get(id)
  if rec and rec.st == 'running' and rec.loc == r then return id, rec end
  return nil
end
-- A new record (push, submit): `max` '' or digits, `err` '' or 'e' followed by the last error.
local function rec_new(id, code, body, t, max, err, st, loc)
  rec_put(id, {st = st, tier = code, att = 0, max = max, sub = fmt(t), start = '', fin = '',
    flags = (err ~= '' and 'e' or ''), loc = loc})
  redis.call('HSET', K_TBODY, id, body)
  if err ~= '' then redis.call('HSET', K_TERR, id, string.sub(err, 2)) end
end
-- What the ending steps of one script run read once (a batch ends many tasks): the retention,
-- the log's last id, and how many records each finished bucket holds.
local RET, LAST_EV, KEPT = nil, nil, {}
-- The queue's retention (unset fields: the defaults of `Retention::default`).
local function retention()
  if not RET then
    local v = redis.call('HMGET', K_RET, 'ok_n', 'ok_ms', 'bad_n', 'bad_ms', 'ev_n', 'ev_ms')
    RET = {tonumber(v[1]) or 1000, tonumber(v[2]) or 86400000, tonumber(v[3]) or 1000,
      tonumber(v[4]) or 86400000, tonumber(v[5]) or 10000, tonumber(v[6]) or 86400000}
    -- The log's count as text: XADD takes it on every end.
    RET[5] = string.format('%d', RET[5])
  end
  return RET[1], RET[2], RET[3], RET[4], RET[5], RET[6]
end
-- Removes whole records.
local function forget(ids)
  KEPT = {}
  for i = 1, #ids, 500 do
    local part = {unpack(ids, i, math.min(i + 499, #ids))}
    for _, k in ipairs({K_TASKS, K_TBODY, K_TRES, K_TERR, K_TPROG}) do
      redis.call('HDEL', k, unpack(part))
    end
    for _, k in ipairs({K_DOK, K_DBAD, K_DDEAD}) do
      redis.call('ZREM', k, unpack(part))
    end
  end
end
-- Removes finished records that left their bucket (its ZSET already holds them no more): a
-- finished record has no body, liveness or other bucket left to remove.
local function forget_finished(ids)
  for i = 1, #ids, 500 do
    local part = {unpack(ids, i, math.min(i + 499, #ids))}
    for _, k in ipairs({K_TASKS, K_TRES, K_TERR, K_TPROG}) do
      redis.call('HDEL', k, unpack(part))
    end
  end
end
-- Removes up to `budget` records of finished bucket `z` past its count `n` or its age `ms`,
-- oldest first; how many.
local function trim(z, n, ms, t, budget)
  if budget <= 0 then return 0 end
  local gone = {}
  local over = redis.call('ZCARD', z) - n
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
-- The end-event log's last id and the last id its trims removed (Redis 7's
-- `max-deleted-entry-id`); '0-0' for both while it does not exist.
local function log_pos()
  if redis.call('EXISTS', K_EV) == 0 then return '0-0', '0-0' end
  local info = redis.call('XINFO', 'STREAM', K_EV)
  local last, deleted = '0-0', '0-0'
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then last = info[i + 1] end
    if info[i] == 'max-deleted-entry-id' then deleted = info[i + 1] end
  end
  return last, deleted
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
  local p = LAST_EV
  if not p then
    local prev = redis.call('XREVRANGE', K_EV, '+', '-', 'COUNT', 1)[1]
    p = prev and prev[1]
    if not p then p = (log_pos()) end
  end
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
  if kept - n > math.min(9, math.floor(n / 100)) then kept = kept - trim(z, n, ms, t, 10) end
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
  redis.call('HINCRBY', K_ENDS, state, 1)
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
  redis.call('HINCRBY', K_ENDS, 'completed', #items)
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
  local recorded = redis.call('HLEN', K_TASKS) > 0
  local due = redis.call('ZRANGEBYSCORE', K_SCHED, '-inf', fmt(t), 'LIMIT', 0, limit)
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
  local own = redis.call('ZRANGEBYSCORE', K_OWN, '-inf', fmt(t), 'LIMIT', 0, limit)
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

