-- switchyard RedisFleetBackend: queue_ack (and queue_ack_many).
-- Forget reservations and their progress; one call or a batch (ADR 0141).
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16 the call's op record
--   (ADR 0140)
-- ARGV: op_ttl, receipts
-- Returns one '1' (acked) / '0' (not current) per receipt, as one string

local done = redis.call('GET', K_OP)
if done then return done end
local res, gone = {}, {}
for i = 2, #ARGV do
  if redis.call('ZREM', K_PROC, ARGV[i]) == 1 then
    res[#res + 1] = '1'
    gone[#gone + 1] = ARGV[i]
  else
    res[#res + 1] = '0'
  end
end
local reply = table.concat(res)
if #gone > 0 then
  redis.call('HDEL', K_BODY, unpack(gone))
  redis.call('HDEL', K_META, unpack(gone))
  redis.call('HDEL', K_PROG, unpack(gone))
  record(reply)
end
return reply
