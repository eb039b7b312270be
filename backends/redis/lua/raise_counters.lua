-- Raise several users' sequence counters, each to at least its value; never lower one.
-- KEYS[i]  user i's counter
-- ARGV[i]  its value (a non-negative decimal)
-- Every counter is checked before the first write: a malformed value or a counter that
-- is not an integer refuses the whole call. Returns the number of counters raised.
if #KEYS ~= #ARGV then
  return redis.error_reply('ERR semvec raise_counters: malformed arguments')
end
for i = 1, #KEYS do
  if not string.match(ARGV[i], '^%d+$') then
    return redis.error_reply('ERR semvec raise_counters: malformed arguments')
  end
  local current = redis.call('GET', KEYS[i])
  if current and not string.match(current, '^%d+$') then
    return redis.error_reply('ERR semvec raise_counters: sequence counter is not an integer')
  end
end
local raised = 0
for i = 1, #KEYS do
  local current = redis.call('GET', KEYS[i])
  local value = tonumber(ARGV[i])
  if value > 0 and (not current or tonumber(current) < value) then
    redis.call('SET', KEYS[i], ARGV[i])
    raised = raised + 1
  end
end
return raised
