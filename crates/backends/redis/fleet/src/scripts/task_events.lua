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

local after, max = ARGV[1], tonumber(ARGV[2])
local last = log_pos()
if after == '$' then return {last, 0} end
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
local gap, start = 0, '-'
if after ~= '' then
  if not parts(after) then
    gap = 1
  else
    start = '(' .. after
    local first = redis.call('XRANGE', K_EV, '-', '+', 'COUNT', 1)[1]
    if first then
      -- Events between the cursor and the oldest kept one were trimmed away exactly when the
      -- cursor is older than the event before the oldest kept (which that event names).
      if older(after, first[1]) then
        local before = '0-0'
        local f = first[2]
        for i = 1, #f, 2 do if f[i] == 'p' then before = f[i + 1] end end
        if parts(before) and older(after, before) then gap = 1 end
      end
    elseif older(after, last) then
      -- Every event was trimmed, some after the cursor.
      gap = 1
    end
  end
end
local got = redis.call('XRANGE', K_EV, start, '+', 'COUNT', max)
local cursor = last
if #got > 0 then
  cursor = got[#got][1]
elseif gap == 0 and start ~= '-' and not older(last, after) then
  cursor = after
end
local out = {cursor, gap}
for _, e in ipairs(got) do out[#out + 1] = e end
return out
