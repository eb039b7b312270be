-- Write events that already carry their sequence numbers (a lossless import), all or
-- nothing: every event is checked before the first write, and an event id that is
-- already stored, or a sequence number another event of that user already holds, is a
-- conflict reported in-band with nothing written. Each user's counter is raised to at
-- least the highest restored sequence (never lowered), so a later append continues.
--
-- KEYS[1+4i .. 4+4i] for event i (0-based): event hash, sequence index, time index, counter
-- ARGV[1+11i .. 11+11i] for event i: event_id, user_id, owner_subject, session_id,
--   created_at ISO, created_at epoch, content, embedding JSON, meta JSON,
--   source_event_id, sequence
-- Returns {1, n} when written; {-5, i} event i's id is stored; {-7, i} event i's
-- sequence is taken.
local ARGS_PER_EVENT = 11
local KEYS_PER_EVENT = 4
local n = #KEYS / KEYS_PER_EVENT
if n < 1 or n ~= math.floor(n) or #ARGV ~= ARGS_PER_EVENT * n then
  return redis.error_reply('ERR semvec restore_events: malformed arguments')
end
local seen = {}
for i = 0, n - 1 do
  local a = 1 + ARGS_PER_EVENT * i
  local k = 1 + KEYS_PER_EVENT * i
  local user, seq = ARGV[a + 1], ARGV[a + 10]
  if KEYS[k] ~= 'semvec:events:e:' .. ARGV[a]
    or KEYS[k + 1] ~= 'semvec:events:u:' .. user
    or KEYS[k + 2] ~= 'semvec:events:t:' .. user
    or KEYS[k + 3] ~= 'semvec:events:seq:' .. user then
    return redis.error_reply('ERR semvec restore_events: event keys do not match the layout')
  end
  if not string.match(seq, '^[1-9]%d*$') or not tonumber(ARGV[a + 5]) then
    return redis.error_reply('ERR semvec restore_events: malformed sequence or epoch')
  end
  for _, t in ipairs({redis.call('TYPE', KEYS[k + 1])['ok'], redis.call('TYPE', KEYS[k + 2])['ok']}) do
    if t ~= 'none' and t ~= 'zset' then
      return redis.error_reply('ERR semvec restore_events: an event index has the wrong type')
    end
  end
  local counter = redis.pcall('GET', KEYS[k + 3])
  if type(counter) == 'table' or (counter and not string.match(counter, '^%d+$')) then
    return redis.error_reply('ERR semvec restore_events: sequence counter is not an integer')
  end
  if redis.call('EXISTS', KEYS[k]) == 1 or seen['e' .. ARGV[a]] then
    return {-5, i + 1}
  end
  local slot = user .. '\0' .. seq
  if seen[slot] or #redis.call('ZRANGEBYSCORE', KEYS[k + 1], seq, seq, 'LIMIT', 0, 1) > 0 then
    return {-7, i + 1}
  end
  seen['e' .. ARGV[a]] = true
  seen[slot] = true
end
for i = 0, n - 1 do
  local a = 1 + ARGS_PER_EVENT * i
  local k = 1 + KEYS_PER_EVENT * i
  redis.call('HSET', KEYS[k],
    'event_id', ARGV[a], 'user_id', ARGV[a + 1], 'owner_subject', ARGV[a + 2],
    'session_id', ARGV[a + 3], 'created_at', ARGV[a + 4], 'content', ARGV[a + 6],
    'embedding', ARGV[a + 7], 'meta', ARGV[a + 8], 'source_event_id', ARGV[a + 9],
    'sequence', ARGV[a + 10])
  redis.call('ZADD', KEYS[k + 1], ARGV[a + 10], ARGV[a])
  redis.call('ZADD', KEYS[k + 2], ARGV[a + 5], ARGV[a])
  local counter = tonumber(redis.call('GET', KEYS[k + 3]) or '0')
  if counter < tonumber(ARGV[a + 10]) then
    redis.call('SET', KEYS[k + 3], ARGV[a + 10])
  end
end
return {1, n}
