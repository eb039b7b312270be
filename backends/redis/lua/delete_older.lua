-- Delete one user's events created strictly before a cutoff, from every index, in
-- batches (the caller loops until fewer than the limit come back).
-- KEYS[1]  time index (zset, score = created_at epoch)
-- KEYS[2]  sequence index (zset, score = sequence)
-- ARGV[1]  cutoff epoch seconds (exclusive)
-- ARGV[2]  event hash key prefix
-- ARGV[3]  batch limit
-- Returns the number of events deleted.
local cutoff = tonumber(ARGV[1])
local limit = tonumber(ARGV[3])
if not cutoff or not limit or limit < 1 then
  return redis.error_reply('ERR semvec delete_older: malformed arguments')
end
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', 0, limit)
if #ids == 0 then
  return 0
end
for _, id in ipairs(ids) do
  redis.call('DEL', ARGV[2] .. id)
end
redis.call('ZREM', KEYS[1], unpack(ids))
redis.call('ZREM', KEYS[2], unpack(ids))
return #ids
