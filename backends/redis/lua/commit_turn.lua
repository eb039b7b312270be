-- Write a session row and the turn's events as one unit.
--
-- A Lua error after a write does not roll back, so EVERY argument and every key is
-- checked before the first write; after that, only commands that cannot fail on
-- validated input run. Lost races come back in-band (never as errors), and per-user
-- sequences are taken from the counters only once the turn is known to land, so a
-- rejected turn leaves no gap.
--
-- KEYS[1]            state hash (unused when mode is 'none')
-- KEYS[2+4i .. 5+4i] for event i (0-based): event hash, sequence index, time index, counter
-- ARGV[1]  mode: 'insert' (expected version none), 'update', or 'none' (events only)
-- ARGV[2]  expected version ('' unless mode is 'update')
-- ARGV[3]  new version ('' when mode is 'none')
-- ARGV[4]  blob
-- ARGV[5]  owner ('' = none)
-- ARGV[6]  pending message ('' = none)
-- ARGV[7]  TTL in seconds (0 = leave any existing expiry as it is, as the engine does)
-- ARGV[8]  number of events n
-- ARGV[9+10i .. 18+10i] for event i: event_id, user_id, owner_subject, session_id,
--          created_at ISO, created_at epoch, content, embedding JSON, meta JSON,
--          source_event_id
--
-- Returns {1, seq_1, ..., seq_n} when written; {2, seq_1, ..., seq_n} when this very
-- turn is already stored (a retry after a lost reply: the row holds the new version
-- with the same blob bytes, owner and pending, and every event id of the turn is stored
-- for its user); or a lost race / refusal in-band:
--   {-1, ''} row missing, {-2, stored version} version moved, {-3, stored version}
--   row owned by someone else, {-4, ''} row already exists (insert),
--   {-5, event index} an event id already stored, {-6, stored version} the stored
--   version is not a positive decimal (a damaged row).
local ARGS_PER_EVENT = 10
local KEYS_PER_EVENT = 4

local function fail(msg)
  return redis.error_reply('ERR semvec commit_turn: ' .. msg)
end

local function key_type(key)
  return redis.call('TYPE', key)['ok']
end

-- 1. Shape of the arguments.
local mode = ARGV[1]
if mode ~= 'insert' and mode ~= 'update' and mode ~= 'none' then
  return fail('unknown mode')
end
local n = tonumber(ARGV[8])
if not n or n < 0 or n ~= math.floor(n) then
  return fail('malformed event count')
end
if #ARGV ~= 8 + ARGS_PER_EVENT * n or #KEYS ~= 1 + KEYS_PER_EVENT * n then
  return fail('argument count does not match the event count')
end
local ttl = tonumber(ARGV[7])
if not ttl or ttl < 0 then
  return fail('malformed ttl')
end
if mode == 'update' and not (tonumber(ARGV[2]) and tonumber(ARGV[3])) then
  return fail('malformed version')
end
if mode == 'insert' and not tonumber(ARGV[3]) then
  return fail('malformed version')
end
if mode == 'none' and n == 0 then
  return fail('nothing to write')
end

-- 2. Every event: identifiers, timestamp, keys that match the layout, no duplicate.
local seen = {}
for i = 0, n - 1 do
  local a = 9 + ARGS_PER_EVENT * i
  local k = 2 + KEYS_PER_EVENT * i
  local event_id, user_id = ARGV[a], ARGV[a + 1]
  if event_id == '' or user_id == '' then
    return fail('event id and user id must be non-empty')
  end
  local epoch = tonumber(ARGV[a + 5])
  if not epoch or epoch ~= epoch or epoch == math.huge or epoch == -math.huge then
    return fail('malformed created_at epoch')
  end
  if KEYS[k] ~= 'semvec:events:e:' .. event_id
    or KEYS[k + 1] ~= 'semvec:events:u:' .. user_id
    or KEYS[k + 2] ~= 'semvec:events:t:' .. user_id
    or KEYS[k + 3] ~= 'semvec:events:seq:' .. user_id then
    return fail('event keys do not match the layout')
  end
  if seen[event_id] then
    return fail('event id repeated within the turn')
  end
  seen[event_id] = true
  local t = key_type(KEYS[k + 1])
  if t ~= 'none' and t ~= 'zset' then
    return fail('sequence index has the wrong type')
  end
  t = key_type(KEYS[k + 2])
  if t ~= 'none' and t ~= 'zset' then
    return fail('time index has the wrong type')
  end
  local counter = redis.pcall('GET', KEYS[k + 3])  -- one call: type and value
  if type(counter) == 'table' then
    return fail('sequence counter has the wrong type')
  end
  if counter and not string.match(counter, '^%d+$') then
    return fail('sequence counter is not an integer')
  end
end

-- 3. The state row: compare-and-set with the owner rule, and the lost-reply retry.
local function already_landed(row)
  -- row = {version, owner}: is the stored row exactly what this turn would write, with
  -- every event of the turn stored for its user? Then the turn's sequences. The blob is
  -- read back only for a possible retry, never on the normal path.
  if row[1] ~= ARGV[3] or (row[2] or '') ~= ARGV[5] then
    return nil
  end
  local rest = redis.call('HMGET', KEYS[1], 'blob', 'pending')
  if rest[1] ~= ARGV[4] or (rest[2] or '') ~= ARGV[6] then
    return nil
  end
  local result = {2}
  for i = 0, n - 1 do
    local a = 9 + ARGS_PER_EVENT * i
    local stored = redis.pcall('HMGET', KEYS[2 + KEYS_PER_EVENT * i], 'user_id', 'sequence')
    if stored['err'] or stored[1] ~= ARGV[a + 1] or not tonumber(stored[2] or '') then
      return nil
    end
    result[#result + 1] = tonumber(stored[2])
  end
  return result
end

if mode == 'insert' then
  if redis.call('EXISTS', KEYS[1]) == 1 then
    local row = redis.pcall('HMGET', KEYS[1], 'version', 'owner')
    if not row['err'] then
      local landed = already_landed(row)
      if landed then
        return landed
      end
    end
    return {-4, ''}
  end
elseif mode == 'update' then
  -- one call: the key's type and the row
  local current = redis.pcall('HMGET', KEYS[1], 'version', 'owner')
  if current['err'] then
    return fail('state key has the wrong type')
  end
  local stored_version, stored_owner = current[1], current[2] or ''
  if not stored_version then
    if redis.call('EXISTS', KEYS[1]) == 1 then
      return {-6, ''}
    end
    return {-1, ''}
  end
  if not string.match(stored_version, '^[1-9]%d*$') then
    return {-6, stored_version}
  end
  local landed = already_landed(current)
  if landed then
    return landed
  end
  if stored_version ~= ARGV[2] then
    return {-2, stored_version}
  end
  if ARGV[5] ~= '' and stored_owner ~= '' and stored_owner ~= ARGV[5] then
    return {-3, stored_version}
  end
end

-- 4. No event may already exist (checked last: a stale retry reports the version first).
for i = 0, n - 1 do
  local k = 2 + KEYS_PER_EVENT * i
  if redis.call('EXISTS', KEYS[k]) == 1 then
    return {-5, i + 1}
  end
end

-- 5. Writes. Nothing below can fail on the input validated above.
local result = {1}
for i = 0, n - 1 do
  local a = 9 + ARGS_PER_EVENT * i
  local k = 2 + KEYS_PER_EVENT * i
  local sequence = redis.call('INCR', KEYS[k + 3])
  redis.call('HSET', KEYS[k],
    'event_id', ARGV[a], 'user_id', ARGV[a + 1], 'owner_subject', ARGV[a + 2],
    'session_id', ARGV[a + 3], 'created_at', ARGV[a + 4], 'content', ARGV[a + 6],
    'embedding', ARGV[a + 7], 'meta', ARGV[a + 8], 'source_event_id', ARGV[a + 9],
    'sequence', sequence)
  redis.call('ZADD', KEYS[k + 1], sequence, ARGV[a])
  redis.call('ZADD', KEYS[k + 2], ARGV[a + 5], ARGV[a])
  result[#result + 1] = sequence
end
if mode == 'insert' then
  redis.call('HSET', KEYS[1], 'blob', ARGV[4], 'version', ARGV[3], 'owner', ARGV[5],
             'drift_exempt', '0', 'pending', ARGV[6])
  if ttl > 0 then
    redis.call('EXPIRE', KEYS[1], ttl)
  end
elseif mode == 'update' then
  redis.call('HSET', KEYS[1], 'blob', ARGV[4], 'version', ARGV[3], 'owner', ARGV[5],
             'pending', ARGV[6])
  if ttl > 0 then
    redis.call('EXPIRE', KEYS[1], ttl)
  end
end
return result
