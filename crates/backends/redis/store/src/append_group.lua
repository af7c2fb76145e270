-- switchyard RedisEventStore: several concurrent plain appends in one script call (ADR 0385).
--
-- Each op is what append.lua's short path does for one call (`plain_append` of append_lib.lua):
-- no lifecycle event, guard '' or 'open'. Ops run in order, each on its own keys and its own
-- receipt, so an op's outcome is what its own append.lua call would have had; a refused op
-- (its run not open, a foreign key type) writes nothing of its own and does not stop the others.
-- Every op of one call is stamped with one read of the server's TIME. The ops after the first
-- on a log leave their log rows and its mark waiting in `logs`, written once after the last op
-- (ADR 0399): the log ends as the ops one by one would have left it.
--
-- KEYS: per op, append.lua's KEYS 1-9 (log, run, seq, life, logruns, runs, open, openlen, op):
--       op j's (from 1) at 9 * (j - 1) + 1 ..
-- ARGV: 1 ops, then per op: ts ('' = the server's TIME), op_ttl, guard ('' | 'open'), n, and n
--       events as flag ('0'), p1, p2, p3 (the stored JSON is p1 .. seq .. p2 .. ts .. p3)
-- Returns one reply per op, each as append.lua's: {1, first_seq, ts[, status]}, {2, status},
--         {-1, key_index, type} or {-2, key_index, entry}.

local ops = tonumber(ARGV[1])
local replies = {}
-- The logs the ops wrote, by key, with what waits for them (see plain_append).
local logs, order = {}, {}
local at = 1
for j = 1, ops do
  local base = 9 * (j - 1)
  local K = {}
  for i = 1, 9 do K[i] = KEYS[base + i] end
  local ts_arg, op_ttl, guard, n = ARGV[at + 1], ARGV[at + 2], ARGV[at + 3], tonumber(ARGV[at + 4])
  if not logs[K[1]] then order[#order + 1] = K[1] end
  replies[j] = plain_append(K, ts_arg, op_ttl, guard, n, at + 5, logs)
  at = at + 4 + 4 * n
end
for _, key in ipairs(order) do
  if logs[key] then
    flush_log(key, logs[key])
    logs[key] = nil
  end
end
return replies
