-- switchyard RedisFleetBackend: the call's KEYS and ARGV and the queue's keys by role, the op
-- record, wide writes and the end-event log's position: the part of the fleet queue library
-- (ADR 0400) that every other part and every function uses, after prelude.lua and before
-- task_records.lua, task_ends.lua and queue_schedule.lua.
--
-- KEYS: 1 high, 2 normal, 3 low, 4 processing, 5 processing:body, 6 processing:meta,
--   7 scheduled, 8 scheduled:body, 9 attempts, 10 dead, 11 wake, 12 scheduled:own, 13 progress,
--   14 paused, 15 rate, then the task keys of ADR 0380: 16 tasks, 17 task:body, 18 task:result,
--   19 task:error, 20 task:progress, 21 done:ok, 22 done:bad, 23 done:dead, 24 task:live,
--   25 events, 26 ends, 27 retention; 28 the call's op record
-- ARGV: 1 op_ttl (ms the op record lives) in the functions that call `record`
-- Returns nothing: defines locals and functions only

-- The library's locals outlive the call that sets them: `bind`, which every function of the
-- library calls first, gives each call its KEYS and ARGV, the queue's keys by role, and a fresh
-- start of what the record steps keep for one call (task_records.lua): the retention read, the
-- log's last id and how many records each finished bucket holds.
local KEYS, ARGV
local K_TIER
local K_PROC, K_BODY, K_META
local K_SCHED, K_SBODY, K_ATT, K_DEAD, K_WAKE
local K_OWN, K_PROG, K_PAUSED, K_RATE
local K_TASKS, K_TBODY, K_TRES, K_TERR, K_TPROG
local K_DOK, K_DBAD, K_DDEAD, K_LIVE
local K_EV, K_ENDS, K_RET
local K_OP
local RET, LAST_EV, KEPT
local function bind(keys, args)
  KEYS, ARGV = keys, args
  K_TIER = {h = keys[1], n = keys[2], l = keys[3]}
  K_PROC, K_BODY, K_META = keys[4], keys[5], keys[6]
  K_SCHED, K_SBODY, K_ATT, K_DEAD, K_WAKE = keys[7], keys[8], keys[9], keys[10], keys[11]
  K_OWN, K_PROG, K_PAUSED, K_RATE = keys[12], keys[13], keys[14], keys[15]
  K_TASKS, K_TBODY, K_TRES, K_TERR, K_TPROG = keys[16], keys[17], keys[18], keys[19], keys[20]
  K_DOK, K_DBAD, K_DDEAD, K_LIVE = keys[21], keys[22], keys[23], keys[24]
  K_EV, K_ENDS, K_RET = keys[25], keys[26], keys[27]
  K_OP = keys[28]
  RET, LAST_EV, KEPT = nil, nil, {}
end
local function record(v) redis.call('SET', K_OP, v, 'PX', ARGV[1]) end

-- Entries held at once from which a hash or sorted set that a step fills in batches is written
-- wide (ADR 0335): a quarter of the listpack limit of 128 entries of the shipped redis.conf.
local WIDE_AT = 32
-- Never a member or field of ours or the seed's (receipts are hex, task ids are UTF-8 text),
-- and longer than Redis' default listpack limit of 64 bytes per element: 128 bytes 0xFF (joined
-- from literals: a library's top level runs where `string` cannot be called).
local WIDE16 = '\255\255\255\255\255\255\255\255\255\255\255\255\255\255\255\255'
local WIDE = WIDE16 .. WIDE16 .. WIDE16 .. WIDE16 .. WIDE16 .. WIDE16 .. WIDE16 .. WIDE16
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
