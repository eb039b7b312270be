-- Delete a session row under the three-state owner filter.
-- KEYS[1]  state hash
-- ARGV[1]  scope: 'any' (unscoped), 'none' (only an unowned row), 'owner' (exact owner)
-- ARGV[2]  the owner when scope is 'owner'
-- Returns 1 when a row was deleted, 0 otherwise.
local scope = ARGV[1]
if scope ~= 'any' and scope ~= 'none' and scope ~= 'owner' then
  return redis.error_reply('ERR semvec delete: unknown scope')
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
if scope ~= 'any' then
  local stored_owner = redis.call('HGET', KEYS[1], 'owner') or ''
  if scope == 'none' and stored_owner ~= '' then
    return 0
  end
  if scope == 'owner' and stored_owner ~= ARGV[2] then
    return 0
  end
end
return redis.call('DEL', KEYS[1])
