-- Delete one event: its hash and its entries in the user's two indexes. The user's
-- counter is left alone, so a sequence number is never handed out twice.
-- KEYS[1]  event hash
-- ARGV[1]  sequence index key prefix
-- ARGV[2]  time index key prefix
-- Returns 1 when the event existed, 0 otherwise.
local user = redis.call('HGET', KEYS[1], 'user_id')
if not user then
  return redis.call('DEL', KEYS[1])
end
local id = redis.call('HGET', KEYS[1], 'event_id') or ''
redis.call('ZREM', ARGV[1] .. user, id)
redis.call('ZREM', ARGV[2] .. user, id)
return redis.call('DEL', KEYS[1])
