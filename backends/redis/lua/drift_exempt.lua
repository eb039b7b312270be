-- Set a session's drift_exempt flag; a missing session is left missing (no-op), and
-- nothing else of the row (version, TTL) changes.
-- KEYS[1]  state hash
-- ARGV[1]  '0' or '1'
-- Returns 1 when the flag was set, 0 when there is no such session.
if ARGV[1] ~= '0' and ARGV[1] ~= '1' then
  return redis.error_reply('ERR semvec drift_exempt: malformed arguments')
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'drift_exempt', ARGV[1])
return 1
