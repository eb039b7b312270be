-- Compare-and-set a session row: update only when the stored version is exactly the
-- expected one, and (when the save names an owner) only a row with that owner or none.
-- The row is written whole, so an omitted owner clears the stored one; drift_exempt is
-- never touched by a save.
-- KEYS[1]  state hash
-- ARGV[1]  expected version
-- ARGV[2]  new version (expected + 1, computed by the caller to avoid float formatting)
-- ARGV[3]  blob
-- ARGV[4]  owner ('' = none)
-- ARGV[5]  pending message ('' = none)
-- ARGV[6]  TTL in seconds (0 = leave any existing expiry as it is, as the engine does)
-- Returns {1, new version} when written, {2, new version} when the row this call would
-- write is already stored at the new version (a retry after a lost reply: same blob
-- bytes, owner and pending); a lost race in-band as {code, stored version}:
--   -1 row missing, -2 version moved, -3 row owned by someone else,
--   -6 the stored version is not a positive decimal (a damaged row; nothing written).
local ttl = tonumber(ARGV[6])
if #ARGV ~= 6 or not tonumber(ARGV[1]) or not tonumber(ARGV[2]) or not ttl or ttl < 0 then
  return redis.error_reply('ERR semvec cas: malformed arguments')
end
local current = redis.call('HMGET', KEYS[1], 'version', 'owner')
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
if stored_version == ARGV[2] and stored_owner == ARGV[4] then
  -- only a possible retry reads the blob back (a normal update never copies it)
  local rest = redis.call('HMGET', KEYS[1], 'blob', 'pending')
  if rest[1] == ARGV[3] and (rest[2] or '') == ARGV[5] then
    return {2, ARGV[2]}
  end
end
if stored_version ~= ARGV[1] then
  return {-2, stored_version}
end
if ARGV[4] ~= '' and stored_owner ~= '' and stored_owner ~= ARGV[4] then
  return {-3, stored_version}
end
redis.call('HSET', KEYS[1], 'blob', ARGV[3], 'version', ARGV[2], 'owner', ARGV[4],
           'pending', ARGV[5])
if ttl > 0 then
  redis.call('EXPIRE', KEYS[1], ttl)
end
return {1, ARGV[2]}
