-- Merge erasure-ledger entries into the entries hash, each read and written in this one
-- script (so two erasures of one subject cannot lose part of the session-hash union).
-- KEYS[1]: the entries hash. ARGV, six per entry: field, erased_at (ISO, UTC), receipt
-- ('' = none, told apart by the next arg), '1' when there is a receipt, the session
-- hashes as a JSON list, and the position reserved for it should it be new.
-- The rule is backends.contract.ledger.merged: the later time (and its receipt) wins,
-- session hashes are unioned (sorted), a held entry keeps its position.
-- Returns how many entries changed.
local function at_key(iso)  -- 'YYYY-MM-DDTHH:MM:SS.ffffff', comparable as a string
  local frac = string.match(iso, '^[^.+Z]*%.(%d+)') or ''
  return string.sub(iso, 1, 19) .. '.' .. string.sub(frac .. '000000', 1, 6)
end
local function encode(at, receipt, sessions, seq)
  local parts = {}
  for i, s in ipairs(sessions) do parts[i] = cjson.encode(s) end
  return '{"erased_at":' .. cjson.encode(at) .. ',"receipt":' .. receipt ..
         ',"sessions":[' .. table.concat(parts, ',') .. '],"seq":' .. seq .. '}'
end
local changed = 0
for i = 1, #ARGV, 6 do
  local field, at = ARGV[i], ARGV[i + 1]
  local receipt = 'null'
  if ARGV[i + 3] == '1' then receipt = cjson.encode(ARGV[i + 2]) end
  local incoming = cjson.decode(ARGV[i + 4])
  local raw = redis.call('HGET', KEYS[1], field)
  local seen, union = {}, {}
  for _, s in ipairs(incoming) do
    if not seen[s] then seen[s] = true; union[#union + 1] = s end
  end
  if not raw then
    table.sort(union)
    redis.call('HSET', KEYS[1], field, encode(at, receipt, union, ARGV[i + 5]))
    changed = changed + 1
  else
    local old = cjson.decode(raw)
    local held = old.sessions or {}
    local before = 0
    for _, s in ipairs(held) do
      if not seen[s] then seen[s] = true; union[#union + 1] = s end
    end
    local distinct_held = {}
    for _, s in ipairs(held) do distinct_held[s] = true end
    for _ in pairs(distinct_held) do before = before + 1 end
    local later = at_key(at) > at_key(old.erased_at)
    if later or #union ~= before then
      table.sort(union)
      local keep_at, keep_receipt = old.erased_at, 'null'
      if old.receipt ~= nil and old.receipt ~= cjson.null then keep_receipt = cjson.encode(old.receipt) end
      if later then keep_at, keep_receipt = at, receipt end
      redis.call('HSET', KEYS[1], field,
                 encode(keep_at, keep_receipt, union, string.format('%d', old.seq or 0)))
      changed = changed + 1
    end
  end
end
return changed
