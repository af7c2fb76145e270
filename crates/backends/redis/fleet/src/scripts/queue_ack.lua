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
local recorded = redis.call('HLEN', K_TASKS) > 0
local res, gone, cancelled = {}, {}, {}
local t
for i = first, #ARGV, step do
  local r = ARGV[i]
  if redis.call('ZREM', K_PROC, r) == 1 then
    local out = '1'
    if recorded then
      local _, _, ident = parse_meta(redis.call('HGET', K_META, r))
      local id, rec = rec_of_delivery(r, ident)
      if id then
        t = t or now()
        if flag(rec, 'c') then
          end_task(id, rec, 'cancelled', t, nil, r)
          out = 'c'
          cancelled[#cancelled + 1] = id
        else
          local result
          if paired and string.sub(ARGV[i + 1], 1, 1) == 'r' then result = string.sub(ARGV[i + 1], 2) end
          end_task(id, rec, 'completed', t, result, r)
        end
      end
    end
    res[#res + 1] = out
    gone[#gone + 1] = r
  else
    res[#res + 1] = '0'
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
