-- switchyard RedisEventStore: put one run at the end of its log's line of waiting runs, in one
-- indivisible step (guarantee line.order, ADR 0394): refuse an id already waiting, refuse a full
-- line, else append and answer the place.
--
-- The line is one LIST and nothing else, so there is no second key to keep in step with it
-- (an evicted or hand-deleted companion index would refuse runs that do not wait, or let one in
-- twice). Membership is therefore a scan of the line, which MAX_LINE bounds. The scan stays
-- cheap: an entry is decoded only when its text holds the run id as a JSON string (ARGV 2, the
-- same encoding the entry was written with), so for distinct ids it is one plain substring
-- search per entry; the decode then rules out a match elsewhere in the entry.
--
-- KEYS: 1 line (LIST of QueuedRun JSON, the head first)
-- ARGV: 1 run_id  2 run_id as a JSON string (with its quotes)  3 entry (the QueuedRun JSON)
--       4 the most entries a line holds (MAX_LINE)
-- Returns {1, place} when pushed: the line's new length, 1 for the head,
--         {0} when run_id is waiting already (nothing written),
--         {2, length} when the line holds the most entries already (nothing written),
--         {-2, index} when entry index (0-based) holds the run id's text but does not decode
--                     to an entry with a string run_id, so membership is unknown (nothing
--                     written).

local line, run_id, needle, entry = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local max = tonumber(ARGV[4])

local entries = redis.call('LRANGE', line, 0, -1)
for i, text in ipairs(entries) do
  if string.find(text, needle, 1, true) then
    local ok, decoded = pcall(cjson.decode, text)
    if not ok or type(decoded) ~= 'table' or type(decoded['run_id']) ~= 'string' then
      return {-2, i - 1}
    end
    if decoded['run_id'] == run_id then
      return {0}
    end
  end
end
if #entries >= max then
  return {2, #entries}
end
return {1, redis.call('RPUSH', line, entry)}
