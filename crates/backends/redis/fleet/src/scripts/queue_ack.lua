-- switchyard RedisFleetBackend: queue_ack (and queue_ack_many, queue_complete).
-- Forget reservations and their progress; one call or a batch (ADR 0141). A delivery of a
-- recorded task ends it `completed` with its result, or `cancelled` when a cancel reached it
-- (ADR 0380).
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140)
-- ARGV: op_ttl, receipts; or, when a result travels: op_ttl, '#', then (receipt, result: '' none,
--   else 'r' and the bytes) per receipt
-- Returns one '1' (acked) / '0' (not current) / 'c' (ended cancelled) per receipt, as one string;
--   with any 'c', the JSON array [that string, the cancelled ids in order] (a re-send answers
--   the first reply)

local done = redis.call('GET', K_OP)
if done then return done end
local first, step = 2, 1
local paired = ARGV[2] == '#'
if paired then first, step = 3, 2 end
local res, gone, at = {}, {}, {}
for i = first, #ARGV, step do
  local r = ARGV[i]
  if redis.call('ZREM', K_PROC, r) == 1 then
    res[#res + 1] = '1'
    gone[#gone + 1] = r
    at[#gone] = i
  else
    res[#res + 1] = '0'
  end
end
local cancelled = {}
if #gone > 0 and redis.call('HLEN', K_TASKS) > 0 then
  -- The records of the batch's deliveries, read and written once for all of them.
  local metas = redis.call('HMGET', K_META, unpack(gone))
  local ids, which = {}, {}
  for k = 1, #gone do
    -- As parse_meta: the identity after the tier code and the attempt, here only a task id's.
    local id = metas[k] and string.match(metas[k], '^.|%d+|i:(.*)$')
    if id then
      ids[#ids + 1] = id
      which[#ids] = k
    end
  end
  if #ids > 0 then
    local recs = redis.call('HMGET', K_TASKS, unpack(ids))
    local t = now()
    local done = {}
    for j, id in ipairs(ids) do
      local k = which[j]
      local r = gone[k]
      local st, head, att, _, flags, loc
      if recs[j] then st, head, att, _, flags, loc = rec_split(recs[j]) end
      if st == 'running' and loc == r then
        if string.find(flags, 'c', 1, true) then
          end_task(id, rec_parse(recs[j]), 'cancelled', t, nil, r)
          res[(at[k] - first) / step + 1] = 'c'
          cancelled[#cancelled + 1] = id
        else
          local result
          local arg = paired and ARGV[at[k] + 1] or ''
          if string.sub(arg, 1, 1) == 'r' then result = string.sub(arg, 2) end
          done[#done + 1] = {id, r, result, head, att, flags}
        end
      end
    end
    end_completed(done, t)
  end
end
local reply = table.concat(res)
if #cancelled > 0 then
  table.insert(cancelled, 1, reply)
  reply = cjson.encode(cancelled)
end
if #gone > 0 then
  redis.call('HDEL', K_BODY, unpack(gone))
  redis.call('HDEL', K_META, unpack(gone))
  redis.call('HDEL', K_PROG, unpack(gone))
  record(reply)
end
return reply
