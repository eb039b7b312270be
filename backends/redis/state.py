"""Session state in Redis: one hash per session, written only by Lua scripts.

Reads are one HMGET; the three-state owner filter is applied to what came back, so a
scoped read costs the same round trip as an unscoped one. Reads are strict: a row with
its blob or version missing, a version that is not a positive decimal, an owner or
pending message that is not UTF-8, or a key of another type raises
:class:`CorruptState` naming the session and the field, never a best-effort value.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Sequence

from backends.contract import (
    DerivedReads,
    speaks_both_conventions,
    UNSCOPED,
    LoadedState,
    OwnerFilter,
    StoredDigest,
    check_delete_version,
    normalise_pending,
    owner_matches,
    validate_owner_filter,
    validate_save_args,
)
from backends.errors import CorruptState, StateVersionConflict, cas_refusal, session_exists
from backends.redis import schema
from backends.redis.bulk import RedisStateBulk
from backends.redis.errors import redis_errors
from backends.redis.scripts import script
from backends.contract.session_ids import NOT_UTF8, UndecodableId, from_key, has_undecodable, shown

# In-band codes shared by insert.lua, cas.lua and commit_turn.lua.
WRITTEN, ALREADY_STORED = 1, 2
MISSING, VERSION_MOVED, OTHER_OWNER, ALREADY_EXISTS, EVENT_EXISTS, DAMAGED_VERSION = (
    -1, -2, -3, -4, -5, -6)

_DECIMAL = re.compile(rb"[1-9][0-9]*")


def conflict_for(code: int, session_id: str, expected_version: int | None,
                 stored: Any) -> Exception:
    """The refusal a script reported in-band, worded for the operator (a conflict, or
    CorruptState for a damaged row)."""
    stored_text = stored.decode("utf-8", "replace") if isinstance(stored, bytes) else stored
    if code == MISSING:
        return cas_refusal(session_id, None, expected_version)
    if code == VERSION_MOVED:
        return cas_refusal(session_id, stored_text, expected_version)
    if code == OTHER_OWNER:  # the version matched: the owner is what refused
        return cas_refusal(session_id, expected_version, expected_version)
    if code == ALREADY_EXISTS:
        return session_exists(session_id)
    if code == DAMAGED_VERSION:
        return CorruptState(session_id, "version", "is missing" if not stored_text
                            else f"is not a positive decimal ({stored_text[:40]!r})")
    return StateVersionConflict(f"session {session_id!r}: write refused (code {code})")


def optional_text(value: bytes | None) -> str | None:
    """'' and a missing field both mean none."""
    if not value:
        return None
    return value.decode("utf-8", errors="replace")


def _strict_text(value: bytes | None, session_id: str, field: str) -> str | None:
    """An optional text field: '' or missing = none; bytes that are not UTF-8 = damaged."""
    if not value:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptState(session_id, field, "is not UTF-8 text") from None


def decode_version(raw: bytes | None, session_id: str) -> int:
    """A stored version: a positive decimal, nothing else (no sign, no fraction)."""
    if raw is None:
        raise CorruptState(session_id, "version", "is missing")
    if not _DECIMAL.fullmatch(raw):
        raise CorruptState(session_id, "version",
                           f"is not a positive decimal ({raw[:40]!r})")
    return int(raw)


def refuse_undecodable(session_id: str) -> None:
    """Writes never create a key whose id is not UTF-8 (the engine could not name it)."""
    if has_undecodable(session_id):
        raise ValueError(f"session_id {shown(session_id)} is not valid UTF-8")


def damage_of(session_id: str, blob: bytes | None, version: bytes | None,
              owner: bytes | None, pending: bytes | None) -> str:
    """What is wrong with a row, for listings that report damage instead of failing
    (``''`` for a sound row); the same rules as the strict reads."""
    try:
        if has_undecodable(session_id):
            raise CorruptState(session_id, "session_id", NOT_UTF8)
        decode_version(version, session_id)
        _strict_text(owner, session_id, schema.F_OWNER)
        _strict_text(pending, session_id, schema.F_PENDING)
        if blob is None:
            raise CorruptState(session_id, schema.F_BLOB, "is missing")
    except CorruptState as exc:
        return f"field {exc.field!r} {exc.problem}"
    return ""


def _count_state_keys(client: Any, where: str, match: str | None, batch: int = 5000) -> int:
    """The state keys the listing's SCAN would read (same pattern and glob), no value
    read: what an unscoped listing shows, bar a key deleted between the two."""
    import fnmatch

    prefix = schema.STATE_PREFIX.encode("utf-8")
    pattern = schema.escape_glob(schema.STATE_PREFIX) + (
        schema.fnmatch_to_redis_prefilter(match) if match else "*")
    count, cursor = 0, 0
    while True:
        with redis_errors(where):
            cursor, raw_keys = client.scan(cursor, match=pattern, count=batch)
        count += sum(1 for raw in raw_keys
                     if match is None or fnmatch.fnmatchcase(from_key(raw[len(prefix):]), match))
        if cursor == 0:
            return count


@speaks_both_conventions
class RedisStateStore(RedisStateBulk, DerivedReads):
    """Compare-and-set session state over the engine's hash layout.

    Idempotent retries (a write whose reply was lost, sent again unchanged): an insert
    that finds the identical row (same blob bytes, owner and pending) at the version it
    would write returns that version; a compare-and-set that finds the row at
    ``expected_version + 1`` with the same blob, owner and pending returns
    ``expected_version + 1``; ``commit_turn`` likewise when every event id of the turn
    is stored too. Each is decided inside the write's Lua script, so a concurrent
    writer cannot slip in between. A different blob, owner or pending is still a
    conflict. ``delete(expected_version=N)`` is checked in its script as well.

    TTL: with ``ttl_seconds > 0`` every write re-applies the expiry; with 0 a write
    leaves an expiry already on the row as it is (the engine's rule). ``drift_exempt``
    is written ``0`` on insert and never changed by a save; only
    :meth:`set_drift_exempt` changes it.
    """

    #: identical retries after a lost reply return the version (see above)
    idempotent_retries = True

    def __init__(self, client: Any, *, ttl_seconds: int, where: str,
                 cluster: bool = False) -> None:
        self._client = client
        self._ttl = ttl_seconds
        self._where = where
        self._cluster = cluster

    def count_sessions(self, *, owner_subject: OwnerFilter = UNSCOPED,
                       match: str | None = None) -> int | None:
        """Unscoped: one SCAN of the state keys, no value read (the listing reads every
        row). The owner lives in the row, so an owner filter is not cheaper than the
        listing: None."""
        validate_owner_filter(owner_subject)
        if owner_subject is not UNSCOPED:
            return None
        if not self._cluster:
            return _count_state_keys(self._client, self._where, match)
        with redis_errors(self._where):
            nodes = [self._client.get_redis_connection(node)
                     for node in self._client.get_primaries()]
        return sum(_count_state_keys(node, self._where, match) for node in nodes)

    def ttl_seconds(self) -> int:
        """The idle TTL applied on each write (0 = none), as the engine calls it."""
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
        refuse_undecodable(session_id)
        owner = owner_subject or ""
        pending = normalise_pending(pending_message) or ""
        key = schema.state_key(session_id)
        with redis_errors(self._where, session_id):
            if expected_version is None:
                written = script("insert")(
                    self._client, [key], [bytes(blob), "1", owner, pending, str(self._ttl)]
                )
                if not written:
                    raise session_exists(session_id)
                return 1
            new_version = expected_version + 1
            reply = script("cas")(
                self._client,
                [key],
                [str(expected_version), str(new_version), bytes(blob), owner, pending, str(self._ttl)],
            )
        if reply[0] not in (WRITTEN, ALREADY_STORED):
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
        """Create a row at the given version (lossless import); never overwrites, but a
        retry that finds the identical row already restored succeeds."""
        validate_save_args(session_id, blob, version, owner_subject)
        refuse_undecodable(session_id)
        ttl = self._ttl if ttl_seconds is None else ttl_seconds
        if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 0:
            raise ValueError("ttl_seconds must be None or a non-negative int")
        args = [bytes(blob), str(version), owner_subject or "",
                normalise_pending(pending_message) or "", str(ttl)]
        with redis_errors(self._where, session_id):
            written = script("insert")(self._client, [schema.state_key(session_id)], args)
        if not written:
            raise session_exists(session_id)

    def delete(self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED,
               expected_version: int | None = None) -> bool:
        """Delete under the owner filter; with ``expected_version`` only a row still at
        that version (a moved row is a conflict and stays). Checked in one script."""
        validate_owner_filter(owner_subject)
        if expected_version is not None:  # the argument rule (a row at it always passes)
            check_delete_version(session_id, expected_version, expected_version)
        if owner_subject is UNSCOPED:
            scope, owner = "any", ""
        elif owner_subject is None:
            scope, owner = "none", ""
        else:
            scope, owner = "owner", owner_subject
        expected = "" if expected_version is None else str(expected_version)
        with redis_errors(self._where, session_id):
            reply = script("delete")(self._client, [schema.addressable_state_key(session_id)],
                                     [scope, owner, expected])
        if reply[0] == VERSION_MOVED:
            stored = reply[1]
            if not _DECIMAL.fullmatch(stored or b""):
                raise CorruptState(session_id, "version", "is missing or not a positive "
                                   "decimal; nothing was deleted")
            check_delete_version(session_id, int(stored), expected_version)
        return bool(reply[0])

    def set_drift_exempt(self, session_id: str, exempt: bool) -> None:
        """Set the row's drift_exempt flag (engine member); a missing session stays
        missing. Nothing else of the row changes."""
        if not isinstance(session_id, str) or not session_id:
            raise ValueError("session_id must be a non-empty string")
        with redis_errors(self._where, session_id):
            script("drift_exempt")(self._client, [schema.state_key(session_id)],
                                   ["1" if exempt else "0"])

    def is_drift_exempt(self, session_id: str) -> bool:
        """The row's drift_exempt flag; False for a missing session (engine member)."""
        with redis_errors(self._where, session_id):
            raw = self._client.hget(schema.addressable_state_key(session_id), schema.F_DRIFT_EXEMPT)
        return raw == b"1"

    # -- reads ---------------------------------------------------------------------

    #: the blob last, so a read without it is a prefix; drift_exempt tells a row that
    #: lost its version apart from no row at all
    _FIELDS = (schema.F_VERSION, schema.F_OWNER, schema.F_PENDING, schema.F_DRIFT_EXEMPT, schema.F_BLOB)

    @staticmethod
    def _decode(session_id: str, values: Sequence[Any], owner_subject: OwnerFilter,
                with_blob: bool) -> LoadedState | None:
        """One HMGET reply as a row, strictly: all fields absent = no row; a row whose
        version (or, when read, blob) is missing or malformed is CorruptState. The owner
        filter is applied before the other checks, so a filtered-out row reveals
        nothing, not even that it is damaged."""
        version_raw, owner_raw, pending_raw = values[0], values[1], values[2]
        if all(v is None for v in values):
            return None
        owner = _strict_text(owner_raw, session_id, schema.F_OWNER)
        if not owner_matches(owner, owner_subject):
            return None
        if has_undecodable(session_id):  # a key a foreign writer made: reported, not read
            raise UndecodableId(session_id)
        version = decode_version(version_raw, session_id)
        pending = _strict_text(pending_raw, session_id, schema.F_PENDING)
        if not with_blob:
            return LoadedState(b"", version, owner, pending)
        if values[4] is None:
            raise CorruptState(session_id, schema.F_BLOB, "is missing")
        return LoadedState(values[4], version, owner, pending)

    def _read(self, session_id: str, owner_subject: OwnerFilter, with_blob: bool) -> LoadedState | None:
        validate_owner_filter(owner_subject)
        fields = self._FIELDS if with_blob else self._FIELDS[:4]
        with redis_errors(self._where, session_id):
            values = self._client.hmget(schema.addressable_state_key(session_id), fields)
        return self._decode(session_id, values, owner_subject, with_blob)

    def load_full_many(self, session_ids: Sequence[str], *,
                       owner_subject: OwnerFilter = UNSCOPED) -> list[LoadedState | None]:
        """``load_full`` for many sessions in one pipelined round trip (exports); a
        damaged row raises CorruptState naming it, as ``load_full`` would."""
        ids = list(session_ids)
        return [self._decode(sid, values, owner_subject, True)
                for sid, values in zip(ids, self._read_many(ids, owner_subject))]

    def load_digests_many(self, session_ids: Sequence[str], *,
                          owner_subject: OwnerFilter = UNSCOPED) -> list[StoredDigest | None]:
        """``load_full_many`` as digests, with the drift flag the same HMGET reads
        (verification's reads: no round trip per session for the flag)."""
        ids = list(session_ids)
        found: list[StoredDigest | None] = []
        for sid, values in zip(ids, self._read_many(ids, owner_subject)):
            row = self._decode(sid, values, owner_subject, True)
            found.append(None if row is None else StoredDigest(
                hashlib.sha256(row.blob).hexdigest(), row.version, row.owner_subject,
                row.pending_message, values[3] == b"1"))
        return found

    def _read_many(self, ids: list[str], owner_subject: OwnerFilter) -> list[Any]:
        """One pipelined HMGET of the row's fields per id; an error reply is raised,
        categorised, naming its session."""
        validate_owner_filter(owner_subject)
        with redis_errors(self._where):
            pipe = self._client.pipeline(transaction=False)
            for session_id in ids:
                pipe.hmget(schema.addressable_state_key(session_id), self._FIELDS)
            replies = pipe.execute(raise_on_error=False)
        for sid, values in zip(ids, replies):
            if isinstance(values, Exception):  # re-raised, categorised, naming the session
                with redis_errors(self._where, sid):
                    raise values
        return replies

    def load_full(self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED) -> LoadedState | None:
        return self._read(session_id, owner_subject, with_blob=True)

    def _head(self, session_id: str, owner_subject: OwnerFilter) -> LoadedState | None:
        return self._read(session_id, owner_subject, with_blob=False)
