-- switchyard RedisFleetBackend: queue_push.
-- Append pushed bodies to their tiers and wake blocked reservers; one call or a batch of
-- concurrent calls (ADR 0141).
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140)
-- ARGV: op_ttl, then (tier code, body) per pushed body, in call order; or, when a body has a task
--   id (ADR 0380): op_ttl, '#', mode ('e' each body its own call, 'a' all or none: one
--   push_many), then (tier code, body, id ('' none), max_attempts ('' none), last error ('' none,
--   else 'e' and the text)) per body
-- Returns 1 applied, 0 re-send of an applied push; with ids, one character per body: '1' pushed,
--   'x' its id is taken by a live or dead task (nothing of an 'a' call is pushed then, its
--   other bodies answer '-'; a re-send answers the first reply); a completed, failed or
--   cancelled task's record is replaced

if ARGV[2] == '#' then
  local done = redis.call('GET', K_OP)
  if done then return done end
  local all = ARGV[3] == 'a'
  local res, by, seen = {}, {}, {}
  local taken = false
  -- Every id of the call is looked up at once.
  local ids = {}
  for i = 4, #ARGV, 5 do
    if ARGV[i + 2] ~= '' then ids[#ids + 1] = ARGV[i + 2] end
  end
  -- A finished task's record gives its id up (forgotten once the call is sure to push).
  local known, free = {}, {}
  if #ids > 0 then
    local got = redis.call('HMGET', K_TASKS, unpack(ids))
    for j, id in ipairs(ids) do
      if got[j] then
        if rec_free(got[j]) then free[#free + 1] = id else known[id] = true end
      end
    end
  end
  for i = 4, #ARGV, 5 do
    local id = ARGV[i + 2]
    local c = '1'
    if id ~= '' and (seen[id] or known[id]) then
      c = 'x'; taken = true
    end
    if id ~= '' then seen[id] = true end
    res[#res + 1] = c
  end
  if all and taken then
    for i = 1, #res do if res[i] ~= 'x' then res[i] = '-' end end
    return table.concat(res)
  end
  if #free > 0 then forget(free) end
  local t = now()
  local sub = fmt(t)
  local n = 0
  local recs, tbodies = {}, {}
  for i = 4, #ARGV, 5 do
    if res[(i - 4) / 5 + 1] == '1' then
      local code, body, id = ARGV[i], ARGV[i + 1], ARGV[i + 2]
      if not K_TIER[code] then code = 'n' end
      if id ~= '' then
        -- As rec_new, with one write per key for the whole call.
        local err = ARGV[i + 4]
        recs[#recs + 1] = id
        recs[#recs + 1] = 'waiting|' .. code .. '|0|' .. ARGV[i + 3] .. '|' .. sub .. '|||'
          .. (err ~= '' and 'e' or '') .. '|'
        tbodies[#tbodies + 1] = id
        tbodies[#tbodies + 1] = body
        if err ~= '' then redis.call('HSET', K_TERR, id, string.sub(err, 2)) end
      end
      local list = by[code]
      if not list then list = {}; by[code] = list end
      list[#list + 1] = body
      n = n + 1
    end
  end
  if #recs > 0 then
    redis.call('HSET', K_TASKS, unpack(recs))
    -- task:body holds the bodies of all the queue's waiting and running recorded tasks: a
    -- listpack up to `hash-max-listpack-entries` of them (128 in the shipped redis.conf, 512
    -- built in), which every push and every ack would scan.
    hset_wide(K_TBODY, tbodies)
  end
  for _, code in ipairs({'h', 'n', 'l'}) do
    if by[code] then push_all('RPUSH', K_TIER[code], by[code]) end
  end
  wake(K_WAKE, n)
  local reply = table.concat(res)
  if n > 0 then record(reply) end
  return reply
end
if not redis.call('SET', K_OP, '1', 'NX', 'PX', ARGV[1]) then return 0 end
local by = {}
for i = 2, #ARGV, 2 do
  local code = ARGV[i]
  if not K_TIER[code] then code = 'n' end
  local list = by[code]
  if not list then list = {}; by[code] = list end
  list[#list + 1] = ARGV[i + 1]
end
local n = 0
for code, list in pairs(by) do
  push_all('RPUSH', K_TIER[code], list)
  n = n + #list
end
wake(K_WAKE, n)
return 1
