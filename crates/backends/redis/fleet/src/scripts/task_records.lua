-- switchyard RedisFleetBackend: task records (ADR 0380) — reading, writing and removing them,
-- and the retention — the part of the fleet queue library (ADR 0400) after queue_locals.lua.
--
-- KEYS: the queue's keys (see queue_locals.lua)
-- ARGV: none of its own
-- Returns nothing: defines locals and functions only

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
  hset_wide(K_TBODY, {id, body})
  if err ~= '' then redis.call('HSET', K_TERR, id, string.sub(err, 2)) end
end
-- (RET, LAST_EV and KEPT, what the ending steps of one call read once, are queue_locals.lua's:
-- `bind` starts them afresh on every call.)
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
