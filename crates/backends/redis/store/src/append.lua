-- switchyard RedisEventStore: stamp and write one batch of events atomically.
--
-- Used by `append` (EVALSHA, unguarded), by `append_if_open` (EVALSHA, guard 'open': the run's
-- status is checked in the same script, ADR 0365) and by both claims (EVALSHA inside
-- WATCH/MULTI/EXEC, guarded). A plain append (no guard but 'open', no lifecycle event, no
-- open-run change) takes a short path with fewer calls; everything else takes the general one
-- (ADR 0331).
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
--   guard        '' | 'log' | 'run' | 'open' (write only while the run is open)
--   guard_len    expected LLEN of the log ('log') or of the run ('run'); unused otherwise
--   guard_mark   expected openlen value ('log' only; '' = key absent)
--   n_add, ids…  runs to add to the open SET (claim reconciliation)
--   n_rem, ids…  runs to remove from it
--   new_mark     '' = leave openlen, else the value to set before writing
--   n            events, then per event: flag (0 plain, 1 opens, 2 closes), p1, p2, p3
--                the stored JSON is p1 .. seq .. p2 .. ts .. p3
-- Returns {1, first_seq, ts} when written (or already written by this op); with guard 'open',
--         {1, first_seq, ts, status}, status being the run's open status before the batch
--         ('running', 'paused' or 'waiting_human'; a resent call gets the first one's),
--         {0} when the guard failed (nothing written),
--         {2, status} when guard 'open' found the run not open: 'pending', 'completed', 'failed'
--                     or 'cancelled' (nothing written),
--         {-1, key_index, type} when a key has a foreign type (nothing written),
--         {-2, key_index, entry} when entry (0-based) of that LIST, read to fold the run's
--                     status, is not an event (nothing written).

local format = string.format

local function foreign(i)
  return {-1, i, redis.call('TYPE', KEYS[i])['ok']}
end

-- The receipt "{seq} {ts}" of the op as the script's reply; under guard 'open' it is
-- "{seq} {ts} {status}" (the run's status before the batch), so a resent call gets exactly the
-- first call's answer. A ts holds no space.
local function receipt(done)
  local sp = string.find(done, ' ', 1, true)
  local seq = tonumber(string.sub(done, 1, sp - 1))
  local rest = string.sub(done, sp + 1)
  local sp2 = string.find(rest, ' ', 1, true)
  if not sp2 then return {1, seq, rest} end
  return {1, seq, string.sub(rest, 1, sp2 - 1), string.sub(rest, sp2 + 1)}
end

-- The receipt of a write: see `receipt`.
local function receipt_of(first, ts, status)
  if status then return first .. ' ' .. ts .. ' ' .. status end
  return first .. ' ' .. ts
end

-- The server's TIME as RFC 3339 UTC text with microseconds (none when they are zero).
local function now()
  local t = redis.call('TIME')
  local sec = tonumber(t[1])
  local usec = tonumber(t[2])
  -- Days to civil date (H. Hinnant), exact in doubles for any real date. `x - x % d` is d times
  -- the floor of x / d, without a call into the math library.
  local rem = sec % 86400
  local z = (sec - rem) / 86400 + 719468
  local doe = z % 146097
  local era = (z - doe) / 146097
  local a = (doe - doe % 1460) / 1460 - (doe - doe % 36524) / 36524 + (doe - doe % 146096) / 146096
  local b = doe - a
  local yoe = (b - b % 365) / 365
  local y = yoe + era * 400
  local doy = doe - (365 * yoe + (yoe - yoe % 4) / 4 - (yoe - yoe % 100) / 100)
  local c = 5 * doy + 2
  local mp = (c - c % 153) / 153
  local e = 153 * mp + 2
  local d = doy - (e - e % 5) / 5 + 1
  local m
  if mp < 10 then m = mp + 3 else m = mp - 9 end
  if m <= 2 then y = y + 1 end
  local ss = rem % 60
  local mm = (rem % 3600 - ss) / 60
  local hh = (rem - rem % 3600) / 3600
  if usec ~= 0 then
    return format('%04d-%02d-%02dT%02d:%02d:%02d.%06dZ', y, m, d, hh, mm, ss, usec)
  end
  return format('%04d-%02d-%02dT%02d:%02d:%02dZ', y, m, d, hh, mm, ss)
end

-- The status each lifecycle kind sets (core/src/status.rs), and the open ones.
local STATUS = {
  ['run.started'] = 'running', ['run.resumed'] = 'running', ['run.paused'] = 'paused',
  ['run.interrupted'] = 'waiting_human', ['run.completed'] = 'completed',
  ['run.failed'] = 'failed', ['run.cancelled'] = 'cancelled',
}
local OPEN = {running = true, paused = true, waiting_human = true}

-- The kind of a stored event. The seed and this store write the envelope's fields in one order,
-- `{"v":{…},"kind":"…"`, so the prefix names it without decoding the whole event; any other
-- layout is decoded. nil: not an event.
local function kind_of(text)
  local kind = string.match(text, '^{"v":{"major":%d+,"minor":%d+},"kind":"([^"\\]*)"')
  if kind then return kind end
  local ok, event = pcall(cjson.decode, text)
  if ok and type(event) == 'table' and type(event.kind) == 'string' then return event.kind end
  return nil
end

-- The run's status as `run_status` folds it (guard 'open', ADR 0365): the kind of its `life`
-- key, which every writer (the seed too) sets to the run's latest lifecycle event; when that key
-- is missing (evicted) or holds no lifecycle kind, the fold of the run's own LIST, last
-- lifecycle kind winning (ADR 0021). A run with no event at all is pending without a fold.
-- Returns the status, or nil and the error reply.
local function run_status()
  local life = redis.pcall('GET', KEYS[4])
  if type(life) == 'table' then return nil, foreign(4) end
  if life then
    local status = STATUS[kind_of(life) or '']
    if status then return status end
  end
  local len = redis.pcall('LLEN', KEYS[2])
  if type(len) == 'table' then return nil, foreign(2) end
  local status = 'pending'
  if len == 0 then return status end
  local rows = redis.call('LRANGE', KEYS[2], '0', '-1')
  for i = 1, #rows do
    local ok, event = pcall(cjson.decode, rows[i])
    if not ok or type(event) ~= 'table' or type(event.kind) ~= 'string' then
      return nil, {-2, 2, i - 1}
    end
    status = STATUS[event.kind] or status
  end
  return status
end

-- Guard 'open': nil and the run's status when the run is open, else the reply that refuses the
-- call. A call resent after its first run wrote (and perhaps ended the run) finds its receipt
-- instead.
local function refuse_unless_open()
  local status, err = run_status()
  if err then return err end
  if OPEN[status] then return nil, status end
  local done = redis.call('GET', KEYS[9])
  if done then return receipt(done) end
  return {2, status}
end

-- A plain append: no guard (or 'open', checked first), no open-run changes, no new mark, and
-- only plain events (flag '0'), so the arguments sit at fixed places (new_mark 10, n 11, events
-- from 12). Every call here
-- costs server time, so the type checks ride on the calls the append needs anyway and a foreign
-- type is undone rather than looked for (ADR 0331): seq and openlen are read first (a foreign
-- type fails the read), the receipt is taken with SET NX before anything is written, and a
-- foreign log or run LIST fails its RPUSH, after which what this call pushed and its receipt are
-- removed again. A script runs alone, so no client sees the undone writes.
local plain = (ARGV[5] == '' or ARGV[5] == 'open')
  and ARGV[8] == '0' and ARGV[9] == '0' and ARGV[10] == ''
local n = 0
if plain then
  n = tonumber(ARGV[11])
  plain = n > 0
  for i = 12, 8 + 4 * n, 4 do
    if ARGV[i] ~= '0' then
      plain = false
      break
    end
  end
end
if plain then
  local top = redis.pcall('ZRANGE', KEYS[3], '-1', '-1', 'WITHSCORES')
  if top.err then return foreign(3) end
  local mark = redis.pcall('GET', KEYS[8])
  if type(mark) == 'table' then return foreign(8) end
  local open_status = nil
  if ARGV[5] == 'open' then
    local refused
    refused, open_status = refuse_unless_open()
    if refused then return refused end
  end
  local ts = ARGV[1]
  if ts == '' then ts = now() end
  local first = 0
  if top[2] then first = tonumber(top[2]) + 1 end
  local s = format('%d', first)
  -- A resent call (fred re-sends in-flight commands after a reconnect) finds its receipt and
  -- returns the first result.
  if not redis.call('SET', KEYS[9], receipt_of(s, ts, open_status), 'NX', 'EX', ARGV[4]) then
    return receipt(redis.call('GET', KEYS[9]))
  end
  local len
  if n == 1 then
    local row = ARGV[13] .. s .. ARGV[14] .. ts .. ARGV[15]
    len = redis.pcall('RPUSH', KEYS[1], row)
    if type(len) == 'table' then
      redis.call('DEL', KEYS[9])
      return foreign(1)
    end
    if type(redis.pcall('RPUSH', KEYS[2], row)) == 'table' then
      redis.call('LTRIM', KEYS[1], '0', '-2')
      redis.call('DEL', KEYS[9])
      return foreign(2)
    end
    redis.call('ZADD', KEYS[3], s, s)
  else
    local rows = {}
    local scored = {}
    for i = 0, n - 1 do
      local at = 12 + 4 * i
      if i > 0 then s = format('%d', first + i) end
      rows[i + 1] = ARGV[at + 1] .. s .. ARGV[at + 2] .. ts .. ARGV[at + 3]
      scored[2 * i + 1] = s
      scored[2 * i + 2] = s
    end
    -- One call per key for the whole batch, in slices that fit Lua's stack. Only the first
    -- slice can fail on the key's type; the reply is the last slice's.
    local function batched(cmd, key, items)
      local total = #items
      local reply = redis.pcall(cmd, key, unpack(items, 1, math.min(total, 1000)))
      if type(reply) == 'table' then return reply end
      for from = 1001, total, 1000 do
        reply = redis.call(cmd, key, unpack(items, from, math.min(total, from + 999)))
      end
      return reply
    end
    len = batched('RPUSH', KEYS[1], rows)
    if type(len) == 'table' then
      redis.call('DEL', KEYS[9])
      return foreign(1)
    end
    if type(batched('RPUSH', KEYS[2], rows)) == 'table' then
      redis.call('LTRIM', KEYS[1], '0', format('%d', -n - 1))
      redis.call('DEL', KEYS[9])
      return foreign(2)
    end
    batched('ZADD', KEYS[3], scored)
  end
  -- openlen = how much of the log the open SET accounts for. Only advance it when it was in
  -- step: a writer that does not maintain the SET (the Python seed) leaves it behind, and the
  -- next claim catches up from there.
  local len0 = len - n
  if (mark and tonumber(mark) == len0) or (not mark and len0 == 0) then
    redis.call('SET', KEYS[8], format('%d', len))
  end
  -- open_status is nil without guard 'open', and a nil ends a Lua table: a plain reply.
  return {1, first, ts, open_status}
end

-- Every other call: a claim's guarded write, a lifecycle event, open-run corrections.
local argi = 0
local function nxt()
  argi = argi + 1
  return ARGV[argi]
end

local ts_arg = nxt()
local run_id = nxt()
local member = nxt()
local op_ttl = nxt()
local guard = nxt()
local guard_len = nxt()
local guard_mark = nxt()
local n_add = tonumber(nxt())
local add_at = argi
argi = argi + n_add
local n_rem = tonumber(nxt())
local rem_at = argi
argi = argi + n_rem
local new_mark = nxt()
n = tonumber(nxt())
local ev_at = argi

-- The keys of the run index (life, logruns, runs, open) are only written for lifecycle events and
-- by a claim's reconciliation.
local indexed = n_add > 0 or n_rem > 0
for i = 0, n - 1 do
  if ARGV[ev_at + 1 + 4 * i] ~= '0' then indexed = true end
end

-- A resent call (fred re-sends in-flight commands after a reconnect) returns the first result.
local done = redis.call('GET', KEYS[9])
if done then return receipt(done) end

-- Nothing is written before every key it writes is known to have the type this store writes, so
-- a foreign type cannot leave a half-written batch (a script is not rolled back on error). The
-- reads the script needs anyway are the checks: each fails with WRONGTYPE on a foreign type
-- (ADR 0130). TYPE is only asked to name the type in the reply.
local len0 = redis.pcall('LLEN', KEYS[1])
if type(len0) == 'table' then return foreign(1) end
local run_len = redis.pcall('LLEN', KEYS[2])
if type(run_len) == 'table' then return foreign(2) end
local top = redis.pcall('ZRANGE', KEYS[3], '-1', '-1', 'WITHSCORES')
if top.err then return foreign(3) end
local mark = redis.pcall('GET', KEYS[8])
if type(mark) == 'table' then return foreign(8) end

-- Only then are the run-index keys type-checked (TYPE, as nothing reads them here).
if indexed then
  local want = {'string', 'set', 'set', 'set'}
  for i = 4, 7 do
    local ty = redis.call('TYPE', KEYS[i])['ok']
    if ty ~= 'none' and ty ~= want[i - 3] then
      return {-1, i, ty}
    end
  end
end

-- The run's status before the batch, for the reply of guard 'open' (nil otherwise).
local open_status = nil

-- The EXEC of a claim verifies its own precondition, so a MULTI/EXEC that fred re-sends on a new
-- connection (which lost the WATCH) can never apply on a state the claim did not decide on.
if guard == 'log' then
  if len0 ~= tonumber(guard_len) then return {0} end
  if (mark or '') ~= guard_mark then return {0} end
elseif guard == 'run' then
  if run_len ~= tonumber(guard_len) then return {0} end
elseif guard == 'open' then
  -- The receipt was looked for above, so a refusal here is a first run's.
  local status, err = run_status()
  if err then return err end
  if not OPEN[status] then return {2, status} end
  open_status = status
end

for i = add_at + 1, add_at + n_add do redis.call('SADD', KEYS[7], ARGV[i]) end
for i = rem_at + 1, rem_at + n_rem do redis.call('SREM', KEYS[7], ARGV[i]) end
if new_mark ~= '' then
  redis.call('SET', KEYS[8], new_mark)
  mark = new_mark
end

local in_step = (mark and tonumber(mark) == len0) or (not mark and len0 == 0)

if n == 0 then return {1, 0, ''} end

local ts = ts_arg
if ts == '' then ts = now() end

local first = 0
if top[2] then first = tonumber(top[2]) + 1 end

for i = 0, n - 1 do
  local flag = nxt()
  local p1 = nxt()
  local p2 = nxt()
  local p3 = nxt()
  local s = format('%d', first + i)
  local data = p1 .. s .. p2 .. ts .. p3
  redis.call('RPUSH', KEYS[1], data)
  redis.call('RPUSH', KEYS[2], data)
  redis.call('ZADD', KEYS[3], s, s)
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

if in_step then redis.call('SET', KEYS[8], format('%d', len0 + n)) end
redis.call('SET', KEYS[9], receipt_of(format('%d', first), ts, open_status), 'EX', op_ttl)
return {1, first, ts, open_status}
