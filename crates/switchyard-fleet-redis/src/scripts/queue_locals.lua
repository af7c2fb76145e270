-- switchyard RedisFleetBackend: names for the queue KEYS, prepended to every queue script.
--
-- KEYS: 1 high, 2 normal, 3 low, 4 processing, 5 processing:body, 6 processing:meta,
--   7 scheduled, 8 scheduled:body, 9 attempts, 10 dead, 11 wake, 12 the call's op record
-- ARGV: 1 op_ttl (ms the op record lives) in the scripts that call `record`
-- Returns nothing: defines locals and `record` only

local K_TIER = {h = KEYS[1], n = KEYS[2], l = KEYS[3]}
local K_PROC, K_BODY, K_META = KEYS[4], KEYS[5], KEYS[6]
local K_SCHED, K_SBODY, K_ATT, K_DEAD, K_WAKE = KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11]
local K_OP = KEYS[12]
local function record(v) redis.call('SET', K_OP, v, 'PX', ARGV[1]) end
