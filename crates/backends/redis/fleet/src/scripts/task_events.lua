-- switchyard RedisFleetBackend: task_events.
-- Read the end-event log after a cursor (ADR 0380, section 6); changes nothing. A cursor older
-- than an event the trims removed, or malformed, reads from the oldest kept event with `gap`.
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140; unused)
-- ARGV: after ('' the oldest kept, '$' the log's end, else a stream entry id), max
-- Returns {cursor, gap (0/1), then the entries as XRANGE gives them: {id, {field, value, ...}}}

local after, max = ARGV[1], ARGV[2]
if after == '$' then return {(log_pos()), 0} end
-- An id's two numbers: compared as numbers (a millisecond time fits a double exactly).
local function parts(c)
  local ms, seq = string.match(c, '^(%d+)%-(%d+)$')
  if not ms or #ms > 15 or #seq > 15 then return nil end
  return tonumber(ms), tonumber(seq)
end
local function older(a, b)
  local ams, aseq = parts(a)
  local bms, bseq = parts(b)
  return ams < bms or (ams == bms and aseq < bseq)
end
-- The id an event names as the one before it ('0-0' for none).
local function before(e)
  local f = e[2]
  for i = 1, #f, 2 do if f[i] == 'p' then return f[i + 1] end end
  return '0-0'
end
local function reply(cursor, gap, got)
  local out = {cursor, gap}
  for _, e in ipairs(got) do out[#out + 1] = e end
  return out
end
local got
if after ~= '' and parts(after) then
  got = redis.call('XRANGE', K_EV, '(' .. after, '+', 'COUNT', max)
  -- The common read: the first event after the cursor names the cursor, so no trim removed an
  -- event between them, whatever the log's oldest and last ids.
  if got[1] and before(got[1]) == after then return reply(got[#got][1], 0, got) end
end
local last, kept = log_pos()
local gap, start = 0, '-'
if after ~= '' then
  if not got then
    gap = 1
  else
    start = '(' .. after
    -- Nothing after the cursor while the log keeps events: every kept event is the cursor's or
    -- older, so no trim removed one after it.
    local first = (#got > 0 or not kept) and redis.call('XRANGE', K_EV, '-', '+', 'COUNT', '1')[1]
    if first then
      -- Events between the cursor and the oldest kept one were trimmed away exactly when the
      -- cursor is older than the event before the oldest kept (which that event names).
      if older(after, first[1]) then
        local b = before(first)
        if parts(b) and older(after, b) then gap = 1 end
      end
    elseif not kept and older(after, last) then
      -- Every event was trimmed, some after the cursor.
      gap = 1
    end
  end
end
if start == '-' then got = redis.call('XRANGE', K_EV, '-', '+', 'COUNT', max) end
local cursor = last
if #got > 0 then
  cursor = got[#got][1]
elseif gap == 0 and start ~= '-' and not older(last, after) then
  cursor = after
end
return reply(cursor, gap, got)
