"""Session state in Redis: one hash per session, written only by Lua scripts.

Reads are one HMGET; the three-state owner filter is applied to what came back, so a
scoped read costs the same round trip as an unscoped one.
"""

from __future__ import annotations

from typing import Any, Sequence

from backends.contract import (
    DerivedReads,
    speaks_both_conventions,
    UNSCOPED,
    LoadedState,
    OwnerFilter,
    normalise_pending,
    owner_matches,
    validate_owner_filter,
    validate_save_args,
)
from backends.errors import IntegrityError, StateVersionConflict
from backends.redis import keys
from backends.redis.failures import redis_errors
from backends.redis.scripts import script

# In-band codes shared by cas.lua and commit_turn.lua.
MISSING, VERSION_MOVED, OTHER_OWNER, ALREADY_EXISTS, EVENT_EXISTS = -1, -2, -3, -4, -5


def conflict_for(code: int, session_id: str, expected_version: int | None, stored: Any) -> StateVersionConflict:
    """The conflict a script reported in-band, worded for the operator."""
    if code == MISSING:
        return StateVersionConflict(f"session {session_id!r} does not exist")
    if code == VERSION_MOVED:
        stored_text = stored.decode() if isinstance(stored, bytes) else stored
        return StateVersionConflict(
            f"session {session_id!r} is at version {stored_text}, not {expected_version}"
        )
    if code == OTHER_OWNER:
        return StateVersionConflict(f"session {session_id!r} belongs to another owner")
    if code == ALREADY_EXISTS:
        return StateVersionConflict(f"session {session_id!r} already exists")
    return StateVersionConflict(f"session {session_id!r}: write refused (code {code})")


def optional_text(value: bytes | None) -> str | None:
    """'' and a missing field both mean none."""
    if not value:
        return None
    return value.decode("utf-8", errors="replace")


def decode_version(raw: bytes, session_id: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise IntegrityError(f"session {session_id!r} has a non-integer version") from None


@speaks_both_conventions
class RedisStateStore(DerivedReads):
    """Compare-and-set session state over the engine's hash layout."""

    def __init__(self, client: Any, *, ttl_seconds: int, where: str) -> None:
        self._client = client
        self._ttl = ttl_seconds
        self._where = where

    @property
    def ttl_seconds(self) -> int:
        return self._ttl

    # -- writes --------------------------------------------------------------------

    def save(
        self,
        session_id: str,
        blob: bytes,
        *,
        expected_version: int | None,
        owner_subject: str | None = None,
        pending_message: str | None = None,
    ) -> int:
        validate_save_args(session_id, blob, expected_version, owner_subject)
        owner = owner_subject or ""
        pending = normalise_pending(pending_message) or ""
        key = keys.state_key(session_id)
        with redis_errors(self._where):
            if expected_version is None:
                written = script("insert")(
                    self._client, [key], [bytes(blob), "1", owner, pending, str(self._ttl)]
                )
                if not written:
                    raise StateVersionConflict(f"session {session_id!r} already exists")
                return 1
            new_version = expected_version + 1
            reply = script("cas")(
                self._client,
                [key],
                [str(expected_version), str(new_version), bytes(blob), owner, pending, str(self._ttl)],
            )
        if reply[0] != 1:
            raise conflict_for(reply[0], session_id, expected_version, reply[1])
        return new_version

    def restore_session(
        self,
        session_id: str,
        blob: bytes,
        *,
        version: int,
        owner_subject: str | None = None,
        pending_message: str | None = None,
        ttl_seconds: int | None = None,
    ) -> None:
        """Create a row at the given version (lossless import); never overwrites."""
        validate_save_args(session_id, blob, version, owner_subject)
        ttl = self._ttl if ttl_seconds is None else ttl_seconds
        if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 0:
            raise ValueError("ttl_seconds must be None or a non-negative int")
        args = [bytes(blob), str(version), owner_subject or "",
                normalise_pending(pending_message) or "", str(ttl)]
        with redis_errors(self._where):
            written = script("insert")(self._client, [keys.state_key(session_id)], args)
        if not written:
            raise StateVersionConflict(f"session {session_id!r} already exists")

    def delete(self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED) -> bool:
        validate_owner_filter(owner_subject)
        if owner_subject is UNSCOPED:
            scope, owner = "any", ""
        elif owner_subject is None:
            scope, owner = "none", ""
        else:
            scope, owner = "owner", owner_subject
        with redis_errors(self._where):
            deleted = script("delete")(self._client, [keys.state_key(session_id)], [scope, owner])
        return bool(deleted)

    # -- reads ---------------------------------------------------------------------

    _FIELDS = (keys.F_VERSION, keys.F_OWNER, keys.F_PENDING, keys.F_BLOB)

    @staticmethod
    def _decode(session_id: str, values: Sequence[Any], owner_subject: OwnerFilter,
                with_blob: bool) -> LoadedState | None:
        version_raw, owner_raw, pending_raw = values[0], values[1], values[2]
        if version_raw is None:
            return None
        owner = optional_text(owner_raw)
        if not owner_matches(owner, owner_subject):
            return None
        blob = (values[3] or b"") if with_blob else b""
        return LoadedState(blob, decode_version(version_raw, session_id), owner, optional_text(pending_raw))

    def _read(self, session_id: str, owner_subject: OwnerFilter, with_blob: bool) -> LoadedState | None:
        validate_owner_filter(owner_subject)
        fields = self._FIELDS if with_blob else self._FIELDS[:3]
        with redis_errors(self._where):
            values = self._client.hmget(keys.state_key(session_id), fields)
        return self._decode(session_id, values, owner_subject, with_blob)

    def load_full_many(self, session_ids: Sequence[str], *,
                       owner_subject: OwnerFilter = UNSCOPED) -> list[LoadedState | None]:
        """``load_full`` for many sessions in one pipelined round trip (exports)."""
        validate_owner_filter(owner_subject)
        ids = list(session_ids)
        with redis_errors(self._where):
            pipe = self._client.pipeline(transaction=False)
            for session_id in ids:
                pipe.hmget(keys.state_key(session_id), self._FIELDS)
            replies = pipe.execute()
        return [self._decode(sid, values, owner_subject, True) for sid, values in zip(ids, replies)]

    def load_full(self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED) -> LoadedState | None:
        return self._read(session_id, owner_subject, with_blob=True)

    def load_owner(self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED) -> str | None:
        state = self._read(session_id, owner_subject, with_blob=False)
        return state.owner_subject if state else None

    def current_version(self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED) -> int | None:
        state = self._read(session_id, owner_subject, with_blob=False)
        return state.version if state else None
