-- Raise a user's sequence counter to at least a value; never lower it.
-- KEYS[1]  counter
-- ARGV[1]  the value (a non-negative decimal)
-- Returns the counter afterwards.
if not string.match(ARGV[1] or '', '^%d+$') then
  return redis.error_reply('ERR semvec raise_counter: malformed arguments')
end
local current = redis.call('GET', KEYS[1])
if current and not string.match(current, '^%d+$') then
  return redis.error_reply('ERR semvec raise_counter: sequence counter is not an integer')
end
local value = tonumber(ARGV[1])
if not current or tonumber(current) < value then
  if value > 0 then
    redis.call('SET', KEYS[1], ARGV[1])
  end
  return value
end
return tonumber(current)
