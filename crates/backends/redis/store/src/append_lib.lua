-- switchyard RedisEventStore: the helpers of append.lua and append_group.lua, composed into
-- each after its own header (the keys of one op, K, are append.lua's KEYS 1-9 in its order).
--
-- KEYS: none of its own (each script's header names its KEYS)
-- ARGV: none of its own
-- Returns nothing: defines local functions only

local format = string.format

-- The reply naming key i of K (an op's keys, in this file's order) as holding a foreign type.
local function foreign(K, i)
  return {-1, i, redis.call('TYPE', K[i])['ok']}
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
local function read_clock()
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
local function run_status(K)
  local life = redis.pcall('GET', K[4])
  if type(life) == 'table' then return nil, foreign(K, 4) end
  if life then
    local status = STATUS[kind_of(life) or '']
    if status then return status end
  end
  local len = redis.pcall('LLEN', K[2])
  if type(len) == 'table' then return nil, foreign(K, 2) end
  local status = 'pending'
  if len == 0 then return status end
  local rows = redis.call('LRANGE', K[2], '0', '-1')
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
local function refuse_unless_open(K)
  local status, err = run_status(K)
  if err then return err end
  if OPEN[status] then return nil, status end
  local done = redis.call('GET', K[9])
  if done then return receipt(done) end
  return {2, status}
end

-- The server's TIME as `read_clock` spells it, read once per script call: every op of a group
-- (append_group.lua) is stamped with the same store time, as if the ops had run in one
-- microsecond.
local clock_text = nil
local function now()
  if not clock_text then clock_text = read_clock() end
  return clock_text
end

-- Writes what the ops of a group left waiting for log `key` (see plain_append): its rows, in
-- the ops' order, then its openlen mark when they moved it.
local function flush_log(key, log)
  for from = 1, #log.rows, 1000 do
    redis.call('RPUSH', key, unpack(log.rows, from, math.min(#log.rows, from + 999)))
  end
  if log.dirty then redis.call('SET', log.mark_key, format('%d', log.mark)) end
end

-- A plain append of n plain events (flag '0') to the run of K (an op's keys), with guard '' or
-- 'open' (checked first), no open-run changes and no new mark. Event i (from 0) sits in ARGV at
-- at + 4 * i: its flag, then p1, p2, p3. ts_arg is '' (the server's TIME) or the ts to write;
-- op_ttl the seconds the receipt lives. Returns the op's reply, as this file's header says.
-- Every call here costs server time, so the type checks ride on the calls the append needs
-- anyway and a foreign type is undone rather than looked for (ADR 0331): seq and openlen are
-- read first (a foreign type fails the read), the receipt is taken with SET NX before anything
-- is written, and a foreign log or run LIST fails its RPUSH, after which what this call pushed
-- and its receipt are removed again. A script runs alone, so no client sees the undone writes.
--
-- `logs` is append_group.lua's (nil for a lone append): the logs earlier ops of the group wrote,
-- by key (ADR 0399). An op on one of them (with the same openlen key) neither reads the mark nor
-- pushes to the log: its rows wait in the log's entry, the mark follows them there, and
-- `flush_log` writes both once, after the group's last op. The log's rows keep the ops' order,
-- so the group leaves what its ops one by one would have left, with two calls fewer per op.
local function plain_append(K, ts_arg, op_ttl, guard, n, at, logs)
  local top = redis.pcall('ZRANGE', K[3], '-1', '-1', 'WITHSCORES')
  if top.err then return foreign(K, 3) end
  local log = logs and logs[K[1]]
  if log and log.mark_key ~= K[8] then
    -- The log under another openlen key: what waits goes first, and this op starts anew.
    flush_log(K[1], log)
    logs[K[1]] = nil
    log = nil
  end
  local mark
  if not log then
    mark = redis.pcall('GET', K[8])
    if type(mark) == 'table' then return foreign(K, 8) end
  end
  local open_status = nil
  if guard == 'open' then
    local refused
    refused, open_status = refuse_unless_open(K)
    if refused then return refused end
  end
  local ts = ts_arg
  if ts == '' then ts = now() end
  local first = 0
  if top[2] then first = tonumber(top[2]) + 1 end
  local s = format('%d', first)
  -- A resent call (fred re-sends in-flight commands after a reconnect) finds its receipt and
  -- returns the first result.
  if not redis.call('SET', K[9], receipt_of(s, ts, open_status), 'NX', 'EX', op_ttl) then
    return receipt(redis.call('GET', K[9]))
  end
  local len
  if n == 1 then
    local row = ARGV[at + 1] .. s .. ARGV[at + 2] .. ts .. ARGV[at + 3]
    if not log then
      len = redis.pcall('RPUSH', K[1], row)
      if type(len) == 'table' then
        redis.call('DEL', K[9])
        return foreign(K, 1)
      end
    end
    if type(redis.pcall('RPUSH', K[2], row)) == 'table' then
      if not log then redis.call('LTRIM', K[1], '0', '-2') end
      redis.call('DEL', K[9])
      return foreign(K, 2)
    end
    if log then log.rows[#log.rows + 1] = row end
    redis.call('ZADD', K[3], s, s)
  else
    local rows = {}
    local scored = {}
    for i = 0, n - 1 do
      local e = at + 4 * i
      if i > 0 then s = format('%d', first + i) end
      rows[i + 1] = ARGV[e + 1] .. s .. ARGV[e + 2] .. ts .. ARGV[e + 3]
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
    if not log then
      len = batched('RPUSH', K[1], rows)
      if type(len) == 'table' then
        redis.call('DEL', K[9])
        return foreign(K, 1)
      end
    end
    if type(batched('RPUSH', K[2], rows)) == 'table' then
      if not log then redis.call('LTRIM', K[1], '0', format('%d', -n - 1)) end
      redis.call('DEL', K[9])
      return foreign(K, 2)
    end
    if log then
      for i = 1, n do log.rows[#log.rows + 1] = rows[i] end
    end
    batched('ZADD', K[3], scored)
  end
  -- openlen = how much of the log the open SET accounts for. Only advance it when it was in
  -- step: a writer that does not maintain the SET (the Python seed) leaves it behind, and the
  -- next claim catches up from there.
  if log then
    local len0 = log.len
    log.len = len0 + n
    if (log.mark and tonumber(log.mark) == len0) or (not log.mark and len0 == 0) then
      log.mark, log.dirty = log.len, true
    end
  else
    local len0 = len - n
    if (mark and tonumber(mark) == len0) or (not mark and len0 == 0) then
      redis.call('SET', K[8], format('%d', len))
      mark = len
    end
    if logs then logs[K[1]] = {mark_key = K[8], len = len, mark = mark, rows = {}} end
  end
  -- open_status is nil without guard 'open', and a nil ends a Lua table: a plain reply.
  return {1, first, ts, open_status}
end
