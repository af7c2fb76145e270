-- switchyard RedisFleetBackend: task_events.
-- Read the end-event log after a cursor (ADR 0380, section 6); changes nothing. A cursor older
-- than what the trims removed, or malformed, reads from the oldest kept event with `gap`.
--
-- KEYS: the queue's keys (see queue_locals.lua): 1 high, 2 normal, 3 low, 4 processing,
--   5 processing:body, 6 processing:meta, 7 scheduled, 8 scheduled:body, 9 attempts, 10 dead,
--   11 wake, 12 scheduled:own, 13 progress, 14 paused, 15 rate, 16-27 the task keys (ADR 0380,
--   see queue_locals.lua), 28 the call's op record (ADR 0140; unused)
-- ARGV: after ('' the oldest kept, '$' the log's end, else a stream entry id), max
-- Returns {cursor, gap (0/1), then the entries as XRANGE gives them: {id, {field, value, ...}}}

local after, max = ARGV[1], tonumber(ARGV[2])
local last, deleted = log_pos()
if after == '$' then return {last, 0} end
-- An id's two numbers: compared as numbers (a millisecond time fits a double exactly).
local function parts(c)
  local ms, seq = string.match(c, '^(%d+)%-(%d+)$')
  if not ms or #ms > 15 or #seq > 15 then return nil end
  return tonumber(ms), tonumber(seq)
end
local gap, start = 0, '-'
if after ~= '' then
  local ams, aseq = parts(after)
  local dms, dseq = parts(deleted)
  if not ams then
    gap = 1
  elseif ams < dms or (ams == dms and aseq < dseq) then
    gap = 1
  else
    start = '(' .. after
  end
end
local got = redis.call('XRANGE', K_EV, start, '+', 'COUNT', max)
local cursor = last
if #got > 0 then
  cursor = got[#got][1]
elseif start ~= '-' then
  cursor = after
end
local out = {cursor, gap}
for _, e in ipairs(got) do out[#out + 1] = e end
return out
