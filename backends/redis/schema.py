"""The Redis key layout shared with deployed semvec stores.

Every key name lives here so that the layout the engine writes and the one we read
cannot drift apart module by module.
"""

from __future__ import annotations

from backends.contract.session_ids import has_undecodable, to_key

STATE_PREFIX = "semvec:state:"
EVENT_PREFIX = "semvec:events:e:"
USER_SEQ_INDEX_PREFIX = "semvec:events:u:"
USER_TIME_INDEX_PREFIX = "semvec:events:t:"
USER_COUNTER_PREFIX = "semvec:events:seq:"
#: the erasure ledger (ours; the engine never reads it): a hash of secrets (key id ->
#: JSON), the key id of the store's own secret, and a hash of entries
#: (``<key id>:<hmac>`` -> JSON erasure time and receipt)
LEDGER_PREFIX = "semvec:ctl:ledger:"
LEDGER_KEYS_KEY = LEDGER_PREFIX + "keys"
LEDGER_OWN_KEY = LEDGER_PREFIX + "own"
LEDGER_ENTRIES_KEY = LEDGER_PREFIX + "entries"
#: the store's identity (JSON, set once) and the counter of the entries' positions
LEDGER_IDENTITY_KEY = LEDGER_PREFIX + "identity"
LEDGER_SEQ_KEY = LEDGER_PREFIX + "seq"

# Fields of a session hash. ``owner`` and ``pending`` are '' for none.
F_BLOB = "blob"
F_VERSION = "version"
F_OWNER = "owner"
F_DRIFT_EXEMPT = "drift_exempt"
F_PENDING = "pending"

# Fields of an event hash, in the order the commit script receives them.
EVENT_FIELDS = (
    "event_id",
    "user_id",
    "owner_subject",
    "session_id",
    "created_at",
    "content",
    "embedding",
    "meta",
    "source_event_id",
    "sequence",
)


def state_key(session_id: str) -> str:
    return STATE_PREFIX + session_id


def addressable_state_key(session_id: str) -> str | bytes:
    """The session's key for reads and deletes; bytes when the id holds bytes that are
    not UTF-8 (held surrogate-escaped, see backends.contract.session_ids), so such a key stays
    reachable. Writes use :func:`state_key` and refuse such ids."""
    if has_undecodable(session_id):
        return STATE_PREFIX.encode("utf-8") + to_key(session_id)
    return STATE_PREFIX + session_id


def event_key(event_id: str) -> str:
    return EVENT_PREFIX + event_id


def user_seq_index_key(user_id: str) -> str:
    return USER_SEQ_INDEX_PREFIX + user_id


def user_time_index_key(user_id: str) -> str:
    return USER_TIME_INDEX_PREFIX + user_id


def user_counter_key(user_id: str) -> str:
    return USER_COUNTER_PREFIX + user_id


_GLOB_SPECIAL = frozenset("*?[]\\")


def escape_glob(literal: str) -> str:
    """Make a literal safe inside a Redis MATCH pattern (``\\`` escapes one character)."""
    return "".join("\\" + ch if ch in _GLOB_SPECIAL else ch for ch in literal)


def fnmatch_to_redis_prefilter(pattern: str) -> str:
    """A Redis MATCH pattern that matches AT LEAST what an fnmatch glob matches.

    Redis globs are byte-oriented (``?`` is one byte, not one character), escape with
    ``\\`` and negate sets with ``^``, while fnmatch (the memory backend's dialect) is
    character-oriented with no escape. So literal runs are escaped and every wildcard or
    set widens to ``*``; callers then apply ``fnmatch.fnmatchcase`` for the exact answer.
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch in "*?":
            wildcard = True
        elif ch == "[":
            j = i + 1
            if j < n and pattern[j] == "!":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            wildcard = j < n  # unterminated '[' is a literal in fnmatch
            if wildcard:
                i = j
        else:
            wildcard = False
        if wildcard:
            if not out or out[-1] != "*":
                out.append("*")
        else:
            out.append(escape_glob(ch))
        i += 1
    return "".join(out)


#: what else the engine keeps under ``semvec:`` (ENGINE-WIRE section 6b): its own, not
#: ours to judge. Exact names, then prefixes.
ENGINE_KEYS = ("semvec:observers", "semvec:clusters", "semvec:regions")
ENGINE_KEY_PREFIXES = ("semvec:cortex:global:", "semvec:drift:", "semvec:ratelimit:",
                       "semvec:proxykey:", "semvec:observer:", "semvec:observer_by_owner",
                       "semvec:cluster:", "semvec:region:", "semvec:debug:events")


#: our own families under ``semvec:`` besides the engine's (known to the doctor)
OWN_KEY_PREFIXES = (LEDGER_PREFIX,)


def is_engine_key(key: str) -> bool:
    """A key of one of the engine's other families (not state, not the event log), or
    of our own (the erasure ledger): known, never an unknown key."""
    return key in ENGINE_KEYS or key.startswith(ENGINE_KEY_PREFIXES + OWN_KEY_PREFIXES)
