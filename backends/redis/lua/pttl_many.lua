-- The remaining time to live of many keys in one command (read-only).
-- Enumeration pipelines one HMGET per session; asking PTTL per key would double the
-- commands the client must pack and parse, so the TTLs of a batch come back together.
-- KEYS  the session hashes of one batch
-- Returns one PTTL reply per key: milliseconds, -1 without expiry, -2 when gone.
local result = {}
for i, key in ipairs(KEYS) do
  result[i] = redis.call('PTTL', key)
end
return result
