-- switchyard RedisEventStore: stamp and write one batch of events atomically.
--
-- Used by `append` (EVALSHA, unguarded) and by both claims (inside WATCH/MULTI/EXEC, guarded).
-- Seq is the run's top ZSET score + 1 read here, so concurrent appenders never collide and never
-- retry; every write also touches the log LIST, which invalidates peers' WATCH (ours and the
-- Python seed's).
--
-- KEYS: 1 log  2 run  3 seq  4 life  5 logruns  6 runs  7 open  8 openlen  9 op
-- ARGV (read in order):
--   ts           '' = the server's TIME, else the exact ts text to write (injected clock)
--   run_id       unescaped, as stored in logruns / open
--   member       "{esc(log)}:{esc(run)}" for the namespace's runs SET
--   op_ttl       seconds the op receipt lives (makes a resent call return the first result)
--   guard        '' | 'log' | 'run'
--   guard_len    expected LLEN of the log ('log') or of the run ('run')
--   guard_mark   expected openlen value ('log' only; '' = key absent)
--   n_add, ids…  runs to add to the open SET (claim reconciliation)
--   n_rem, ids…  runs to remove from it
--   new_mark     '' = leave openlen, else the value to set before writing
--   n            events, then per event: flag (0 plain, 1 opens, 2 closes), p1, p2, p3
--                the stored JSON is p1 .. seq .. p2 .. ts .. p3
-- Returns {1, first_seq, ts} when written (or already written by this op),
--         {0} when the guard failed (nothing written),
--         {-1, key_index, type} when a key has a foreign type (nothing written).

local argi = 0
local function nxt()
  argi = argi + 1
  return ARGV[argi]
end

local ts_arg = nxt()
local run_id = nxt()
local member = nxt()
local op_ttl = tonumber(nxt())
local guard = nxt()
local guard_len = nxt()
local guard_mark = nxt()

-- A resent call (fred re-sends in-flight commands after a reconnect) returns the first result.
local done = redis.call('GET', KEYS[9])
if done then
  local sp = string.find(done, ' ', 1, true)
  return {1, tonumber(string.sub(done, 1, sp - 1)), string.sub(done, sp + 1)}
end

-- Nothing is written before every key it writes is known to have the type this store writes, so
-- a foreign type cannot leave a half-written batch (a script is not rolled back on error). The
-- reads the script needs anyway are the checks: each fails with WRONGTYPE on a foreign type
-- (ADR 0130). TYPE is only asked to name the type in the reply.
local function foreign(i)
  return {-1, i, redis.call('TYPE', KEYS[i])['ok']}
end
local len0 = redis.pcall('LLEN', KEYS[1])
if type(len0) == 'table' then return foreign(1) end
local run_len = redis.pcall('LLEN', KEYS[2])
if type(run_len) == 'table' then return foreign(2) end
local top = redis.pcall('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
if top.err then return foreign(3) end
local mark = redis.pcall('GET', KEYS[8])
if type(mark) == 'table' then return foreign(8) end

local n_add = tonumber(nxt())
local add_at = argi
argi = argi + n_add
local n_rem = tonumber(nxt())
local rem_at = argi
argi = argi + n_rem
local new_mark = nxt()
local n = tonumber(nxt())

-- The keys of the run index (life, logruns, runs, open) are only written for lifecycle events and
-- by a claim's reconciliation: only then are they type-checked (TYPE, as nothing reads them here).
local indexed = n_add > 0 or n_rem > 0
for i = 0, n - 1 do
  if ARGV[argi + 1 + 4 * i] ~= '0' then indexed = true end
end
if indexed then
  local want = {'string', 'set', 'set', 'set'}
  for i = 4, 7 do
    local ty = redis.call('TYPE', KEYS[i])['ok']
    if ty ~= 'none' and ty ~= want[i - 3] then
      return {-1, i, ty}
    end
  end
end

-- The EXEC of a claim verifies its own precondition, so a MULTI/EXEC that fred re-sends on a new
-- connection (which lost the WATCH) can never apply on a state the claim did not decide on.
if guard == 'log' then
  if len0 ~= tonumber(guard_len) then return {0} end
  if (mark or '') ~= guard_mark then return {0} end
elseif guard == 'run' then
  if run_len ~= tonumber(guard_len) then return {0} end
end

for i = add_at + 1, add_at + n_add do redis.call('SADD', KEYS[7], ARGV[i]) end
for i = rem_at + 1, rem_at + n_rem do redis.call('SREM', KEYS[7], ARGV[i]) end
if new_mark ~= '' then
  redis.call('SET', KEYS[8], new_mark)
  mark = new_mark
end

-- openlen = how much of the log the open SET accounts for. Only advance it when it was in step:
-- a writer that does not maintain the SET (the Python seed) leaves it behind, and the next claim
-- catches up from there.
local in_step = (mark and tonumber(mark) == len0) or (not mark and len0 == 0)

if n == 0 then return {1, 0, ''} end

local ts = ts_arg
if ts == '' then
  local t = redis.call('TIME')
  local sec = tonumber(t[1])
  local usec = tonumber(t[2])
  local floor = math.floor
  -- days to civil date (H. Hinnant), exact in doubles for any real date.
  local days = floor(sec / 86400)
  local rem = sec - days * 86400
  local z = days + 719468
  local era = floor(z / 146097)
  local doe = z - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
  local y = yoe + era * 400
  local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
  local mp = floor((5 * doy + 2) / 153)
  local d = doy - floor((153 * mp + 2) / 5) + 1
  local m
  if mp < 10 then m = mp + 3 else m = mp - 9 end
  if m <= 2 then y = y + 1 end
  local hh = floor(rem / 3600)
  local mm = floor((rem - hh * 3600) / 60)
  local ss = rem - hh * 3600 - mm * 60
  if usec ~= 0 then
    ts = string.format('%04d-%02d-%02dT%02d:%02d:%02d.%06dZ', y, m, d, hh, mm, ss, usec)
  else
    ts = string.format('%04d-%02d-%02dT%02d:%02d:%02dZ', y, m, d, hh, mm, ss)
  end
end

local first = 0
if top[2] then first = tonumber(top[2]) + 1 end

for i = 0, n - 1 do
  local flag = nxt()
  local p1 = nxt()
  local p2 = nxt()
  local p3 = nxt()
  local s = string.format('%d', first + i)
  local data = p1 .. s .. p2 .. ts .. p3
  redis.call('RPUSH', KEYS[1], data)
  redis.call('RPUSH', KEYS[2], data)
  redis.call('ZADD', KEYS[3], first + i, s)
  if flag ~= '0' then
    redis.call('SET', KEYS[4], data)
    redis.call('SADD', KEYS[5], run_id)
    redis.call('SADD', KEYS[6], member)
    if flag == '1' then
      redis.call('SADD', KEYS[7], run_id)
    else
      redis.call('SREM', KEYS[7], run_id)
    end
  end
end

if in_step then redis.call('SET', KEYS[8], len0 + n) end
redis.call('SET', KEYS[9], string.format('%d', first) .. ' ' .. ts, 'EX', op_ttl)
return {1, first, ts}
