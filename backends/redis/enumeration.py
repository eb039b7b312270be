"""Stream session summaries with SCAN + one pipelined read per batch (never KEYS).

Each batch is one round trip: an HMGET per session and a single script call for the
batch's TTLs (a PTTL per key would double what the client packs and parses), packed
here in RESP because redis-py's generic per-argument packing was the listing's largest
client cost.

Memory stays flat whatever the number of sessions: one batch of keys and blobs is held at
a time. SCAN may report a key twice while the server resizes its table; we do not keep a
set of every id seen to filter that out, because that set would grow with the keyspace.

``ordered=True`` (what ``sessions list`` asks for) gives session id order instead of
SCAN's hash order (bytewise, as every other store lists them: PostgreSQL ``COLLATE "C"``,
MongoDB ``_id``, memory): the matching key names are collected first, each once, then
read a batch at a time, so only the names grow with the keyspace (about 100 bytes a
session), never the blobs.

On a Redis Cluster each primary is scanned in turn through its own node client: SCAN
sees one node's keys only (ordered: the nodes' ordered streams are merged). A batch's
keys then span hash slots, which one script may not touch, so there the TTLs come from
one PTTL per key in the same round trip.
"""

from __future__ import annotations

import fnmatch
import hashlib
import heapq
import math
from typing import Any, Iterator

from backends.contract import (UNSCOPED, LoadedState, OwnerFilter, SessionSummary, owner_matches,
                               validate_owner_filter)
from backends.redis import schema
from backends.redis.errors import redis_errors
from backends.redis.scripts import bulk, checkout, script
from backends.redis.state import RedisStateStore, damage_of, optional_text
from backends.contract.session_ids import from_key, to_key

_FIELDS = (schema.F_BLOB, schema.F_VERSION, schema.F_OWNER, schema.F_PENDING, schema.F_DRIFT_EXEMPT)
_PREFIX = schema.STATE_PREFIX.encode("utf-8")


def _summary(session_id: str, values: Any, pttl: Any) -> SessionSummary | None:
    """A listing row. A damaged row (fields missing or malformed, or a key of another
    type under the prefix) is listed with ``extra['damaged']`` saying which field and
    what is wrong, and version 0 when its version is unusable: one bad row never hides
    or fails the others, and never passes for a sound one."""
    ttl = None
    if isinstance(pttl, int) and pttl >= 0:
        ttl = math.ceil(pttl / 1000)
    if isinstance(values, Exception):
        return SessionSummary(session_id=session_id, version=0, owner_subject=None,
                              pending_message=None, blob_size=0, blob_sha256="",
                              ttl_seconds=ttl,
                              extra={"damaged": "field 'key' holds another type than a hash"})
    if values is None or all(v is None for v in values):
        return None  # gone meanwhile
    blob, version, owner, pending, drift = values
    damage = damage_of(session_id, blob, version, owner, pending)
    extra: dict[str, Any] = {"drift_exempt": drift == b"1"}
    if damage:
        extra["damaged"] = damage
    version_number = int(version) if version and version.isdigit() and int(version) >= 1 else 0
    return SessionSummary(
        session_id=session_id,
        version=version_number,
        owner_subject=optional_text(owner),
        pending_message=optional_text(pending),
        blob_size=len(blob or b""),
        blob_sha256=hashlib.sha256(blob).hexdigest() if blob is not None else "",
        ttl_seconds=ttl,
        extra=extra,
    )


_HMGET_HEAD = b"*%d\r\n" % (2 + len(_FIELDS)) + bulk(b"HMGET")
_HMGET_TAIL = b"".join(bulk(f.encode("utf-8")) for f in _FIELDS)


_PTTL_HEAD = b"*2\r\n" + bulk(b"PTTL")


def _pack_batch(raw_keys: list[bytes], per_key_ttl: bool = False) -> bytes:
    """The RESP bytes of one HMGET per key plus one EVALSHA of the TTL script (or one
    PTTL per key when the keys may span cluster slots).

    Packed here rather than by redis-py's pipeline: the command shape is fixed, and
    generic per-argument packing is what dominates listing time on the client.
    """
    parts = [_HMGET_HEAD + bulk(key) + _HMGET_TAIL for key in raw_keys]
    if per_key_ttl:
        parts.extend(_PTTL_HEAD + bulk(key) for key in raw_keys)
    else:
        parts.append(script("pttl_many").pack(raw_keys, ()))
    return b"".join(parts)


def _read_batch(client: Any, raw_keys: list[bytes],
                per_key_ttl: bool = False) -> tuple[list[Any], list[Any]]:
    """One round trip on one pooled connection: an HMGET per key, then the batch's TTLs.

    An error reply (a foreign key of another type) is kept in place of its value; the
    connection stays in step because each reply is read whole before the next.
    """
    from redis.exceptions import NoScriptError, ResponseError

    ttl_script = script("pttl_many")
    pool = client.connection_pool
    # hand-packed on purpose (see _pack_batch); only documented Connection methods
    # (send_packed_command, read_response) on a connection the pool checked out and gets
    # back: checked against redis-py 5.0.0, 5.2.1, 5.3.0, 6.4.0 and 8.1.0
    connection = checkout(pool)
    try:
        connection.send_packed_command([_pack_batch(raw_keys, per_key_ttl)])
        values: list[Any] = []
        for _ in raw_keys:
            try:
                values.append(connection.read_response())
            except ResponseError as exc:
                values.append(exc)
        ttls: Any
        if per_key_ttl:
            ttls = [connection.read_response() for _ in raw_keys]
        else:
            try:
                ttls = connection.read_response()
            except NoScriptError:
                ttls = None
    finally:
        pool.release(connection)
    if ttls is None:  # first use on this server, or flushed meanwhile
        ttls = ttl_script(client, raw_keys, [])
    return values, ttls


def iter_sessions(
    client: Any,
    where: str,
    *,
    owner_subject: OwnerFilter = UNSCOPED,
    match: str | None = None,
    batch_size: int = 500,
    per_key_ttl: bool = False,
    ordered: bool = False,
) -> Iterator[SessionSummary]:
    for summary, _ in _rows(client, where, owner_subject, match, batch_size, per_key_ttl,
                            ordered):
        yield summary


def iter_session_states(
    client: Any,
    where: str,
    *,
    owner_subject: OwnerFilter = UNSCOPED,
    match: str | None = None,
    batch_size: int = 500,
    per_key_ttl: bool = False,
    ordered: bool = False,
) -> Iterator[tuple[SessionSummary, LoadedState]]:
    """``iter_sessions`` with each session's row decoded from the same reply (the blob
    read once); a damaged row raises as ``load_full`` would."""
    for summary, values in _rows(client, where, owner_subject, match, batch_size,
                                 per_key_ttl, ordered):
        sid = summary.session_id
        if isinstance(values, Exception):  # re-raised, categorised, naming the session
            with redis_errors(where, sid):
                raise values
        blob, version, owner, pending, drift = values
        state = RedisStateStore._decode(sid, (version, owner, pending, drift, blob),
                                        owner_subject, True)
        if state is not None:
            yield summary, state


def _rows(client: Any, where: str, owner_subject: OwnerFilter, match: str | None,
          batch_size: int, per_key_ttl: bool, ordered: bool) -> Iterator[tuple[SessionSummary, Any]]:
    """Each matching session's summary with the raw HMGET reply it was made from."""
    validate_owner_filter(owner_subject)
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError("batch_size must be a positive int")
    if ordered:
        names = _matching_keys(client, where, match, batch_size)
        batches: Iterator[list[bytes]] = (names[i:i + batch_size]
                                          for i in range(0, len(names), batch_size))
    else:
        batches = _scanned(client, where, match, batch_size)
    for raw_keys in batches:
        with redis_errors(where):
            values, ttls = (_read_batch(client, raw_keys, per_key_ttl) if raw_keys
                            else ([], []))
        for i, raw_key in enumerate(raw_keys):
            summary = _summary(from_key(raw_key[len(_PREFIX):]), values[i], ttls[i])
            if summary is not None and owner_matches(summary.owner_subject, owner_subject):
                yield summary, values[i]


def _pattern(match: str | None) -> str:
    return schema.escape_glob(schema.STATE_PREFIX) + (
        schema.fnmatch_to_redis_prefilter(match) if match else "*"
    )


def _matches(raw_key: bytes, match: str | None) -> bool:
    return match is None or fnmatch.fnmatchcase(from_key(raw_key[len(_PREFIX):]), match)


#: keys SCAN walks per round trip at least: state keys are a fraction of a keyspace that
#: holds events too, so a SCAN of ``batch_size`` would return a few keys a round trip
SCAN_COUNT = 5000


def _scanned(client: Any, where: str, match: str | None, batch_size: int) -> Iterator[list[bytes]]:
    """Matching state keys in batches of ``batch_size`` (the last shorter), SCAN walking
    at least :data:`SCAN_COUNT` keys a round trip (flat memory: at most one walk and one
    batch held)."""
    pattern = _pattern(match)
    cursor = 0
    held: list[bytes] = []
    while True:
        with redis_errors(where):
            cursor, raw_keys = client.scan(cursor, match=pattern,
                                           count=max(batch_size, SCAN_COUNT))
        held.extend(k for k in raw_keys if _matches(k, match))
        while len(held) >= batch_size:
            yield held[:batch_size]
            held = held[batch_size:]
        if cursor == 0:
            yield held
            return


def _matching_keys(client: Any, where: str, match: str | None, batch_size: int) -> list[bytes]:
    """Every state key whose session id matches, each once, in bytewise order."""
    pattern = _pattern(match)
    found: set[bytes] = set()
    cursor = 0
    while True:
        with redis_errors(where):
            cursor, raw_keys = client.scan(cursor, match=pattern,
                                           count=max(batch_size, SCAN_COUNT))
        found.update(bytes(k) for k in raw_keys if _matches(k, match))
        if cursor == 0:
            return sorted(found)


def iter_cluster_sessions(
    cluster: Any,
    where: str,
    *,
    owner_subject: OwnerFilter = UNSCOPED,
    match: str | None = None,
    batch_size: int = 500,
    ordered: bool = False,
    states: bool = False,
) -> Iterator[Any]:
    """Every primary of a Redis Cluster in turn (SCAN sees one node's keys only); with
    ``ordered``, the primaries' ordered streams merged into one id order; with
    ``states``, ``(summary, row)`` pairs as :func:`iter_session_states` gives them."""
    validate_owner_filter(owner_subject)
    with redis_errors(where):
        primaries = list(cluster.get_primaries())
    streams = []
    listing = iter_session_states if states else iter_sessions
    for node in primaries:
        with redis_errors(where):
            node_client = cluster.get_redis_connection(node)
        streams.append(listing(node_client, where, owner_subject=owner_subject,
                               match=match, batch_size=batch_size, per_key_ttl=True,
                               ordered=ordered))
    if ordered:
        def order(item: Any) -> bytes:
            return to_key((item[0] if states else item).session_id)

        yield from heapq.merge(*streams, key=order)
    else:
        for stream in streams:
            yield from stream


def node_client_for(cluster: Any, where: str, session_id: str) -> Any:
    """The plain client of the primary that owns a session's slot."""
    with redis_errors(where):
        node = cluster.get_node_from_key(schema.addressable_state_key(session_id))
        return cluster.get_redis_connection(node)


def describe_session(
    client: Any, where: str, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED
) -> SessionSummary | None:
    validate_owner_filter(owner_subject)
    with redis_errors(where):
        (values,), (pttl,) = _read_batch(client, [_PREFIX + to_key(session_id)])
    summary = _summary(session_id, values, pttl)
    if summary is None or not owner_matches(summary.owner_subject, owner_subject):
        return None
    return summary


_VERSIONS_HEAD = b"*4\r\n" + bulk(b"HMGET")
_VERSIONS_TAIL = bulk(schema.F_VERSION.encode("utf-8")) + bulk(schema.F_OWNER.encode("utf-8"))


def _read_versions(client: Any, raw_keys: list[bytes]) -> list[Any]:
    """One round trip: an HMGET of version and owner per key, hand-packed as
    :func:`_pack_batch` is (an error reply, a key of another type, kept in its place)."""
    from redis.exceptions import ResponseError

    pool = client.connection_pool
    connection = checkout(pool)
    try:
        connection.send_packed_command(
            [b"".join(_VERSIONS_HEAD + bulk(key) + _VERSIONS_TAIL for key in raw_keys)])
        replies: list[Any] = []
        for _ in raw_keys:
            try:
                replies.append(connection.read_response())
            except ResponseError as exc:
                replies.append(exc)
    finally:
        pool.release(connection)
    return replies


def iter_versions(client: Any, where: str, *, owner_subject: OwnerFilter = UNSCOPED,
                  match: str | None = None, batch_size: int = 500) -> Iterator[tuple[str, int]]:
    """``(session id, version)`` of every session, without reading blobs: SCAN and one
    hand-packed round trip of HMGETs of version and owner per batch (a live migration's
    catch-up passes over unchanged sessions). A version that is not a number is reported as 0."""
    validate_owner_filter(owner_subject)
    pattern = schema.escape_glob(schema.STATE_PREFIX) + (
        schema.fnmatch_to_redis_prefilter(match) if match else "*")
    cursor = 0
    while True:
        with redis_errors(where):
            cursor, raw_keys = client.scan(cursor, match=pattern, count=batch_size)
            replies = _read_versions(client, raw_keys) if raw_keys else []
        for raw_key, reply in zip(raw_keys, replies):
            session_id = from_key(raw_key[len(_PREFIX):])
            if match is not None and not fnmatch.fnmatchcase(session_id, match):
                continue
            if isinstance(reply, Exception) or reply is None or reply[0] is None:
                yield session_id, 0  # a foreign key, or gone: the caller reads it strictly
                continue
            owner = reply[1].decode("utf-8", "surrogateescape") if reply[1] else None
            if not owner_matches(owner, owner_subject):
                continue
            try:
                yield session_id, int(reply[0])
            except ValueError:
                yield session_id, 0
        if cursor == 0:
            return
