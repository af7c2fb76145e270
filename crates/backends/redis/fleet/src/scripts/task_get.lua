-- switchyard RedisFleetBackend: task_get.
-- Read one task record, where its task is now, and the end-event log's position, in one step
-- (ADR 0380); changes nothing.
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140; unused)
-- ARGV: task id
-- Returns {} for no record, else {state, tier code, attempt, max_attempts ('' none), submitted,
--   started ('' none), finished ('' none), cancel requested (0/1), visible_until ('' none), progress,
--   last error, result (each nil when none), foreign (0/1), the log's position}

local id = ARGV[1]
local r = rec_get(id)
if not r then return {} end
local st, foreign, visible, progress = r.st, 0, '', nil
if st == 'running' then
  local d = redis.call('ZSCORE', K_PROC, r.loc)
  if d then
    visible = d
    progress = redis.call('HGET', K_PROG, r.loc)
  else
    -- Our reservation is gone without our step: a seed consumer swept it back to its tier.
    st, foreign = 'waiting', 1
  end
elseif st == 'scheduled' then
  local body = redis.call('HGET', K_TBODY, id)
  if r.loc == 's' and body and not redis.call('ZSCORE', K_SCHED, body) then
    -- A seed consumer drained it into the normal tier.
    st, foreign = 'waiting', 1
  end
end
if st == 'waiting' then
  -- The seed reserves under the task's id.
  local d = redis.call('ZSCORE', K_PROC, id)
  if d then st, foreign, visible = 'running', 1, d end
end
if not progress then progress = redis.call('HGET', K_TPROG, id) end
local last = log_pos()
return {st, r.tier, r.att, r.max, r.sub, r.start, r.fin, flag(r, 'c') and 1 or 0, visible,
  progress or false, redis.call('HGET', K_TERR, id) or false,
  redis.call('HGET', K_TRES, id) or false, foreign, last}
