-- switchyard RedisFleetBackend: names for the queue KEYS, the op record, wide writes and the
-- end-event log's position, prepended to every queue script (before the parts it uses:
-- task_records.lua, task_ends.lua, queue_schedule.lua).
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

-- Entries held at once from which a hash or sorted set that a step fills in batches is written
-- wide (ADR 0335): a quarter of the listpack limit of 128 entries of the shipped redis.conf.
local WIDE_AT = 32
-- Never a member or field of ours or the seed's (receipts are hex, task ids are UTF-8 text),
-- and longer than Redis' default listpack limit of 64 bytes per element: 128 bytes 0xFF, built
-- from 16 at a time (every queue script builds it, and `string.rep` appends piece by piece).
local WIDE = string.rep('\255\255\255\255\255\255\255\255\255\255\255\255\255\255\255\255', 8)
-- HSET of the field/value pairs `kv` into `key`, written wide when `wide`: a small hash is a
-- listpack, which every field written or removed is looked for by a scan through all of it. A
-- first field longer than any listpack holds makes Redis convert the key to a hash table, which
-- it keeps once the placeholder is removed (until the key empties; ADRs 0335, 0392).
local function hset_as(key, kv, wide)
  if wide then
    redis.call('HSET', key, WIDE, '', unpack(kv))
    redis.call('HDEL', key, WIDE)
  else
    redis.call('HSET', key, unpack(kv))
  end
end
-- The same, wide once `key` holds `WIDE_AT` fields or more.
local function hset_wide(key, kv)
  hset_as(key, kv, #kv / 2 + redis.call('HLEN', key) >= WIDE_AT)
end

-- The end-event log's last id ('0-0' while it does not exist), and whether it keeps any event.
-- Events leave the log only from its head (the trims of XADD and of task_maintain; nothing
-- deletes one), so while it keeps one its newest is the last id it gave. That entry is read
-- rather than XINFO STREAM, whose reply carries the oldest and the newest entry, each with its
-- inline result: about twice the server time (ADR 0392).
local function log_pos()
  local tail = redis.call('XREVRANGE', K_EV, '+', '-', 'COUNT', '1')[1]
  if tail then return tail[1], true end
  if redis.call('EXISTS', K_EV) == 0 then return '0-0', false end
  -- Every event trimmed away: the stream still holds the last id it gave.
  local info = redis.call('XINFO', 'STREAM', K_EV)
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then return info[i + 1], false end
  end
  return '0-0', false
end
