-- switchyard RedisEventStore: stamp and write one batch of events atomically.
--
-- Used by `append` (EVALSHA, unguarded), by `append_if_open` (EVALSHA, guard 'open': the run's
-- status is checked in the same script, ADR 0365) and by both claims (EVALSHA inside
-- WATCH/MULTI/EXEC, guarded). A plain append (no guard but 'open', no lifecycle event, no
-- open-run change) takes a short path with fewer calls; everything else takes the general one
-- (ADR 0331). Concurrent plain appends usually go together in append_group.lua (ADR 0385),
-- which runs the same short path for each; the helpers of both are append_lib.lua's.
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

-- A plain append: no guard (or 'open', checked first), no open-run changes, no new mark, and
-- only plain events (flag '0'), so the arguments sit at fixed places (new_mark 10, n 11, events
-- from 12): `plain_append` of append_lib.lua, the path append_group.lua runs for each op.
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
if plain then return plain_append(KEYS, ARGV[1], ARGV[4], ARGV[5], n, 12) end

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
if type(len0) == 'table' then return foreign(KEYS, 1) end
local run_len = redis.pcall('LLEN', KEYS[2])
if type(run_len) == 'table' then return foreign(KEYS, 2) end
local top = redis.pcall('ZRANGE', KEYS[3], '-1', '-1', 'WITHSCORES')
if top.err then return foreign(KEYS, 3) end
local mark = redis.pcall('GET', KEYS[8])
if type(mark) == 'table' then return foreign(KEYS, 8) end

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
  local status, err = run_status(KEYS)
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
