-- Erase one user, a batch at a time: their events (from both indexes) first, and only
-- once none is left, the sequence counter. An interruption between batches therefore
-- never leaves events behind a reset counter.
-- KEYS[1]  sequence index (zset)
-- KEYS[2]  time index (zset)
-- KEYS[3]  sequence counter
-- ARGV[1]  event hash key prefix
-- ARGV[2]  batch limit
-- Returns {event hashes deleted, 1 when the user is fully erased else 0}.
local limit = tonumber(ARGV[2])
if not limit or limit < 1 then
  return redis.error_reply('ERR semvec purge_user: malformed arguments')
end
local ids = {}
local seen = {}
for _, index in ipairs({KEYS[1], KEYS[2]}) do
  for _, id in ipairs(redis.call('ZRANGE', index, 0, limit - 1)) do
    if not seen[id] then
      seen[id] = true
      ids[#ids + 1] = id
    end
  end
end
local deleted = 0
for _, id in ipairs(ids) do
  deleted = deleted + redis.call('DEL', ARGV[1] .. id)
end
if #ids > 0 then
  redis.call('ZREM', KEYS[1], unpack(ids))
  redis.call('ZREM', KEYS[2], unpack(ids))
end
if redis.call('EXISTS', KEYS[1], KEYS[2]) == 0 then
  redis.call('DEL', KEYS[3])
  return {deleted, 1}
end
return {deleted, 0}
