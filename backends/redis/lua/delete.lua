-- Delete a session row under the three-state owner filter, optionally only while it is
-- still at the version the caller saw.
-- KEYS[1]  state hash
-- ARGV[1]  scope: 'any' (unscoped), 'none' (only an unowned row), 'owner' (exact owner)
-- ARGV[2]  the owner when scope is 'owner'
-- ARGV[3]  expected version ('' = delete whatever the version)
-- Returns {1} when the row was deleted, {0} when there is none (or the filter hides it),
-- {-2, stored version} when it has moved past the expected version (nothing deleted).
local scope = ARGV[1]
if scope ~= 'any' and scope ~= 'none' and scope ~= 'owner' then
  return redis.error_reply('ERR semvec delete: unknown scope')
end
if #ARGV ~= 3 or (ARGV[3] ~= '' and not tonumber(ARGV[3])) then
  return redis.error_reply('ERR semvec delete: malformed arguments')
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {0}
end
if scope ~= 'any' then
  local stored_owner = redis.call('HGET', KEYS[1], 'owner') or ''
  if scope == 'none' and stored_owner ~= '' then
    return {0}
  end
  if scope == 'owner' and stored_owner ~= ARGV[2] then
    return {0}
  end
end
if ARGV[3] ~= '' then
  local stored_version = redis.call('HGET', KEYS[1], 'version') or ''
  if stored_version ~= ARGV[3] then
    return {-2, stored_version}
  end
end
return {redis.call('DEL', KEYS[1])}
