//! Lua scripts: every multi-step operation is one script, so it is atomic on the server and costs
//! one round trip. Time is always the server's (`TIME`), never the caller's (fleet flaw R3).
//!
//! Scripts run through `EVALSHA` and are loaded again on `NOSCRIPT` (after a restart or
//! `SCRIPT FLUSH`; on a cluster the load goes to every primary).
//!
//! Every key a script touches is passed in `KEYS`, all in one slot on the cluster layout. The
//! only keys built inside Lua are pool claim keys in the standalone mode of `pool_list` and
//! `pool_claim` (mode `''`), kept so a claim stays one round trip there; the cluster layout runs
//! the declared mode (`'d'`), whose claim keys come in `KEYS`.

use fred::types::scripts::Script;

/// Helpers shared by every script.
const PRELUDE: &str = r#"
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
"#;

/// The scripts, compiled once per backend.
#[derive(Debug)]
pub(crate) struct Scripts {
    pub push: Script,
    pub submit_once: Script,
    pub reserve: Script,
    pub ack: Script,
    pub nack: Script,
    pub extend: Script,
    pub fail: Script,
    pub dead: Script,
    pub dlq_pop: Script,
    pub sweep: Script,
    pub stats: Script,
    pub dlq_clear: Script,
    pub dlq_requeue: Script,
    pub pool_put: Script,
    pub pool_list: Script,
    pub pool_size: Script,
    pub pool_remove: Script,
    pub pool_release: Script,
    pub pool_claim: Script,
    pub lock_acquire: Script,
    pub lock_release: Script,
    pub lock_extend: Script,
    pub stream_push: Script,
    pub stream_trim: Script,
    pub worker_register: Script,
    pub worker_set_config: Script,
    pub worker_set_state: Script,
    pub worker_set_stats: Script,
    pub worker_stats_push: Script,
    pub worker_get: Script,
    pub worker_remove: Script,
}

fn script(body: &str) -> Script {
    Script::from_lua(format!("{PRELUDE}\n{body}"))
}

/// Queue KEYS, in this order, for every queue script (unused ones are harmless).
/// 1 high, 2 normal, 3 low, 4 processing, 5 processing:body, 6 processing:meta, 7 scheduled,
/// 8 scheduled:body, 9 attempts, 10 dead, 11 wake, 12 the call's op record (ADR 0140).
///
/// Scripts that change state take `ARGV[1]` = how long (ms) the op record lives. A call that
/// applied something records its reply under its op token; fred re-sends a command whose reply
/// a dropped connection lost, with the same token, and the re-send finds the record and answers
/// the first reply without applying anything again. A call that applied nothing records nothing
/// (its re-send applies nothing either, or applies what the first send did not).
const QUEUE_LOCALS: &str = r#"
local K_TIER = {h = KEYS[1], n = KEYS[2], l = KEYS[3]}
local K_PROC, K_BODY, K_META = KEYS[4], KEYS[5], KEYS[6]
local K_SCHED, K_SBODY, K_ATT, K_DEAD, K_WAKE = KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11]
local K_OP = KEYS[12]
local function record(v) redis.call('SET', K_OP, v, 'PX', ARGV[1]) end
"#;

impl Scripts {
    pub fn new() -> Self {
        let q = |body: &str| script(&format!("{QUEUE_LOCALS}\n{body}"));
        Scripts {
            // ARGV: op_ttl, then (tier code, body) per pushed body, in call order (one call, or a
            // batch of concurrent calls). Reply: 1 applied, 0 re-send of an applied push.
            push: q(r#"
if not redis.call('SET', K_OP, '1', 'NX', 'PX', ARGV[1]) then return 0 end
local by = {}
for i = 2, #ARGV, 2 do
  local code = ARGV[i]
  if not K_TIER[code] then code = 'n' end
  local list = by[code]
  if not list then list = {}; by[code] = list end
  list[#list + 1] = ARGV[i + 1]
end
local n = 0
for code, list in pairs(by) do
  push_all('RPUSH', K_TIER[code], list)
  n = n + #list
end
wake(K_WAKE, n)
return 1
"#),
            // KEYS[13] = idempotency key. ARGV: op_ttl, tier, body, value, ttl_ms (0 = none)
            submit_once: q(r#"
if redis.call('EXISTS', K_OP) == 1 then return {1} end
local ok
if tonumber(ARGV[5]) > 0 then
  ok = redis.call('SET', KEYS[13], ARGV[4], 'NX', 'PX', ARGV[5])
else
  ok = redis.call('SET', KEYS[13], ARGV[4], 'NX')
end
if not ok then return {0, redis.call('GET', KEYS[13]), redis.call('PTTL', KEYS[13])} end
redis.call('RPUSH', K_TIER[ARGV[2]], ARGV[3])
wake(K_WAKE, 1)
record('1')
return {1}
"#),
            // ARGV: op_ttl, then (receipt, visibility_ms) per reserving call; receipts are filled
            // in order. Reply: {reserved, next_due_ms|-1, then per reserved receipt: body, tier,
            // attempt, deadline}; tier '' marks a reservation gone before its re-send (it lapsed
            // and was swept: the task is back in its tier).
            reserve: q(r#"
local done = redis.call('GET', K_OP)
if done then
  local out = {tonumber(done), -1}
  for i = 1, tonumber(done) do
    local r = ARGV[2 * i]
    local body = redis.call('HGET', K_BODY, r)
    if body then
      local code, attempt = parse_meta(redis.call('HGET', K_META, r))
      local deadline = redis.call('ZSCORE', K_PROC, r) or '0'
      out[#out + 1] = body; out[#out + 1] = code; out[#out + 1] = attempt; out[#out + 1] = deadline
    else
      out[#out + 1] = ''; out[#out + 1] = ''; out[#out + 1] = 0; out[#out + 1] = '0'
    end
  end
  return out
end
local t = now()
-- Due scheduled tasks go back to the end of their own tier (flaws Q3, Q7).
local due = redis.call('ZRANGEBYSCORE', K_SCHED, '-inf', fmt(t), 'LIMIT', 0, 256)
for _, m in ipairs(due) do
  redis.call('ZREM', K_SCHED, m)
  local body = redis.call('HGET', K_SBODY, m)
  if body then
    redis.call('HDEL', K_SBODY, m)
    redis.call('RPUSH', K_TIER[string.sub(m, 1, 1)] or K_TIER.n, body)
  else
    -- Written by the seed: the member is the body.
    redis.call('RPUSH', K_TIER.n, m)
  end
end
local want = math.floor((#ARGV - 1) / 2)
-- Counts exist only for requeued copies; with none stored no body needs decoding.
local counted = redis.call('HLEN', K_ATT) > 0
local out = {0, -1}
local zadd, bodies, metas = {}, {}, {}
local n = 0
for _, code in ipairs({'h', 'n', 'l'}) do
  if n >= want then break end
  local got = redis.call('LPOP', K_TIER[code], want - n)
  if got then
    for _, body in ipairs(got) do
      n = n + 1
      local r = ARGV[2 * n]
      local attempt, ident = 1, ''
      if counted then
        ident = identity(body)
        attempt = take_count(K_ATT, ident) + 1
      end
      local deadline = fmt(t + tonumber(ARGV[2 * n + 1]) / 1000)
      zadd[#zadd + 1] = deadline; zadd[#zadd + 1] = r
      bodies[#bodies + 1] = r; bodies[#bodies + 1] = body
      metas[#metas + 1] = r; metas[#metas + 1] = code .. '|' .. attempt .. '|' .. ident
      out[#out + 1] = body; out[#out + 1] = code; out[#out + 1] = attempt; out[#out + 1] = deadline
    end
  end
end
out[1] = n
if n > 0 then
  redis.call('ZADD', K_PROC, unpack(zadd))
  redis.call('HSET', K_BODY, unpack(bodies))
  redis.call('HSET', K_META, unpack(metas))
  record(n)
end
if n < want then
  local nxt = redis.call('ZRANGE', K_SCHED, 0, 0, 'WITHSCORES')
  if nxt[2] then out[2] = math.max(0, math.floor((tonumber(nxt[2]) - t) * 1000)) end
end
return out
"#),
            // ARGV: op_ttl, receipts (one call, or a batch). Reply: one '1'/'0' per receipt.
            ack: q(r#"
local done = redis.call('GET', K_OP)
if done then return done end
local res, gone = {}, {}
for i = 2, #ARGV do
  if redis.call('ZREM', K_PROC, ARGV[i]) == 1 then
    res[#res + 1] = '1'
    gone[#gone + 1] = ARGV[i]
  else
    res[#res + 1] = '0'
  end
end
local reply = table.concat(res)
if #gone > 0 then
  redis.call('HDEL', K_BODY, unpack(gone))
  redis.call('HDEL', K_META, unpack(gone))
  record(reply)
end
return reply
"#),
            // ARGV: op_ttl, receipt, body, delay_ms
            nack: q(r#"
if redis.call('EXISTS', K_OP) == 1 then return 1 end
if redis.call('ZREM', K_PROC, ARGV[2]) == 0 then return 0 end
local code, attempt = parse_meta(redis.call('HGET', K_META, ARGV[2]))
redis.call('HDEL', K_BODY, ARGV[2])
redis.call('HDEL', K_META, ARGV[2])
if not K_TIER[code] then code = 'n' end
if attempt > 0 then put_count(K_ATT, (identity(ARGV[3])), attempt) end
local delay = tonumber(ARGV[4])
if delay > 0 then
  -- Member is tier + receipt, body in a hash: identical bodies never collapse (flaw Q12).
  local m = code .. ':' .. ARGV[2]
  redis.call('ZADD', K_SCHED, fmt(now() + delay / 1000), m)
  redis.call('HSET', K_SBODY, m, ARGV[3])
else
  redis.call('RPUSH', K_TIER[code], ARGV[3])
  wake(K_WAKE, 1)
end
record('1')
return 1
"#),
            // ARGV: receipt, visibility_ms (a re-send only moves the deadline again: no op record)
            extend: q(r#"
if not redis.call('ZSCORE', K_PROC, ARGV[1]) then return 0 end
redis.call('ZADD', K_PROC, 'XX', fmt(now() + tonumber(ARGV[2]) / 1000), ARGV[1])
return 1
"#),
            // ARGV: op_ttl, receipt, body
            fail: q(r#"
if redis.call('EXISTS', K_OP) == 1 then return 1 end
if redis.call('ZREM', K_PROC, ARGV[2]) == 0 then return 0 end
redis.call('HDEL', K_BODY, ARGV[2])
redis.call('HDEL', K_META, ARGV[2])
redis.call('RPUSH', K_DEAD, ARGV[3])
record('1')
return 1
"#),
            // ARGV: op_ttl, body
            dead: q(r#"
if not redis.call('SET', K_OP, '1', 'NX', 'PX', ARGV[1]) then return 0 end
redis.call('RPUSH', K_DEAD, ARGV[2])
return 1
"#),
            // ARGV: limit. Reply: {requeued, examined}. A re-send sweeps what lapsed since: no op.
            sweep: q(r#"
local lapsed = redis.call('ZRANGEBYSCORE', K_PROC, '-inf', fmt(now()), 'LIMIT', 0, tonumber(ARGV[1]))
local moved = 0
for _, r in ipairs(lapsed) do
  redis.call('ZREM', K_PROC, r)
  local body = redis.call('HGET', K_BODY, r)
  local code, attempt, ident = parse_meta(redis.call('HGET', K_META, r))
  redis.call('HDEL', K_BODY, r)
  redis.call('HDEL', K_META, r)
  -- An orphan without a body (seed crash between its two writes) is just cleaned (flaw R5).
  if body then
    -- Reserve leaves the identity out when no count was stored: derive it from the body.
    if ident == nil or ident == '' then ident = identity(body) end
    if attempt > 0 then put_count(K_ATT, ident, attempt) end
    redis.call('RPUSH', K_TIER[code] or K_TIER.n, body)
    moved = moved + 1
  end
end
wake(K_WAKE, moved)
return {moved, #lapsed}
"#),
            // Read-only, one snapshot. Cut-offs are those of sweep and reserve (`<= now`).
            // Reply: {high, normal, low, in_flight, overdue, scheduled, due, dead}
            stats: q(r#"
local t = fmt(now())
return {
  redis.call('LLEN', K_TIER.h), redis.call('LLEN', K_TIER.n), redis.call('LLEN', K_TIER.l),
  redis.call('ZCARD', K_PROC), redis.call('ZCOUNT', K_PROC, '-inf', t),
  redis.call('ZCARD', K_SCHED), redis.call('ZCOUNT', K_SCHED, '-inf', t),
  redis.call('LLEN', K_DEAD)
}
"#),
            // ARGV: op_ttl
            dlq_clear: q(r#"
local done = redis.call('GET', K_OP)
if done then return tonumber(done) end
local n = redis.call('LLEN', K_DEAD)
if n > 0 then
  redis.call('DEL', K_DEAD)
  record(n)
end
return n
"#),
            // ARGV: op_ttl, n. The op record is a LIST of the popped bodies (a re-send returns it).
            dlq_pop: q(r#"
if redis.call('EXISTS', K_OP) == 1 then return redis.call('LRANGE', K_OP, 0, -1) end
local got = redis.call('LPOP', K_DEAD, tonumber(ARGV[2]))
if not got then return {} end
push_all('RPUSH', K_OP, got)
redis.call('PEXPIRE', K_OP, ARGV[1])
return got
"#),
            // ARGV: op_ttl, n, tier
            dlq_requeue: q(r#"
local done = redis.call('GET', K_OP)
if done then return tonumber(done) end
local got = redis.call('LPOP', K_DEAD, tonumber(ARGV[2]))
if not got then return 0 end
push_all('RPUSH', K_TIER[ARGV[3]], got)
wake(K_WAKE, #got)
record(#got)
return #got
"#),
            // KEYS: hash, expiry index. ARGV: id, encoded item without its closing
            // `"x": …}` tail, ttl_ms (0 = never).
            pool_put: script(
                r#"
local t = now()
local ttl = tonumber(ARGV[3])
local score, x = -1, 'null'
if ttl > 0 then score = t + ttl / 1000; x = fmt(score) end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. x .. '}')
redis.call('ZADD', KEYS[2], fmt(score), ARGV[1])
-- Prune a bounded batch of expired items through the index, not the whole pool (flaws P1, P3).
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], 0, fmt(t), 'LIMIT', 0, 32)
for _, id in ipairs(gone) do
  redis.call('HDEL', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
end
return 1
"#,
            ),
            // KEYS: hash, then (mode 'd') the claim keys of ARGV[3..]. ARGV: claim key prefix,
            // mode ('d' = claim keys declared in KEYS, as a cluster needs; '' = built here from the
            // prefix, standalone only), ids. Reply: {now, id, raw, pttl, …}
            pool_list: script(
                r#"
local out = {fmt(now())}
local function emit(id, raw, ck)
  table.insert(out, id)
  table.insert(out, raw)
  table.insert(out, redis.call('PTTL', ck))
end
if ARGV[2] == 'd' then
  for i = 3, #ARGV do
    local raw = redis.call('HGET', KEYS[1], ARGV[i])
    if raw then emit(ARGV[i], raw, KEYS[i - 1]) end
  end
else
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do emit(all[i], all[i + 1], ARGV[1] .. quote(all[i])) end
end
return out
"#,
            ),
            // KEYS: hash, index
            pool_size: script(&format!(
                "{SYNC_INDEX}\n{}",
                r#"
sync_index(KEYS[1], KEYS[2])
local t = now()
return redis.call('ZCOUNT', KEYS[2], '(' .. fmt(t), '+inf') + redis.call('ZCOUNT', KEYS[2], -1, -1)
"#
            )),
            // KEYS: hash, index, claim key. ARGV: id
            pool_remove: script(
                r#"
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
local existed = redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[3])
if existed == 0 then return 0 end
if score and tonumber(score) ~= -1 and tonumber(score) <= now() then return 0 end
return 1
"#,
            ),
            // KEYS: claim key. ARGV: token
            pool_release: script(
                r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"#,
            ),
            // KEYS: hash, index, then (mode 'd') the claim keys of ARGV[6..]. ARGV: claim key
            // prefix, where (JSON object), hold_ms, token, mode ('d' = claim keys declared in
            // KEYS, as a cluster needs; '' = built here from the prefix, standalone only), ids.
            // Reply: {id, raw, now} or false.
            pool_claim: script(&format!(
                "{SYNC_INDEX}\n{}",
                r#"
local function equal(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) ~= 'table' then return a == b end
  for k, v in pairs(a) do if not equal(v, b[k]) then return false end end
  for k, _ in pairs(b) do if a[k] == nil then return false end end
  return true
end
sync_index(KEYS[1], KEYS[2])
local t = now()
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], 0, fmt(t), 'LIMIT', 0, 32)
for _, id in ipairs(gone) do
  redis.call('HDEL', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
end
local declared = nil
if ARGV[5] == 'd' then
  declared = {}
  for i = 6, #ARGV do declared[ARGV[i]] = KEYS[i - 3] end
end
-- An item added after the caller listed the claim keys has none declared: skipped this time.
local function claim_key(id)
  if declared then return declared[id] end
  return ARGV[1] .. quote(id)
end
local where = cjson.decode(ARGV[2])
-- Latest expiry first; items that never expire (score -1) last.
local ids = redis.call('ZREVRANGEBYSCORE', KEYS[2], '+inf', '(' .. fmt(t))
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], -1, -1)) do table.insert(ids, id) end
for _, id in ipairs(ids) do
  local ck = claim_key(id)
  if ck and redis.call('EXISTS', ck) == 0 then
    local raw = redis.call('HGET', KEYS[1], id)
    if raw then
      local ok, item = pcall(cjson.decode, raw)
      if ok and type(item) == 'table' then
        local tags = item['t']
        if type(tags) ~= 'table' then tags = {} end
        local match = true
        for k, v in pairs(where) do
          if not equal(tags[k], v) then match = false; break end
        end
        if match then
          redis.call('SET', ck, ARGV[4], 'PX', ARGV[3])
          return {id, raw, fmt(t)}
        end
      end
    end
  end
end
return false
"#
            )),
            // KEYS: lock, fence. ARGV: token, hold_ms
            lock_acquire: script(
                r#"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0
"#,
            ),
            lock_release: script(
                r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"#,
            ),
            // ARGV: token, hold_ms
            lock_extend: script(
                r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"#,
            ),
            // KEYS: stream. ARGV: envelope, score, max_len, ttl_ms, channel
            stream_push: script(
                r#"
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. string.format('%.17g', tonumber(ARGV[2]) - ttl / 1000))
end
local max = tonumber(ARGV[3])
if max > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(max + 1)) end
redis.call('PUBLISH', ARGV[5], ARGV[2])
return 1
"#,
            ),
            // KEYS: stream. ARGV: max_len, ttl_ms
            stream_trim: script(
                r#"
local ttl = tonumber(ARGV[2])
if ttl > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. fmt(now() - ttl / 1000))
end
local max = tonumber(ARGV[1])
if max > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(max + 1)) end
return 1
"#,
            ),
            // KEYS: hardware, config, gen, type set, [all set: seed layout only]. ARGV: hardware
            // JSON, wid, all member
            worker_register: script(
                r#"
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SADD', KEYS[4], ARGV[2])
if KEYS[5] then redis.call('SADD', KEYS[5], ARGV[3]) end
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('SET', KEYS[2], '{}')
  -- A generation left by a removed worker is bumped, never reset (flaw W3).
  if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('INCR', KEYS[3])
  else redis.call('SET', KEYS[3], '0') end
end
return 1
"#,
            ),
            // KEYS: type set, config, gen. ARGV: wid, config JSON, expected gen ('' = any).
            // Reply: {-1} not registered, {0, current} mismatch, {1, new gen}
            worker_set_config: script(
                r#"
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return {-1} end
local g = tonumber(redis.call('GET', KEYS[3]) or '0') or 0
if ARGV[3] ~= '' and tonumber(ARGV[3]) ~= g then return {0, g} end
redis.call('SET', KEYS[2], ARGV[2])
return {1, redis.call('INCR', KEYS[3])}
"#,
            ),
            // KEYS: type set, state hash. ARGV: wid, state, last_seen, last_error, applied gen ('')
            worker_set_state: script(
                r#"
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], 'state', ARGV[2], 'last_seen', ARGV[3], 'last_error', ARGV[4])
if ARGV[5] ~= '' then redis.call('HSET', KEYS[2], 'applied_gen', ARGV[5])
else redis.call('HDEL', KEYS[2], 'applied_gen') end
return 1
"#,
            ),
            // KEYS: type set, stats. ARGV: wid, stats JSON
            worker_set_stats: script(
                r#"
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
return 1
"#,
            ),
            // KEYS: type set, history. ARGV: wid, ts, frame JSON, max_entries
            worker_stats_push: script(
                r#"
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
local max = tonumber(ARGV[4])
if max > 0 then redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(max + 1)) end
return 1
"#,
            ),
            // KEYS: type set, hardware, config, gen, stats, state. ARGV: wid
            worker_get: script(
                r#"
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return false end
return {redis.call('GET', KEYS[2]), redis.call('GET', KEYS[3]), redis.call('GET', KEYS[4]),
        redis.call('GET', KEYS[5]), redis.call('HGET', KEYS[6], 'state'),
        redis.call('HGET', KEYS[6], 'last_seen'), redis.call('HGET', KEYS[6], 'last_error'),
        redis.call('HGET', KEYS[6], 'applied_gen')}
"#,
            ),
            // KEYS: type set, hardware, config, state, stats, history, [all set: seed layout only].
            // ARGV: wid, member
            worker_remove: script(
                r#"
if redis.call('SREM', KEYS[1], ARGV[1]) == 0 then return 0 end
if KEYS[7] then redis.call('SREM', KEYS[7], ARGV[2]) end
-- Everything but the generation goes, history included (flaws W3, W5).
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
return 1
"#,
            ),
        }
    }
}

/// Rebuilds a pool's expiry index when it disagrees with the hash (items written by the seed,
/// which keeps no index). Cheap check on every call; the rebuild is O(n) only after drift.
const SYNC_INDEX: &str = r#"
local function sync_index(hash, index)
  if redis.call('HLEN', hash) == redis.call('ZCARD', index) then return end
  redis.call('DEL', index)
  local all = redis.call('HGETALL', hash)
  for i = 1, #all, 2 do
    local score = -1
    local ok, item = pcall(cjson.decode, all[i + 1])
    if ok and type(item) == 'table' and type(item['x']) == 'number' then score = item['x'] end
    redis.call('ZADD', index, fmt(score), all[i])
  end
end
"#;
