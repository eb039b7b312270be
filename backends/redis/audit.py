"""The Redis audit: a server-side screen over ``SCAN semvec:*``, a closer look at what
it returns.

One script call per page scans the keys and checks each in place (state rows, every
event's fields and index membership, every index entry's event, duplicate and missing
sequences, counters), returning only the keys that need a closer look; those are read
again and judged in Python, with the stores' own strict rules. A sound page costs one
short reply, and memory stays flat: nothing is remembered across pages (but one count
per load/conformance-run prefix seen), and an index is walked in chunks by a (score,
member) cursor (duplicates and gaps are adjacent scores), which the repairs' own removals
cannot shift. The screen parses every meta and embedding whole (cjson) and checks each
number is finite; a key it returns is judged again by the decoders' own JSON rules
(backends.contract.event_fields). The engine's other key families (ENGINE-WIRE 6b) are passed
over. A session key whose id is not UTF-8 is reported with the id escaped
(backends.contract.session_ids). On a Redis Cluster each primary is scanned on its own and state rows are read
with per-key pipelines (a script may not touch keys of several slots); the event family
is not checked there, because the adapter keeps no event log on a cluster.

Repairs are Lua scripts that re-check their precondition atomically: an index entry is
removed only while its event is still missing, a counter is only ever raised, an event
is indexed only at a sequence no other event holds.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any, Callable, Iterator

from backends.contract.findings import (Finding, Leftovers, Section, SequenceWalk, Severity, topology_findings, unknown_name,
                                   unreadable_event, unreadable_state)
from backends.contract.event_check import MISSING, StoredEvent, describe_problems, event_problems
from backends.redis import schema
from backends.redis.state import damage_of
from backends.contract.session_ids import escape_id, from_key, shown

_BATCH = 500
_CHUNK = 1000
_DECIMAL = re.compile(rb"[1-9][0-9]*")
_COUNT = re.compile(rb"[0-9]+")

_EVENT_LUA = """
local out = {}
for _, k in ipairs(KEYS) do
  local t = redis.call('TYPE', k)['ok']
  if t == 'hash' then
    local v = redis.call('HMGET', k, 'event_id', 'user_id', 'created_at', 'sequence',
                         'source_event_id', 'embedding', 'meta')
    local u, tm = false, false
    if v[2] then
      local id = string.sub(k, string.len(ARGV[1]) + 1)
      local ut = redis.call('TYPE', ARGV[2] .. v[2])['ok']
      if ut == 'zset' then u = redis.call('ZSCORE', ARGV[2] .. v[2], id) end
      local tt = redis.call('TYPE', ARGV[3] .. v[2])['ok']
      if tt == 'zset' then tm = redis.call('ZSCORE', ARGV[3] .. v[2], id) end
    end
    out[#out + 1] = t
    for i = 1, 5 do out[#out + 1] = v[i] end
    out[#out + 1] = v[6]
    out[#out + 1] = v[7]
    out[#out + 1] = u; out[#out + 1] = tm
  else
    out[#out + 1] = t
    for i = 1, 9 do out[#out + 1] = false end
  end
end
return out
"""
_EVENT_WIDTH = 10

#: KEYS[1] an index; ARGV: event prefix, lowest score (a score string or '-inf'), the
#: last member seen at that score ('' for none), page size -> member, score, exists per
#: entry, in index order. A (score, member) cursor, not a rank: the repairs remove
#: entries this walk has already passed, which would shift every rank behind them (a
#: rank cursor then skips as many entries as were repaired). Entries that share the
#: cursor's score are read as one group (members of one score sort bytewise).
_INDEX_LUA = """
local low, after, limit = ARGV[2], ARGV[3], tonumber(ARGV[4])
local out = {}
local function put(rows, skip)
  for i = 1, #rows, 2 do
    if not (skip and rows[i] <= after) then
      out[#out + 1] = rows[i]; out[#out + 1] = rows[i + 1]
      out[#out + 1] = redis.call('EXISTS', ARGV[1] .. rows[i])
    end
  end
end
if after ~= '' then
  put(redis.call('ZRANGEBYSCORE', KEYS[1], low, low, 'WITHSCORES'), true)
  low = '(' .. low
end
local rest = redis.call('ZRANGEBYSCORE', KEYS[1], low, '+inf', 'WITHSCORES', 'LIMIT', 0, limit)
put(rest, false)
out[#out + 1] = #rest
return out
"""

#: drop an index entry only while its event is still missing
_DROP_LUA = """
if redis.call('EXISTS', ARGV[1] .. ARGV[2]) == 1 then return 0 end
return redis.call('ZREM', KEYS[1], ARGV[2])
"""

#: raise a counter to at least ARGV[1], never lower it
_RAISE_LUA = """
local now = tonumber(redis.call('GET', KEYS[1]) or '0')
if now == nil then return redis.error_reply('counter is not a number') end
if now < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) return 1 end
return 0
"""

#: index an event: KEYS seq index, time index, counter, event hash; ARGV id, seq, epoch
_REINDEX_LUA = """
if redis.call('EXISTS', KEYS[4]) == 0 then return 0 end
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  local taken = redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[2], ARGV[2], 'LIMIT', 0, 1)
  if #taken > 0 then return redis.error_reply('sequence ' .. ARGV[2] .. ' is taken') end
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
end
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
end
local now = tonumber(redis.call('GET', KEYS[3]) or '0') or 0
if now < tonumber(ARGV[2]) then redis.call('SET', KEYS[3], ARGV[2]) end
return 1
"""

# -- the screen: one script call scans a page of keys and answers "which of these need
# a closer look?". Each check is at least as strict as the Python one it stands in front
# of (a key it passes would give no finding), so a sound page costs one short reply and
# no key crosses the wire twice; the keys it returns are read again and judged in Python.
# The embedding is screened as a bracketed array (a full JSON parse of every embedding
# would cost more than the scan); the detailed read parses it whole.

#: ARGV cursor, count, '1' when an idle TTL is configured, index member limit, then the
#: state, event, sequence-index, time-index and counter prefixes -> cursor, keys seen,
#: then (family letter, key) for each key to look at ('x' = none of the families)
_SCAN_SCREEN = """
local SP, EP, UP, TP, CP = ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9]
local limit = tonumber(ARGV[4])
local H = '%x%x%x%x'
local UUID = '^' .. H .. H .. '%-' .. H .. '%-' .. H .. '%-' .. H .. '%-' .. H .. H .. H .. '$'
local TIME = '^%d%d%d%d%-[01]%d%-[0-3]%dT[0-2]%d:[0-5]%d:[0-5]%d[%.%d]*[%+%-]%d%d:%d%d$'

local function starts(k, p) return string.sub(k, 1, string.len(p)) == p end
local ENGINE_KEYS, ENGINE_PREFIXES = {--ENGINE_KEYS--}, {--ENGINE_PREFIXES--}

local function engine(k)
  for _, name in ipairs(ENGINE_KEYS) do if k == name then return true end end
  for _, p in ipairs(ENGINE_PREFIXES) do if starts(k, p) then return true end end
  return false
end

-- a load run's or a conformance run's id (the caller counts them per run)
local function run_data(k, p)
  local id = string.sub(k, string.len(p) + 1)
  return starts(id, 'semvec-load-') or starts(id, 'semvec-conf-')
end

-- meta: a JSON object (cjson decodes arrays to tables too: the text must open with '{')
local function shaped(raw)
  if not string.find(raw, '^%s*{') then return false end
  local ok, v = pcall(cjson.decode, raw)
  return ok and type(v) == 'table'
end

-- embedding: a JSON array of finite numbers, parsed whole (cjson also reads NaN, inf
-- and hex, which Python's strict reading refuses; an object has keys beyond 1..n)
local function numbers(raw)
  if not string.find(raw, '^%s*%[') or string.find(raw, 'x', 1, true)
      or string.find(raw, 'X', 1, true) then return false end
  local ok, v = pcall(cjson.decode, raw)
  if not ok or type(v) ~= 'table' then return false end
  local n = 0
  for _ in pairs(v) do n = n + 1 end
  if n ~= #v then return false end
  for i = 1, n do
    local x = v[i]
    if type(x) ~= 'number' or x ~= x or x == math.huge or x == -math.huge then return false end
  end
  return true
end

local function state_ok(k)
  local v = redis.pcall('HMGET', k, 'version', 'owner', 'pending')
  if type(v) ~= 'table' or v['err'] then return false end
  return not string.find(k, '[\\128-\\255]')
    and v[1] and string.match(v[1], '^[1-9]%d*$') ~= nil
    and not (v[2] and string.find(v[2], '[\\128-\\255]'))
    and not (v[3] and string.find(v[3], '[\\128-\\255]'))
    and redis.call('HEXISTS', k, 'blob') == 1
    and not (ARGV[3] == '1' and redis.call('PTTL', k) == -1)
end

local function event_ok(k)
  local v = redis.pcall('HMGET', k, 'event_id', 'user_id', 'created_at', 'sequence',
                        'source_event_id', 'embedding', 'meta')
  if type(v) ~= 'table' or v['err'] then return false end
  local id = string.sub(k, string.len(EP) + 1)
  local ok = v[1] == id and string.match(id, UUID) ~= nil and v[2] ~= false and v[2] ~= ''
    and v[3] and string.match(v[3], TIME) ~= nil
    and v[4] and string.match(v[4], '^[1-9]%d*$') ~= nil
    and (not v[5] or v[5] == '' or string.match(v[5], UUID) ~= nil)
    and v[6] and numbers(v[6])
    and (not v[7] or v[7] == '' or shaped(v[7]))
  if not ok then return false end
  local s = redis.pcall('ZSCORE', UP .. v[2], id)
  local t = redis.pcall('ZSCORE', TP .. v[2], id)
  return type(s) == 'string' and tonumber(s) == tonumber(v[4]) and type(t) == 'string'
end

local function index_ok(k, counter_prefix, prefix_len)
  local n = redis.pcall('ZCARD', k)
  if type(n) ~= 'number' or n > limit then return false end
  if n == 0 then return true end
  local rows = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES')
  local prev = nil
  for j = 1, #rows, 2 do
    local s = tonumber(rows[j + 1])
    if redis.call('EXISTS', EP .. rows[j]) == 0 then return false end
    if counter_prefix ~= '' and (s ~= math.floor(s) or s < 1 or (prev and s ~= prev + 1)) then
      return false
    end
    prev = s
  end
  if counter_prefix == '' then return true end
  local c = redis.pcall('GET', counter_prefix .. string.sub(k, prefix_len + 1))
  return type(c) == 'string' and string.match(c, '^%d+$') ~= nil and tonumber(c) >= prev
end

local page = redis.call('SCAN', ARGV[1], 'MATCH', 'semvec:*', 'COUNT', ARGV[2])
local out = {page[1], #page[2]}
for _, k in ipairs(page[2]) do
  local family, ok, p
  if starts(k, SP) then family, ok, p = 's', state_ok(k), SP
  elseif starts(k, EP) then family, ok = 'e', event_ok(k)
  elseif starts(k, UP) then family, ok, p = 'u', index_ok(k, CP, string.len(UP)), UP
  elseif starts(k, TP) then family, ok, p = 't', index_ok(k, '', string.len(TP)), TP
  elseif starts(k, CP) then family, ok, p = 'c', true, CP
  elseif engine(k) then family, ok = 'x', true
  else family, ok = 'x', false end
  if p and run_data(k, p) then out[#out + 1] = 'l'; out[#out + 1] = k end
  if not ok then out[#out + 1] = family; out[#out + 1] = k end
end
return out
"""
def _lua_list(names: tuple[str, ...]) -> str:
    return "{" + ", ".join(f"'{name}'" for name in names) + "}"


_SCAN_SCREEN = (_SCAN_SCREEN
                .replace("{--ENGINE_KEYS--}", _lua_list(schema.ENGINE_KEYS))
                .replace("{--ENGINE_PREFIXES--}", _lua_list(schema.ENGINE_KEY_PREFIXES
                                                           + schema.OWN_KEY_PREFIXES)))
_SCREEN_LIMIT = 10_000

#: in the order the screen takes them (its ARGV 5-9)
_FAMILIES = (schema.STATE_PREFIX, schema.EVENT_PREFIX, schema.USER_SEQ_INDEX_PREFIX,
             schema.USER_TIME_INDEX_PREFIX, schema.USER_COUNTER_PREFIX)
_LETTERS = {"s": schema.STATE_PREFIX, "e": schema.EVENT_PREFIX, "u": schema.USER_SEQ_INDEX_PREFIX,
            "t": schema.USER_TIME_INDEX_PREFIX}



def _text(raw: Any) -> str:
    if raw is None or raw is False:
        return ""
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def _field(raw: Any) -> Any:
    """A field as the audit script read it: Lua's nil (False) is a field the hash lacks."""
    return MISSING if raw is None or raw is False else raw


class RedisAudit:
    """Audit one Redis store; ``run()`` yields findings as the SCAN goes."""

    def __init__(self, adapter: Any, *, batch: int = _BATCH, timeout: float = 5.0,
                 progress: Callable[[int], None] | None = None) -> None:
        self.progress = progress
        self.adapter = adapter
        self.client = adapter.client
        self.cluster = bool(getattr(adapter, "is_cluster", False))
        self.ttl = int(getattr(adapter.settings, "ttl_seconds", 0) or 0)
        self.batch = batch
        self.timeout = timeout
        self.scanned = 0
        self.leftovers = Leftovers(
            "keys", lambda prefix: (
                f"list them with semvecctl sessions list --match '{prefix}*' and remove "
                f"them with redis-cli --scan --pattern 'semvec:*{prefix}*' (check the list, "
                "then DEL each key)"))
        if not self.cluster:
            reg = self.client.register_script
            self._events = reg(_EVENT_LUA)
            self._index = reg(_INDEX_LUA)
            self._drop = reg(_DROP_LUA)
            self._raise = reg(_RAISE_LUA)
            self._reindex = reg(_REINDEX_LUA)
            self._scan_screen = reg(_SCAN_SCREEN)

    # -- the walk ------------------------------------------------------------------

    def run(self) -> Iterator[Finding]:
        """Every finding; driver errors leave as categorised backend errors (exit 4
        when unreachable), the URI redacted."""
        from backends.redis.errors import redis_errors

        yield from self.deployment()
        with redis_errors(self.adapter.settings.redacted_url):
            for node in self._nodes():
                yield from self._walk(node)

    def _nodes(self) -> list[Any]:
        if not self.cluster:
            return [self.client]
        return [self.client.get_redis_connection(n) for n in self.client.get_primaries()]

    def _walk(self, node: Any) -> Iterator[Finding]:
        """Standalone: the screen scans; only what it returns is read again."""
        if self.cluster:
            yield from self._walk_cluster_node(node)
            return
        pending: dict[str, list[bytes]] = {p: [] for p in _FAMILIES}
        cursor: Any = "0"
        args_tail = ["1" if self.ttl > 0 else "0", _SCREEN_LIMIT, *_FAMILIES]
        while True:
            reply = self._scan_screen(args=[cursor, self.batch, *args_tail], client=node)
            cursor = reply[0]
            self.scanned += int(reply[1])
            for i in range(2, len(reply), 2):
                letter, raw = _text(reply[i]), reply[i + 1]
                if letter == "l":
                    self._run_data(_text(raw))
                    continue
                if letter == "x":
                    yield self._unknown(_text(raw))
                    continue
                family = _LETTERS[letter]
                bucket = pending[family]
                bucket.append(raw)
                if len(bucket) >= self.batch:
                    yield from self._family(node, family, bucket)
                    pending[family] = []
            if self.progress is not None:
                self.progress(self.scanned)
            if _text(cursor) == "0":
                break
        for family, bucket in pending.items():
            if bucket:
                yield from self._family(node, family, bucket)
        yield from self.leftovers.findings()
        self.leftovers.runs.clear()

    def _walk_cluster_node(self, node: Any) -> Iterator[Finding]:
        """A cluster primary: SCAN from here, every state row read per key."""
        cursor = 0
        while True:
            cursor, raw_keys = node.scan(cursor, match="semvec:*", count=self.batch)
            self.scanned += len(raw_keys)
            states = []
            for raw in raw_keys:
                text = _text(raw)
                self._run_data(text)
                if text.startswith(schema.STATE_PREFIX):
                    states.append(raw)
                elif not any(text.startswith(p) for p in _FAMILIES) \
                        and not schema.is_engine_key(text):
                    yield self._unknown(text)
            if states:
                yield from self._states(node, states)
            if self.progress is not None:
                self.progress(self.scanned)
            if cursor == 0:
                yield from self.leftovers.findings()
                self.leftovers.runs.clear()
                return

    def _family(self, node: Any, family: str, raw_keys: list[bytes]) -> Iterator[Finding]:
        """The detailed checks of keys the screen returned."""
        if family == schema.STATE_PREFIX:
            yield from self._states(node, raw_keys)
        elif family == schema.EVENT_PREFIX:
            yield from self._event_rows(raw_keys)
        elif family == schema.USER_SEQ_INDEX_PREFIX:
            for raw in raw_keys:
                yield from self._seq_index(_text(raw))
        elif family == schema.USER_TIME_INDEX_PREFIX:
            for raw in raw_keys:
                yield from self._time_index(_text(raw))
        # counters are checked from their user's sequence index

    # -- state ---------------------------------------------------------------------

    def _state_rows(self, node: Any, raw_keys: list[bytes]) -> list[list[Any]]:
        pipe = node.pipeline(transaction=False)
        for raw in raw_keys:
            pipe.type(raw)
            pipe.hmget(raw, [schema.F_VERSION, schema.F_OWNER, schema.F_PENDING])
            pipe.hexists(raw, schema.F_BLOB)
            pipe.pttl(raw)
        replies = pipe.execute(raise_on_error=False)
        rows = []
        for i in range(len(raw_keys)):
            kind, values, has_blob, ttl = replies[4 * i:4 * i + 4]
            if _text(kind) != "hash" or isinstance(values, Exception):
                values, has_blob = [None, None, None], 0
            rows.append([kind, *values, has_blob, ttl])
        return rows

    def _states(self, node: Any, raw_keys: list[bytes]) -> Iterator[Finding]:
        prefix = len(schema.STATE_PREFIX.encode("utf-8"))
        for raw, row in zip(raw_keys, self._state_rows(node, raw_keys)):
            session_id = from_key(raw[prefix:])  # every byte kept; shown escaped
            yield from self._state_row(schema.STATE_PREFIX + escape_id(session_id), session_id, row)

    def _state_row(self, key: str, session_id: str, row: list[Any]) -> Iterator[Finding]:
        kind, version, owner, pending, has_blob, ttl = row
        if _text(kind) != "hash":
            yield Finding(
                "state.wrong-type", Severity.error, f"key {key}",
                f"session key holds a {_text(kind)}, not a hash",
                "every read and write of this session fails (WRONGTYPE)",
                "inspect it and delete it by hand if it is not session state")
            return
        damage = damage_of(session_id, b"" if has_blob else None,
                           version or None, owner or None, pending or None)
        if damage:
            yield unreadable_state(f"key {key}", session_id, damage)
        if self.ttl > 0 and isinstance(ttl, int) and ttl == -1:
            yield Finding(
                "state.no-ttl", Severity.warning, f"key {key}",
                f"session {shown(session_id)} has no expiry though an idle TTL of {self.ttl}s "
                "is configured",
                "it is never reclaimed; the store grows without bound",
                f"let the next write re-apply the TTL, or EXPIRE it ({self.ttl}s) "
                "after checking it is idle")

    # -- events --------------------------------------------------------------------

    def _event_rows(self, raw_keys: list[bytes]) -> Iterator[Finding]:
        flat = self._events(keys=raw_keys, args=[schema.EVENT_PREFIX, schema.USER_SEQ_INDEX_PREFIX,
                                                  schema.USER_TIME_INDEX_PREFIX])
        w = _EVENT_WIDTH
        for i, raw in enumerate(raw_keys):
            yield from self._event_row(_text(raw), flat[i * w:(i + 1) * w])

    def _event_row(self, key: str, row: list[Any]) -> Iterator[Finding]:
        kind, ev_id, user, created, seq, source, emb, meta, u_score, t_score = row
        key_id = key[len(schema.EVENT_PREFIX):]
        if _text(kind) != "hash":
            yield Finding("event.wrong-type", Severity.error, f"key {key}",
                          f"event key holds a {_text(kind)}, not a hash",
                          "reads of this event fail (WRONGTYPE)",
                          "inspect it and delete it by hand if it is not an event")
            return
        user_text = _text(user)
        problems = event_problems(StoredEvent(
            key=key_id, event_id=_field(ev_id), user_id=_field(user), created_at=_field(created),
            embedding=_field(emb), meta=_field(meta), source_event_id=_field(source),
            sequence=_field(seq)))
        epoch: float | None = None
        try:
            stamp = datetime.fromisoformat(_text(created))
            epoch = (stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)).timestamp()
        except ValueError:
            pass
        seq_raw = seq if isinstance(seq, bytes) else b""
        seq_ok = bool(_DECIMAL.fullmatch(seq_raw))
        if problems:
            yield unreadable_event(f"key {key}", describe_problems(problems))
        if not user_text:
            return
        sequence = int(seq_raw) if seq_ok else None
        u_key, t_key = schema.user_seq_index_key(user_text), schema.user_time_index_key(user_text)
        if u_score is not None and u_score is not False and sequence is not None \
                and float(u_score) != sequence:
            yield Finding("event.index-mismatch", Severity.error, f"key {u_key} member {key_id}",
                          f"the sequence index scores the event {_text(u_score)} but the event "
                          f"says sequence {sequence}",
                          "listing order and the next sequence number disagree with the data",
                          "decide which is right by hand (compare neighbours' created_at)")
        missing = [k for k, s in ((u_key, u_score), (t_key, t_score)) if s is None or s is False]
        if not missing:
            return
        fixable = sequence is not None and epoch is not None and not problems
        names = " and ".join("sequence index" if k == u_key else "time index" for k in missing)
        finding = Finding(
            "event.unindexed", Severity.error, f"key {key} (user {user_text!r})",
            f"event is missing from the user's {names}",
            "the engine lists, deletes by age and erases through the indexes: this event "
            "is invisible to them and would survive an erasure",
            "index it at its own sequence and time (safe: only adds the entry)"
            if fixable else "repair the event's fields first, then re-index it")
        finding.event_id = key_id
        if fixable:
            assert sequence is not None and epoch is not None
            k4 = [u_key, t_key, schema.user_counter_key(user_text), key]
            args = [key_id, sequence, repr(epoch)]
            finding.fix = lambda: self._reindex(keys=k4, args=args)
            finding.verify = lambda: (self.client.zscore(u_key, key_id) is not None
                                      and self.client.zscore(t_key, key_id) is not None)
        yield finding

    # -- indexes and counters ------------------------------------------------------

    def _members(self, index_key: str) -> Iterator[tuple[str, float, bool]]:
        """Every entry of an index in order, ``_CHUNK`` at a time, by a (score, member)
        cursor that the repairs' own removals cannot shift."""
        low, after = "-inf", b""
        while True:
            flat = self._index(keys=[index_key],
                               args=[schema.EVENT_PREFIX, low, after, _CHUNK])
            rest = int(flat[-1])
            for i in range(0, len(flat) - 1, 3):
                yield _text(flat[i]), float(flat[i + 1]), flat[i + 2] == 1
            if len(flat) > 1:
                after, low = flat[-4], _text(flat[-3])
            if rest < _CHUNK:
                return

    def _wrong_type(self, key: str, want: str) -> Finding | None:
        kind = _text(self.client.type(key))
        if kind in (want, "none"):
            return None
        return Finding("index.wrong-type", Severity.error, f"key {key}",
                       f"holds a {kind}, not a {want}",
                       "every append and listing for this user fails (WRONGTYPE)",
                       "inspect it; rebuild the index from the user's events by hand")

    def _dangling(self, index_key: str, member: str, label: str) -> Finding:
        finding = Finding(
            "index.dangling", Severity.error, f"key {index_key} member {member}",
            f"{label} entry without its event (no {schema.EVENT_PREFIX}{member})",
            "listings fail or skip it, and counts disagree with the data",
            "drop the entry (safe: the event is already gone)")
        finding.fix = lambda: self._drop(keys=[index_key], args=[schema.EVENT_PREFIX, member])
        finding.verify = lambda: (self.client.zscore(index_key, member) is None
                                  or bool(self.client.exists(schema.event_key(member))))
        return finding

    def _seq_index(self, index_key: str) -> Iterator[Finding]:
        wrong = self._wrong_type(index_key, "zset")
        if wrong is not None:
            yield wrong
            return
        user = index_key[len(schema.USER_SEQ_INDEX_PREFIX):]
        walk = SequenceWalk(user, f"key {index_key}",
                            "order and deletion by sequence are ambiguous; an export "
                            "cannot be re-imported")
        for member, score, exists in self._members(index_key):
            if not exists:
                yield self._dangling(index_key, member, "sequence index")
                continue
            if score != int(score) or score < 1:
                yield Finding("index.bad-score", Severity.error,
                              f"key {index_key} member {member}",
                              f"sequence score {score!r} is not a positive integer",
                              "the engine's sequence numbers are 1-based integers",
                              "re-score it from the event's sequence field by hand")
                continue
            duplicate = walk.feed(int(score), member)
            if duplicate is not None:
                yield duplicate
        gap = walk.gap_finding()
        if gap is not None:
            yield gap
        top = walk.top
        if top:
            yield from self._counter(user, top)

    def _counter(self, user: str, top: int) -> Iterator[Finding]:
        counter_key = schema.user_counter_key(user)
        try:
            raw = self.client.get(counter_key)
        except Exception:  # noqa: BLE001 - a counter of the wrong type
            raw = b"?"
        value = 0 if raw is None else int(raw) if _COUNT.fullmatch(raw) else None
        if value is None:
            yield Finding("counter.unreadable", Severity.error, f"key {counter_key}",
                          f"the counter is not a decimal ({_text(raw)[:20]!r})",
                          "the next append for this user fails",
                          f"set it to {top} (the highest sequence) by hand after checking")
            return
        if value >= top:
            return
        finding = Finding(
            "counter.behind", Severity.error, f"key {counter_key}",
            f"counter {value} is below the highest sequence {top} of user {user!r}",
            "the next append would reuse a sequence number that is taken",
            f"raise the counter to {top} (safe: only ever raised)")
        finding.fix = lambda: self._raise(keys=[counter_key], args=[top])
        finding.verify = lambda: int(self.client.get(counter_key) or 0) >= top
        yield finding

    def _time_index(self, index_key: str) -> Iterator[Finding]:
        wrong = self._wrong_type(index_key, "zset")
        if wrong is not None:
            yield wrong
            return
        for member, _score, exists in self._members(index_key):
            if not exists:
                yield self._dangling(index_key, member, "time index")

    # -- the namespace and the deployment -------------------------------------------

    def _run_data(self, key: str) -> None:
        for prefix in (schema.STATE_PREFIX, schema.USER_SEQ_INDEX_PREFIX,
                       schema.USER_TIME_INDEX_PREFIX, schema.USER_COUNTER_PREFIX):
            if key.startswith(prefix):
                self.leftovers.see(key[len(prefix):])
                return

    def _unknown(self, key: str) -> Finding:
        return unknown_name("namespace.unknown-key", f"key {key}",
                            "a key in the engine's namespace that is none of its families")

    def deployment(self) -> Iterator[Finding]:
        from backends.redis.health import details

        facts = details(self.adapter.settings, self.timeout)
        if not facts.get("reachable", True) or facts.get("error"):
            return  # the walk reports the failure as an error of its own
        if self.cluster:
            yield Finding("deploy.cluster", Severity.warning, "server",
                          "Redis Cluster: the engine's commit_turn builds event keys inside "
                          "one script, which a cluster refuses across slots",
                          "turns with events fail on a cluster; this audit skips the event log",
                          "keep the compliance log on a standalone or replicated server",
                          Section.engine)
        yield from topology_findings(facts, "server", "point the store at the primary, or "
                                     "reach it through redis+sentinel://")
        if facts.get("primary"):
            return  # the replica's own settings are not what the engine writes to
        if not facts.get("durable", False):
            yield Finding("deploy.durability", Severity.error, "server",
                          f"the server is not durable: {facts.get('reason', 'unknown')}",
                          "the engine refuses to start on it (unless "
                          "SEMVEC_REDIS_SKIP_DURABILITY_CHECK is set) and acknowledged "
                          "writes can be lost",
                          "appendonly yes and maxmemory-policy noeviction", Section.engine)
        try:
            fsync = self.client.config_get("appendfsync")
        except Exception:  # noqa: BLE001 - CONFIG may be renamed or denied
            fsync = {}
        policy = _text(next(iter(fsync.values()), b"")) if fsync else ""
        if policy == "no":
            yield Finding("advice.appendfsync", Severity.info, "server",
                          "appendfsync no: the OS decides when the AOF reaches the disk",
                          "up to ~30s of acknowledged turns can be lost on a crash",
                          "appendfsync everysec", Section.advice)


def audit(adapter: Any, **options: Any) -> Iterator[Finding]:
    return RedisAudit(adapter, **options).run()
