//! The two Lua scripts. Each is atomic like the seed's MULTI blocks, and unlike a MULTI on a
//! shared fred client it pipelines with concurrent callers (a fred transaction drains its client).

/// `KEYS[1]` stream; `ARGV[1]` MAXLEN; `ARGV[2]` TTL seconds (0 = none); `ARGV[3..]` field/value
/// pairs. The seed's `XADD key MAXLEN N * f v …` + `EXPIRE key ttl` in one atomic step.
pub(crate) const PUBLISH: &str = r#"
local args = {'XADD', KEYS[1], 'MAXLEN', ARGV[1], '*'}
for i = 3, #ARGV do args[#args + 1] = ARGV[i] end
local id = redis.call(unpack(args))
local ttl = tonumber(ARGV[2])
if ttl > 0 then redis.call('EXPIRE', KEYS[1], ttl) end
return id
"#;

/// [`PUBLISH`] for the cluster layout: `ARGV[3]` is the run's wake channel (same hash tag, so the
/// same slot), `ARGV[4..]` the field/value pairs; the new id is `SPUBLISH`ed on the channel in the
/// same atomic step, so no subscriber can read the entry before its wake is sent (ADR 0093).
pub(crate) const PUBLISH_WAKE: &str = r#"
local args = {'XADD', KEYS[1], 'MAXLEN', ARGV[1], '*'}
for i = 4, #ARGV do args[#args + 1] = ARGV[i] end
local id = redis.call(unpack(args))
local ttl = tonumber(ARGV[2])
if ttl > 0 then redis.call('EXPIRE', KEYS[1], ttl) end
redis.call('SPUBLISH', ARGV[3], id)
return id
"#;

/// `KEYS[1]` stream; `ARGV[1]` the id to read after; `ARGV[2]` COUNT; `ARGV[3]` `1` to report
/// `entries-added` (only cursor-less subscribers not yet given anything need it).
///
/// The seed's snapshot (`XRANGE - + COUNT 1`, `XREVRANGE + - COUNT 1`, `XREAD COUNT n STREAMS key
/// id`) plus `XLEN` and `XINFO STREAM`'s `entries-added` (Redis ≥ 7.0; -1 before), which tell a
/// cursor-less subscriber whether anything it was owed has been trimmed. Returns `{0, added}` for a
/// missing or empty stream, else `{1, first, last, last_fields, added, len, entries}`.
pub(crate) const SNAPSHOT: &str = r#"
local key = KEYS[1]
local function added()
  if ARGV[3] ~= '1' then return -1 end
  local ok, info = pcall(redis.call, 'XINFO', 'STREAM', key)
  if not ok then return -1 end
  for i = 1, #info, 2 do
    if info[i] == 'entries-added' then return info[i + 1] end
  end
  return -1
end
if redis.call('EXISTS', key) == 0 then return {0, 0} end
local first = redis.call('XRANGE', key, '-', '+', 'COUNT', 1)
if #first == 0 then return {0, added()} end
local last = redis.call('XREVRANGE', key, '+', '-', 'COUNT', 1)
local read = redis.call('XREAD', 'COUNT', ARGV[2], 'STREAMS', key, ARGV[1])
local entries = {}
if read then entries = read[1][2] end
return {1, first[1][1], last[1][1], last[1][2], added(), redis.call('XLEN', key), entries}
"#;
