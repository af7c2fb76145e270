-- switchyard RedisEventStore: take one run out of its log's line of waiting runs, in one step
-- (guarantee line.order, ADR 0394).
--
-- Entries are found as line_push.lua finds them: a plain search for the run id as a JSON string,
-- confirmed by a decode. Every entry of the id goes (push lets an id in once, so that is one
-- entry unless the LIST was edited by hand), each by LREM of its exact stored text, read in this
-- same script, so no other writer can change the text in between.
--
-- KEYS: 1 line (LIST of QueuedRun JSON, the head first)
-- ARGV: 1 run_id  2 run_id as a JSON string (with its quotes)
-- Returns {1} when the run was in the line (and is gone), {0} when it was not (nothing written),
--         {-2, index} when entry index (0-based) holds the run id's text but does not decode to
--                     an entry with a string run_id (nothing written).

local line, run_id, needle = KEYS[1], ARGV[1], ARGV[2]

local found = {}
for i, text in ipairs(redis.call('LRANGE', line, 0, -1)) do
  if string.find(text, needle, 1, true) then
    local ok, decoded = pcall(cjson.decode, text)
    if not ok or type(decoded) ~= 'table' or type(decoded['run_id']) ~= 'string' then
      return {-2, i - 1}
    end
    if decoded['run_id'] == run_id then
      found[#found + 1] = text
    end
  end
end
for _, text in ipairs(found) do
  redis.call('LREM', line, 0, text)
end
if #found > 0 then
  return {1}
end
return {0}
