-- Insert a session row; never overwrites (a plain save inserts at version 1, a
-- restore at the version it is given).
-- KEYS[1]  state hash
-- ARGV[1]  blob
-- ARGV[2]  version to write
-- ARGV[3]  owner ('' = none)
-- ARGV[4]  pending message ('' = none)
-- ARGV[5]  TTL in seconds (0 = no expiry)
-- Returns 1 when written; 2 when the very row this call would write is already stored
-- (a retry whose first attempt landed but whose reply was lost: same blob bytes, owner,
-- pending and version); 0 when another row exists (a lost race, reported in-band). A
-- key of another type is never overwritten either (0).
local ttl = tonumber(ARGV[5])
if #ARGV ~= 5 or not tonumber(ARGV[2]) or not ttl or ttl < 0 then
  return redis.error_reply('ERR semvec insert: malformed arguments')
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  local row = redis.pcall('HMGET', KEYS[1], 'version', 'blob', 'owner', 'pending')
  if row['err'] then
    return 0
  end
  if row[1] == ARGV[2] and row[2] == ARGV[1] and (row[3] or '') == ARGV[3]
      and (row[4] or '') == ARGV[4] then
    return 2
  end
  return 0
end
redis.call('HSET', KEYS[1], 'blob', ARGV[1], 'version', ARGV[2], 'owner', ARGV[3],
           'drift_exempt', '0', 'pending', ARGV[4])
if ttl > 0 then
  redis.call('EXPIRE', KEYS[1], ttl)
end
return 1
