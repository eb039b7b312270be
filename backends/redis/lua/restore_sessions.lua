-- Insert a batch of session rows (a transfer's batch), never overwriting: a row whose
-- key exists (whatever its type) is left as it is and reported; the others are written
-- with their version, owner, pending message, drift flag and expiry.
-- KEYS[i]        row i's state hash
-- ARGV[1+6(i-1) .. 6i] for row i: blob, version, owner ('' = none), pending ('' = none),
--                TTL in seconds (0 = no expiry), drift flag ('0'/'1')
-- Every row's arguments are checked before the first write (malformed: nothing written).
-- Returns the 1-based indexes of the rows that existed.
local PER_ROW = 6
if #KEYS < 1 or #ARGV ~= PER_ROW * #KEYS then
  return redis.error_reply('ERR semvec restore_sessions: malformed arguments')
end
for i = 1, #KEYS do
  local a = PER_ROW * (i - 1)
  local ttl = tonumber(ARGV[a + 5])
  if not tonumber(ARGV[a + 2]) or not ttl or ttl < 0
      or (ARGV[a + 6] ~= '0' and ARGV[a + 6] ~= '1') then
    return redis.error_reply('ERR semvec restore_sessions: malformed arguments')
  end
end
local existed = {}
for i = 1, #KEYS do
  local a = PER_ROW * (i - 1)
  if redis.call('EXISTS', KEYS[i]) == 1 then
    existed[#existed + 1] = i
  else
    redis.call('HSET', KEYS[i], 'blob', ARGV[a + 1], 'version', ARGV[a + 2], 'owner', ARGV[a + 3],
               'drift_exempt', ARGV[a + 6], 'pending', ARGV[a + 4])
    local ttl = tonumber(ARGV[a + 5])
    if ttl > 0 then
      redis.call('EXPIRE', KEYS[i], ttl)
    end
  end
end
return existed
