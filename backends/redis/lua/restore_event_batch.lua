-- Write a batch of events that already carry their sequence numbers (a transfer's
-- batch), one clash holding back only itself: every event is checked before the first
-- write; an event whose id is already stored, or whose sequence number another event of
-- that user holds (or an earlier event of the batch took), is skipped and reported, the
-- others are written. Each user's counter is raised to at least the highest sequence
-- written (never lowered), so a later append continues. A damaged layout (an index of
-- the wrong type, a counter that is not an integer) refuses the whole batch, nothing
-- written.
--
-- KEYS and ARGV as restore_events.lua: KEYS[1+4i .. 4+4i] event hash, sequence index,
-- time index, counter; ARGV[1+11i .. 11+11i] event_id, user_id, owner_subject,
-- session_id, created_at ISO, created_at epoch, content, embedding JSON, meta JSON,
-- source_event_id, sequence.
-- Returns {written, i1, i2, ...}: the count written, then the 1-based indexes skipped.
local ARGS_PER_EVENT = 11
local KEYS_PER_EVENT = 4
local n = #KEYS / KEYS_PER_EVENT
if n < 1 or n ~= math.floor(n) or #ARGV ~= ARGS_PER_EVENT * n then
  return redis.error_reply('ERR semvec restore_event_batch: malformed arguments')
end
local seen, skip = {}, {}
for i = 0, n - 1 do
  local a = 1 + ARGS_PER_EVENT * i
  local k = 1 + KEYS_PER_EVENT * i
  local user, seq = ARGV[a + 1], ARGV[a + 10]
  if KEYS[k] ~= 'semvec:events:e:' .. ARGV[a]
    or KEYS[k + 1] ~= 'semvec:events:u:' .. user
    or KEYS[k + 2] ~= 'semvec:events:t:' .. user
    or KEYS[k + 3] ~= 'semvec:events:seq:' .. user then
    return redis.error_reply('ERR semvec restore_event_batch: event keys do not match the layout')
  end
  if not string.match(seq, '^[1-9]%d*$') or not tonumber(ARGV[a + 5]) then
    return redis.error_reply('ERR semvec restore_event_batch: malformed sequence or epoch')
  end
  for _, t in ipairs({redis.call('TYPE', KEYS[k + 1])['ok'], redis.call('TYPE', KEYS[k + 2])['ok']}) do
    if t ~= 'none' and t ~= 'zset' then
      return redis.error_reply('ERR semvec restore_event_batch: an event index has the wrong type')
    end
  end
  local counter = redis.pcall('GET', KEYS[k + 3])
  if type(counter) == 'table' or (counter and not string.match(counter, '^%d+$')) then
    return redis.error_reply('ERR semvec restore_event_batch: sequence counter is not an integer')
  end
  local slot = user .. '\0' .. seq
  if redis.call('EXISTS', KEYS[k]) == 1 or seen['e' .. ARGV[a]] or seen[slot]
    or #redis.call('ZRANGEBYSCORE', KEYS[k + 1], seq, seq, 'LIMIT', 0, 1) > 0 then
    skip[i] = true
  else
    seen['e' .. ARGV[a]] = true
    seen[slot] = true
  end
end
local reply, written = {0}, 0
for i = 0, n - 1 do
  local a = 1 + ARGS_PER_EVENT * i
  local k = 1 + KEYS_PER_EVENT * i
  if skip[i] then
    reply[#reply + 1] = i + 1
  else
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
    written = written + 1
  end
end
reply[1] = written
return reply
