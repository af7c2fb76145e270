-- switchyard RedisFleetBackend: helpers prepended to every script of its own (clock, quoting,
-- task identity, attempt counts, reservation metadata, wake-up tokens), and the first part of the
-- fleet queue library (ADR 0400).
--
-- KEYS: none of its own (each script's header names its KEYS)
-- ARGV: none of its own
-- Returns nothing: defines local functions only

local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local function fmt(x) return string.format('%.6f', x) end
local function quote(s)
  return (string.gsub(s, '[^%w_%.%-~]', function(c) return string.format('%%%02X', string.byte(c)) end))
end
-- The envelope's "id": a non-empty string or an integer; nil for anything else.
local function task_id(body)
  local ok, v = pcall(cjson.decode, body)
  if not ok or type(v) ~= 'table' then return nil end
  local id = v['id']
  if type(id) == 'string' and id ~= '' then return id end
  if type(id) == 'number' and id == math.floor(id) and math.abs(id) < 9007199254740992 then
    return string.format('%d', id)
  end
  return nil
end
-- Attempt counts are kept per task identity: its id, or the body's hash when it has none.
local function identity(body)
  local id = task_id(body)
  if id then return 'i:' .. id, id end
  return 's:' .. redis.sha1hex(body), nil
end
-- Attempt counts of requeued copies, per identity: a space-separated stack, so identical copies
-- keep their own counts (they never collapse) and no entry outlives the copies it describes.
local function take_count(att, ident)
  local stored = redis.call('HGET', att, ident)
  if not stored then return 0 end
  local rest, last = string.match(stored, '^(.-) ?(%d+)$')
  if not last then redis.call('HDEL', att, ident); return 0 end
  if rest == '' then redis.call('HDEL', att, ident) else redis.call('HSET', att, ident, rest) end
  return tonumber(last)
end
local function put_count(att, ident, n)
  local stored = redis.call('HGET', att, ident)
  if stored then redis.call('HSET', att, ident, stored .. ' ' .. n) else redis.call('HSET', att, ident, n) end
end
-- Reservation metadata: tier code, attempt, identity.
local function parse_meta(meta)
  if not meta then return 'n', 0, nil end
  local code, att, ident = string.match(meta, '^(.)|(%d+)|(.*)$')
  if not code then return 'n', 0, nil end
  return code, tonumber(att), ident
end
-- RPUSH/LPUSH a whole Lua list, in chunks (unpack has a stack limit).
local function push_all(cmd, key, list)
  for i = 1, #list, 1000 do
    redis.call(cmd, key, unpack(list, i, math.min(i + 999, #list)))
  end
end
-- Wake-up tokens for blocked reservers, at most 64 waiting (a full list costs one LLEN).
local function wake(key, n)
  if n <= 0 then return end
  local add = math.min(n, 64 - redis.call('LLEN', key))
  if add <= 0 then return end
  local ones = {}
  for i = 1, add do ones[i] = '1' end
  redis.call('LPUSH', key, unpack(ones))
end
