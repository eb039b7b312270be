"""The engine-style Redis adapter: state, events and turns in the engine's layout.

Every write is one Lua script that reads and checks everything before its first write,
because a Redis script that fails after a write does not roll back (ENGINE-WIRE §3, §7).
The scripts are assembled from named parts so that :mod:`tests.support.engine_style.defective`
can rebuild them with a part missing or out of order, exactly like the engine's defects.
"""

from __future__ import annotations

import json
import math
import os
from datetime import datetime, timezone
from typing import Any, NamedTuple, Sequence

from tests.support.engine_style.events import ComplianceEvent

STATE = "semvec:state:"
EVENT = "semvec:events:e:"
BY_SEQ = "semvec:events:u:"
BY_TIME = "semvec:events:t:"
COUNTER = "semvec:events:seq:"


class StateVersionConflict(RuntimeError):
    """The engine's conflict type is matched by name, so this one is ours."""


class LoadedState(NamedTuple):
    blob: bytes
    version: int
    owner_subject: str | None
    pending_message: str | None


def _owner(scope: Any) -> str:
    """The owner string of a scope object ("" for none), as the engine encodes it."""
    if scope is None:
        return ""
    owner = getattr(scope, "owner_subject", None)
    if not isinstance(owner, str) or not owner:
        raise ValueError("scope must be None or carry a non-empty owner_subject")
    return owner


# -- Lua parts ------------------------------------------------------------------------
# ARGV of a state write: 1 blob, 2 owner ("" = none), 3 pending ("" = none),
# 4 expected version ("" = insert), 5 scoped ("1"/"0"), 6 ttl seconds (0 = none).

CHECK_VERSION = """
local cur = redis.call('HMGET', KEYS[1], 'version', 'owner')
if ARGV[4] == '' then
  if cur[1] then return {-1, 'exists'} end
else
  if not cur[1] then return {-1, 'missing'} end
  if tonumber(cur[1]) ~= tonumber(ARGV[4]) then return {-1, 'version moved'} end
end
"""

CHECK_OWNER = """
if ARGV[4] ~= '' and ARGV[5] == '1' and cur[2] and cur[2] ~= '' and cur[2] ~= ARGV[2] then
  return {-1, 'owned by another'}
end
"""

WRITE_STATE = """
local version = 1
if ARGV[4] ~= '' then version = tonumber(ARGV[4]) + 1 end
redis.call('HSET', KEYS[1], 'blob', ARGV[1], 'version', tostring(version),
           'owner', ARGV[2], 'pending', ARGV[3])
if redis.call('HEXISTS', KEYS[1], 'drift_exempt') == 0 then
  redis.call('HSET', KEYS[1], 'drift_exempt', '0')
end
if tonumber(ARGV[6]) > 0 then redis.call('EXPIRE', KEYS[1], ARGV[6]) end
"""

# Events follow the state ARGV: 7 = number of events, then 10 values per event:
# event_id, user_id, owner_subject, session_id, created_at ISO, content, embedding JSON,
# meta JSON, source_event_id ("" = none), created_at epoch seconds.
CHECK_EVENT_KEYS = """
local n = tonumber(ARGV[7])
for i = 0, n - 1 do
  local b = 7 + i * 10
  local uid = ARGV[b + 2]
  if redis.call('EXISTS', 'semvec:events:e:' .. ARGV[b + 1]) == 1 then
    return {-2, 'event id exists'}
  end
  for _, key in ipairs({'semvec:events:u:' .. uid, 'semvec:events:t:' .. uid}) do
    local t = redis.call('TYPE', key)['ok']
    if t ~= 'none' and t ~= 'zset' then return {-2, 'wrong type: ' .. key} end
  end
  local ckey = 'semvec:events:seq:' .. uid
  local ct = redis.call('TYPE', ckey)['ok']
  if ct ~= 'none' and (ct ~= 'string' or not tonumber(redis.call('GET', ckey))) then
    return {-2, 'wrong type: ' .. ckey}
  end
end
"""

WRITE_EVENTS = """
local n = tonumber(ARGV[7])
local seqs = {}
for i = 0, n - 1 do
  local b = 7 + i * 10
  local uid = ARGV[b + 2]
  local seq = redis.call('INCR', 'semvec:events:seq:' .. uid)
  redis.call('HSET', 'semvec:events:e:' .. ARGV[b + 1], 'event_id', ARGV[b + 1],
             'user_id', uid, 'owner_subject', ARGV[b + 3], 'session_id', ARGV[b + 4],
             'created_at', ARGV[b + 5], 'content', ARGV[b + 6], 'embedding', ARGV[b + 7],
             'meta', ARGV[b + 8], 'source_event_id', ARGV[b + 9], 'sequence', tostring(seq))
  redis.call('ZADD', 'semvec:events:u:' .. uid, seq, ARGV[b + 1])
  redis.call('ZADD', 'semvec:events:t:' .. uid, ARGV[b + 10], ARGV[b + 1])
  seqs[#seqs + 1] = seq
end
"""

RETURN_VERSION = "\nreturn {version, 'ok'}\n"

#: The correct turn: every check, then every write.
TURN_PARTS = (CHECK_VERSION, CHECK_OWNER, CHECK_EVENT_KEYS, WRITE_STATE, WRITE_EVENTS,
              RETURN_VERSION)
SAVE_PARTS = (CHECK_VERSION, CHECK_OWNER, WRITE_STATE, RETURN_VERSION)

DELETE = """
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then return 0 end
if ARGV[1] == '1' and owner ~= ARGV[2] then return 0 end
return redis.call('DEL', KEYS[1])
"""

APPEND = """
local seq = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[1], 'event_id', ARGV[1], 'user_id', ARGV[2], 'owner_subject', ARGV[3],
           'session_id', ARGV[4], 'created_at', ARGV[5], 'content', ARGV[6],
           'embedding', ARGV[7], 'meta', ARGV[8], 'source_event_id', ARGV[9],
           'sequence', tostring(seq))
redis.call('ZADD', KEYS[2], seq, ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[10], ARGV[1])
return seq
"""

DELETE_EVENT = """
local uid = redis.call('HGET', KEYS[1], 'user_id')
if not uid then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', 'semvec:events:u:' .. uid, ARGV[1])
redis.call('ZREM', 'semvec:events:t:' .. uid, ARGV[1])
return 1
"""

DELETE_USER = """
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
for _, id in ipairs(ids) do redis.call('DEL', 'semvec:events:e:' .. id) end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return #ids
"""


def _event_args(event: ComplianceEvent) -> list[Any]:
    created = event.created_at.astimezone(timezone.utc)
    return [str(event.event_id), event.user_id, event.owner_subject, event.session_id,
            created.isoformat(), event.content, json.dumps(list(event.embedding)),
            json.dumps(dict(event.meta)),
            "" if event.source_event_id is None else str(event.source_event_id),
            repr(created.timestamp())]


def _decode_event(fields: dict[bytes, bytes]) -> ComplianceEvent:
    text = {k.decode(): v.decode() for k, v in fields.items()}
    return ComplianceEvent.from_dict({
        **text,
        "embedding": json.loads(text["embedding"]),
        "meta": json.loads(text["meta"]),
        "sequence": int(text["sequence"]),
    })


class EngineStateStore:
    """The engine's state-store calls (ENGINE-WIRE §1): ``scope=`` only."""

    def __init__(self, client: Any, ttl_seconds: int = 0,
                 turn_parts: Sequence[str] = SAVE_PARTS) -> None:
        self._client = client
        self._ttl = ttl_seconds
        self._save = client.register_script("".join(turn_parts))
        self._delete = client.register_script(DELETE)

    def save(self, session_id: str, blob: bytes, *, expected_version: int | None,
             pending_message: str | None = None, scope: Any = None) -> int:
        args = [bytes(blob), _owner(scope), pending_message or "",
                "" if expected_version is None else str(expected_version),
                "1" if scope is not None else "0", str(self._ttl)]
        code, detail = self._save(keys=[STATE + session_id], args=args)
        if code < 0:
            raise StateVersionConflict(f"session {session_id!r}: {detail.decode()}")
        return int(code)

    def load_full(self, session_id: str, *, scope: Any = None) -> LoadedState | None:
        fields = self._client.hgetall(STATE + session_id)
        if not fields or b"version" not in fields:
            return None
        owner = fields.get(b"owner", b"").decode()
        if scope is not None and owner != _owner(scope):
            return None
        pending = fields.get(b"pending", b"").decode()
        return LoadedState(fields[b"blob"], int(fields[b"version"]), owner or None,
                           pending or None)

    def load(self, session_id: str, *, scope: Any = None) -> tuple[bytes, int] | None:
        full = self.load_full(session_id, scope=scope)
        return None if full is None else (full.blob, full.version)

    def load_owner(self, session_id: str) -> str | None:
        owner = self._client.hget(STATE + session_id, "owner")
        return owner.decode() or None if owner is not None else None

    def current_version(self, session_id: str) -> int | None:
        version = self._client.hget(STATE + session_id, "version")
        return None if version is None else int(version)

    def delete(self, session_id: str, *, scope: Any = None) -> bool:
        args = ["1" if scope is not None else "0", _owner(scope)]
        return bool(self._delete(keys=[STATE + session_id], args=args))

    def set_drift_exempt(self, session_id: str, exempt: bool) -> None:
        if self._client.exists(STATE + session_id):
            self._client.hset(STATE + session_id, "drift_exempt", "1" if exempt else "0")

    def is_drift_exempt(self, session_id: str) -> bool:
        return self._client.hget(STATE + session_id, "drift_exempt") == b"1"

    def ttl_seconds(self) -> int:
        return self._ttl


class EngineEventStore:
    """The engine's event-store surface (ENGINE-WIRE §2), and nothing of ours."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._append = client.register_script(APPEND)
        self._delete_event = client.register_script(DELETE_EVENT)
        self._delete_user = client.register_script(DELETE_USER)

    def init_schema(self) -> None:
        """Redis needs no schema."""

    def append(self, ev: Any) -> ComplianceEvent:
        event = ComplianceEvent.adopt(ev)
        uid = event.user_id
        seq = self._append(keys=[EVENT + str(event.event_id), BY_SEQ + uid, COUNTER + uid,
                                 BY_TIME + uid], args=_event_args(event))
        return event.with_sequence(int(seq))

    def get(self, event_id: Any) -> ComplianceEvent | None:
        fields = self._client.hgetall(EVENT + str(event_id))
        return _decode_event(fields) if fields else None

    def list_by_user(self, user_id: str) -> list[ComplianceEvent]:
        ids = self._client.zrange(BY_SEQ + user_id, 0, -1)
        pipe = self._client.pipeline(transaction=False)
        for event_id in ids:
            pipe.hgetall(EVENT + event_id.decode())
        return [_decode_event(f) for f in pipe.execute() if f]

    def count_for_user(self, user_id: str) -> int:
        return int(self._client.zcard(BY_SEQ + user_id))

    def query_by_user(self, user_id: str, *, query_embedding: Sequence[float] | None = None,
                      limit: int = 10) -> list[ComplianceEvent]:
        events = self.list_by_user(user_id)
        if query_embedding is None:
            events.sort(key=lambda e: (e.created_at, e.sequence), reverse=True)
            return events[:limit]

        def cosine(vector: Sequence[float]) -> float:
            if len(vector) != len(query_embedding) or not vector:
                return 0.0
            norm = math.sqrt(sum(x * x for x in vector)) * math.sqrt(
                sum(x * x for x in query_embedding))
            return 0.0 if norm == 0 else sum(a * b for a, b in zip(vector, query_embedding)) / norm

        events.sort(key=lambda e: (-cosine(e.embedding), e.sequence))
        return events[:limit]

    def delete(self, event_id: Any) -> bool:
        return bool(self._delete_event(keys=[EVENT + str(event_id)], args=[str(event_id)]))

    def delete_by_user(self, user_id: str) -> int:
        return int(self._delete_user(keys=[BY_SEQ + user_id, BY_TIME + user_id,
                                           COUNTER + user_id]))

    def delete_older_than(self, user_id: str, cutoff: datetime) -> int:
        older = self._client.zrangebyscore(BY_TIME + user_id, "-inf",
                                           f"({cutoff.timestamp()!r}")
        return sum(self.delete(event_id.decode()) for event_id in older)


class EngineStyleAdapter:
    """The adapter as the engine attaches it: ``scope=`` everywhere, its own events."""

    name = "engine-style-redis"
    is_persistent = True
    turn_parts: Sequence[str] = TURN_PARTS

    def __init__(self) -> None:
        import redis

        url = os.environ.get("REDIS_URL")
        if not url:
            raise RuntimeError("REDIS_URL is not set (this plugin is configured only "
                               "through its environment)")
        self._client = redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5)
        ttl = int(os.environ.get("SEMVEC_SESSION_TTL_S", "0") or 0)
        self._state = EngineStateStore(self._client, ttl)
        self._events = EngineEventStore(self._client)
        self._turn = self._client.register_script("".join(self.turn_parts))
        self._ttl = ttl

    def state_store(self) -> EngineStateStore:
        return self._state

    def event_store(self) -> EngineEventStore:
        return self._events

    def retrieval_backend(self) -> None:
        return None

    def commit_turn(self, session_id: str, blob: bytes, *, expected_version: int | None,
                    pending_message: str | None = None, events: Sequence[Any] | None = None,
                    scope: Any = None) -> int:
        turn = [ComplianceEvent.adopt(e) for e in events or ()]
        args: list[Any] = [bytes(blob), _owner(scope), pending_message or "",
                           "" if expected_version is None else str(expected_version),
                           "1" if scope is not None else "0", str(self._ttl), str(len(turn))]
        for event in turn:
            args.extend(_event_args(event))
        code, detail = self._turn(keys=[STATE + session_id], args=args)
        if code == -1:
            raise StateVersionConflict(f"session {session_id!r}: {detail.decode()}")
        if code < 0:
            raise ValueError(f"turn refused before any write: {detail.decode()}")
        return int(code)

    def check_health(self) -> bool:
        try:
            return bool(self._client.ping())
        except Exception:  # noqa: BLE001 - a health probe never raises
            return False

    def close(self) -> None:
        self._client.close()


def Factory() -> EngineStyleAdapter:  # noqa: N802 - the name an entry point would use
    """What the engine calls: no arguments, configuration from the environment."""
    return EngineStyleAdapter()
