"""Session state on MongoDB: one document per session, compare-and-set by filter.

The version check, the owner rule and the write happen in ONE server-side operation
(an ``update_one`` whose filter carries the expected version and owner, and whose
``$set`` keeps fields we do not know, as the engine's does), so two writers can never
both win. Reads are strict: a document with a missing or mistyped field, an impossible
version, or a blob that fails its recorded ``blob_sha256`` raises :class:`CorruptState`, never a
best-effort value the engine would then save over. With an idle TTL configured, a
document older than the TTL is expired even before MongoDB's TTL monitor (~60 s)
removes it: it reads as absent and refuses updates, as an expired Redis key does.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator, Mapping

from backends.contract import (
    as_utc,
    check_delete_version,
    DerivedReads,
    speaks_both_conventions,
    UNSCOPED,
    LoadedState,
    OwnerFilter,
    SessionSummary,
    normalise_pending,
    validate_owner_filter,
    validate_save_args,
)
from backends.errors import CorruptState, StateVersionConflict, cas_refusal, session_exists
from backends.mongo.errors import driver_errors
from backends.mongo.schema import STATE_COLLECTION

#: Everything but the blob: what reads that do not need it fetch.
META_PROJECTION = {"blob": 0}


def bson_utc(value: Any) -> datetime | None:
    """A stored date as aware UTC (BSON datetimes come back naive unless the client is
    tz-aware); None for anything that is not a date."""
    return as_utc(value) if isinstance(value, datetime) else None


def bson_time(value: Any) -> datetime | None:
    """:func:`bson_utc`, truncated to BSON's millisecond precision so a round trip
    compares equal."""
    value = bson_utc(value)
    if value is None:
        return None
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


def utcnow() -> datetime:
    """Now, at BSON's millisecond precision."""
    return bson_time(datetime.now(timezone.utc))  # type: ignore[return-value]


def owner_clause(owner_subject: OwnerFilter) -> dict[str, Any]:
    """The three-state owner filter as a query fragment. Unowned is stored as null or a
    missing field by us and as ``""`` by the engine's event store: ``None`` matches all
    three."""
    validate_owner_filter(owner_subject)
    if owner_subject is UNSCOPED:
        return {}
    if owner_subject is None:
        return {"owner_subject": {"$in": [None, ""]}}
    return {"owner_subject": owner_subject}


def _digest(blob: bytes) -> str:
    return hashlib.sha256(blob).hexdigest()


def _checked_version(session_id: str, doc: Mapping[str, Any]) -> int:
    """The stored version, or CorruptState: an int >= 1 (a bool or a float is damage,
    not a version to round)."""
    if "version" not in doc:
        raise CorruptState(session_id, "version", "is missing")
    version = doc["version"]
    if isinstance(version, bool) or not isinstance(version, int):
        raise CorruptState(session_id, "version", f"is a {type(version).__name__}, not an integer")
    if version < 1:
        raise CorruptState(session_id, "version", f"is {version}, below 1")
    return int(version)


def _checked_text(session_id: str, doc: Mapping[str, Any], name: str) -> str | None:
    """An optional text field (owner, pending): a string or null; ``""`` reads as none."""
    value = doc.get(name)
    if value is not None and not isinstance(value, str):
        raise CorruptState(session_id, name, f"is a {type(value).__name__}, not a string")
    return value or None


def strict_state(session_id: str, doc: Mapping[str, Any]) -> LoadedState:
    """A stored state document as :class:`LoadedState`, every field checked."""
    if "blob" not in doc:
        raise CorruptState(session_id, "blob", "is missing")
    blob = doc["blob"]
    if not isinstance(blob, (bytes, bytearray)):
        raise CorruptState(session_id, "blob", f"is a {type(blob).__name__}, not binary")
    version = _checked_version(session_id, doc)
    stored = doc.get("blob_sha256")
    # verified when present; a document without one (missing, null, empty: any falsy value,
    # as the engine tests it; its "written before the hash existed") loads, as the engine's
    # load_full does (ENGINE-WIRE section 4)
    if stored and (not isinstance(stored, str) or stored.lower() != _digest(bytes(blob))):
        raise CorruptState(session_id, "blob_sha256",
                           "does not match the blob (damaged or changed outside semvec)")
    return LoadedState(
        blob=bytes(blob),
        version=version,
        owner_subject=_checked_text(session_id, doc, "owner_subject"),
        pending_message=_checked_text(session_id, doc, "pending_message"),
    )


def glob_to_regex(pattern: str) -> str:
    """A shell glob as an anchored regular expression with exactly fnmatch's semantics
    (``*``, ``?``, ``[...]``, ``[!...]``, literal ``]`` first in a class, unclosed ``[``).

    ``fnmatch.translate`` does the hard part; its output uses only constructs MongoDB's
    PCRE shares with Python (inline ``(?s:)``, lookahead, ``(?P<name>)`` groups), and the
    trailing ``\\Z`` becomes ``(?![\\s\\S])`` (absolute end in both dialects; PCRE's ``\\Z``
    and both dialects' ``$`` also match before a final newline).
    """
    import fnmatch

    translated = fnmatch.translate(pattern)
    if translated.endswith("\\Z"):
        translated = translated[:-2]
    return "^" + translated + r"(?![\s\S])"


_exists = session_exists


def _same_write(current: Mapping[str, Any], doc: Mapping[str, Any]) -> bool:
    """True when the stored document is exactly what ``doc`` writes (version, digest,
    owner, pending): the write already landed and its acknowledgement was lost."""
    return (current.get("version") == doc["version"]
            and not isinstance(current.get("version"), bool)
            and current.get("blob_sha256") == doc["blob_sha256"]
            and (current.get("owner_subject") or None) == (doc["owner_subject"] or None)
            and (current.get("pending_message") or None) == doc["pending_message"])


def state_document(session_id: str, blob: bytes, version: int, owner_subject: str | None,
                   pending_message: str | None) -> dict[str, Any]:
    data = bytes(blob)
    return {
        "_id": session_id,
        "version": version,
        "blob": data,
        "blob_sha256": hashlib.sha256(data).hexdigest(),
        "owner_subject": owner_subject,
        "pending_message": normalise_pending(pending_message),
        "updated_at": utcnow(),
    }


#: "Unknown expression/operator" codes: the server predates ``$binarySize``
#: (``None``: an in-process fake that does not say).
_UNKNOWN_OPERATOR_CODES = frozenset({None, 168, 15999, 31325})


def _is_unknown_operator(exc: BaseException) -> bool:
    from pymongo.errors import OperationFailure

    if isinstance(exc, NotImplementedError):
        return True
    return isinstance(exc, OperationFailure) and exc.code in _UNKNOWN_OPERATOR_CODES


@speaks_both_conventions
class MongoStateStore(DerivedReads):
    """StateStoreProtocol over ``semvec_session_state``. ``session`` arguments let
    commit_turn run the same writes inside a transaction."""

    #: A retried insert or CAS whose exact result is stored (``blob_sha256``, owner,
    #: pending, version) returns that version instead of a conflict.
    idempotent_retries = True
    #: every write stamps ``updated_at`` (UTC), so idle sessions can be found (``prune``)
    records_write_time = True

    def __init__(self, database: Any, *, session_ttl_s: int | None = None) -> None:
        self._collection = database[STATE_COLLECTION]
        self._session_ttl_s = session_ttl_s
        self._size_by_aggregate: bool | None = None

    @property
    def collection(self) -> Any:
        return self._collection

    def ttl_seconds(self) -> int | None:
        """The idle TTL (the engine asks its Redis and Mongo stores); None when off."""
        return self._session_ttl_s

    # -- expiry -----------------------------------------------------------------------

    def _cutoff(self) -> datetime | None:
        """Documents last written before this are expired (None: no TTL configured)."""
        if not self._session_ttl_s:
            return None
        return datetime.now(timezone.utc) - timedelta(seconds=self._session_ttl_s)

    def _expired(self, doc: Mapping[str, Any]) -> bool:
        cutoff = self._cutoff()
        updated = bson_utc(doc.get("updated_at"))
        return cutoff is not None and updated is not None and updated < cutoff

    def _live_clause(self) -> dict[str, Any]:
        """Filter fragment that refuses expired documents (a missing ``updated_at``
        never expires, as the TTL monitor never removes it)."""
        cutoff = self._cutoff()
        return {} if cutoff is None else {"updated_at": {"$not": {"$lt": bson_time(cutoff)}}}

    def _expired_clause(self) -> dict[str, Any]:
        cutoff = self._cutoff()
        return {"updated_at": {"$lt": bson_time(cutoff)}} if cutoff is not None else {}

    # -- writes ---------------------------------------------------------------------

    def save(
        self,
        session_id: str,
        blob: bytes,
        *,
        expected_version: int | None,
        owner_subject: str | None = None,
        pending_message: str | None = None,
        session: Any = None,
    ) -> int:
        validate_save_args(session_id, blob, expected_version, owner_subject)
        new_version = 1 if expected_version is None else expected_version + 1
        doc = state_document(session_id, blob, new_version, owner_subject, pending_message)
        kwargs = {"session": session} if session is not None else {}
        if expected_version is None:
            return self._insert(session_id, doc, kwargs)
        flt: dict[str, Any] = {"_id": session_id, "version": expected_version,
                               **self._live_clause()}
        if owner_subject is not None:
            flt["owner_subject"] = {"$in": [owner_subject, None, ""]}
        fields = {k: v for k, v in doc.items() if k != "_id"}
        with driver_errors("state.compare_and_set"):
            matched = self._collection.update_one(flt, {"$set": fields}, **kwargs).matched_count
        if matched != 1:
            self._after_lost_update(session_id, expected_version, doc, kwargs)
        return new_version

    def _insert(self, session_id: str, doc: dict[str, Any], kwargs: Mapping[str, Any]) -> int:
        """Insert at version 1. A document already there is, in this order: an expired one
        (replaced, as if the TTL monitor had run), this very insert retried after a lost
        acknowledgement (same digest, owner and pending, still at version 1: returns 1),
        or a conflict. In a transaction the existing document is read first, because a
        failed write would abort the transaction."""
        if kwargs:
            with driver_errors("state.insert_check"):
                current = self._collection.find_one({"_id": session_id}, **kwargs)
            if current is None:
                with driver_errors("state.insert", on_duplicate=lambda: _exists(session_id)):
                    self._collection.insert_one(doc, **kwargs)
                return 1
        else:
            try:
                with driver_errors("state.insert", on_duplicate=lambda: _exists(session_id)):
                    self._collection.insert_one(doc)
                return 1
            except StateVersionConflict:
                current = None
        if self._expired_clause():
            replacement = {k: v for k, v in doc.items() if k != "_id"}
            with driver_errors("state.insert_over_expired"):
                replaced = self._collection.replace_one(
                    {"_id": session_id, **self._expired_clause()}, replacement, **kwargs
                ).matched_count
            if replaced == 1:
                return 1
        if current is None:
            with driver_errors("state.insert_check"):
                current = self._collection.find_one({"_id": session_id}, **kwargs)
        if current is not None and _same_write(current, doc):
            return 1
        raise _exists(session_id)

    def _after_lost_update(self, session_id: str, expected_version: int,
                           doc: Mapping[str, Any], kwargs: Mapping[str, Any]) -> None:
        """The CAS matched nothing: return quietly if the stored document IS this write
        (a retry after a lost acknowledgement), else raise the conflict that says why."""
        with driver_errors("state.explain_conflict"):
            current = self._collection.find_one({"_id": session_id}, **kwargs)
        if current is not None and not self._expired(current) and _same_write(current, doc):
            return
        raise cas_refusal(session_id, None if current is None else current.get("version"),
                          expected_version, expired=current is not None and self._expired(current))

    def restore_session(
        self,
        session_id: str,
        blob: bytes,
        *,
        version: int,
        owner_subject: str | None = None,
        pending_message: str | None = None,
        ttl_seconds: int | None = None,
        updated_at: datetime | None = None,
    ) -> None:
        """Create a session at ``version``; never overwrites a live one (an expired one
        is replaced). ``ttl_seconds`` is not per-session on MongoDB (the idle TTL index
        applies to every session). ``updated_at`` (a copy's source write time) is stored
        as given, so the idle clock does not restart; else now."""
        validate_save_args(session_id, blob, version, owner_subject)
        if version is None:
            raise ValueError("version must be a positive int")
        if updated_at is not None and not isinstance(updated_at, datetime):
            raise ValueError("updated_at must be a datetime")
        doc = state_document(session_id, blob, version, owner_subject, pending_message)
        if updated_at is not None:
            doc["updated_at"] = bson_time(updated_at)
        try:
            with driver_errors("state.restore", on_duplicate=lambda: _exists(session_id)):
                self._collection.insert_one(doc)
        except StateVersionConflict:
            if not self._expired_clause():
                raise
            replacement = {k: v for k, v in doc.items() if k != "_id"}
            with driver_errors("state.restore_over_expired"):
                if self._collection.replace_one({"_id": session_id, **self._expired_clause()},
                                                replacement).matched_count != 1:
                    raise

    def delete(self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED,
               expected_version: int | None = None) -> bool:
        """True when a live session was deleted. With ``expected_version``, only a row
        still at that version goes; a moved row is a conflict and stays. An expired
        row is removed (the TTL monitor would) but reported as absent (False)."""
        flt = {"_id": session_id, **owner_clause(owner_subject)}
        if expected_version is None:  # one round trip: delete what is live, reap what is not
            with driver_errors("state.delete"):
                if self._collection.delete_one({**flt, **self._live_clause()}).deleted_count:
                    return True
                if self._expired_clause():
                    self._collection.delete_one({**flt, **self._expired_clause()})
            return False
        check_delete_version(session_id, expected_version, expected_version)  # validates
        for _attempt in range(3):
            # The version is in the filter: a row that moved is never deleted.
            with driver_errors("state.delete"):
                if self._collection.delete_one({**flt, "version": expected_version,
                                                **self._live_clause()}).deleted_count:
                    return True
                doc = self._collection.find_one(flt, {"version": 1, "updated_at": 1})
            if doc is None:
                return False
            if self._expired(doc):
                with driver_errors("state.delete"):
                    self._collection.delete_one({**flt, **self._expired_clause()})
                return False
            check_delete_version(session_id, _checked_version(session_id, doc),
                                 expected_version)  # moved: the conflict, nothing deleted
        raise StateVersionConflict(
            f"session {session_id!r} kept changing while it was being deleted; nothing was deleted"
        )

    # -- reads ----------------------------------------------------------------------

    def _find(self, session_id: str, owner_subject: OwnerFilter,
              projection: Mapping[str, Any] | None = None) -> Mapping[str, Any] | None:
        """The live document (None when missing, filtered out, or expired)."""
        flt = {"_id": session_id, **owner_clause(owner_subject)}
        if projection is not None:
            projection = {**projection, "updated_at": 1}
        with driver_errors("state.load"):
            doc = self._collection.find_one(flt, projection)
        if doc is None or self._expired(doc):
            return None
        return doc

    def load_full(self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED) -> LoadedState | None:
        doc = self._find(session_id, owner_subject)
        return None if doc is None else strict_state(session_id, doc)

    def load_owner(self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED) -> str | None:
        doc = self._find(session_id, owner_subject, {"owner_subject": 1})
        return None if doc is None else _checked_text(session_id, doc, "owner_subject")

    def current_version(self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED) -> int | None:
        doc = self._find(session_id, owner_subject, {"version": 1})
        return None if doc is None else _checked_version(session_id, doc)

    def load_full_many(self, session_ids: Any, *,
                       owner_subject: OwnerFilter = UNSCOPED) -> list[LoadedState | None]:
        """``load_full`` for many sessions in one round trip (exports), in order."""
        ids = list(session_ids)
        flt = {"_id": {"$in": ids}, **owner_clause(owner_subject)}
        with driver_errors("state.load_many"):
            found = {doc["_id"]: doc for doc in self._collection.find(flt)}
        out: list[LoadedState | None] = []
        for sid in ids:
            doc = found.get(sid)
            out.append(None if doc is None or self._expired(doc) else strict_state(sid, doc))
        return out

    # -- enumeration ----------------------------------------------------------------

    def _summary(self, doc: Mapping[str, Any], blob_size: int) -> SessionSummary:
        """A listing row. A damaged document is listed (never breaks the listing) with
        ``extra["damaged"]`` saying which field; a strict read of it raises."""
        updated = bson_utc(doc.get("updated_at"))
        ttl_left = None
        if self._session_ttl_s is not None and updated is not None:
            elapsed = (datetime.now(timezone.utc) - updated).total_seconds()
            ttl_left = max(0, int(self._session_ttl_s - elapsed))
        session_id = str(doc["_id"])
        extra: dict[str, Any] = {}
        version = 0
        owner = pending = None
        try:
            version = _checked_version(session_id, doc)
            owner = _checked_text(session_id, doc, "owner_subject")
            pending = _checked_text(session_id, doc, "pending_message")
            if doc.get("blob_size") is None:
                raise CorruptState(session_id, "blob", "is missing or not binary")
        except CorruptState as damage:
            extra["damaged"] = f"field {damage.field!r} {damage.problem}"
        return SessionSummary(
            session_id=session_id,
            version=version,
            owner_subject=owner,
            pending_message=pending,
            blob_size=blob_size,
            blob_sha256=self._recorded_or_computed_digest(doc),
            ttl_seconds=ttl_left,
            updated_at=updated,
            extra=extra,
        )

    def _recorded_or_computed_digest(self, doc: Mapping[str, Any]) -> str:
        """The listing's digest: the recorded ``blob_sha256``; for a document written before
        the hash existed, the blob's own digest (read for that document alone when the
        listing left the blob out), so copies and verifies compare it like any other."""
        recorded = doc.get("blob_sha256")
        if recorded:
            return str(recorded)
        blob = doc.get("blob")
        if blob is None and doc.get("blob_size") is not None:
            with driver_errors("state.enumerate"):
                found = self._collection.find_one({"_id": doc["_id"]}, {"blob": 1})
            blob = None if found is None else found.get("blob")
        return _digest(bytes(blob)) if isinstance(blob, (bytes, bytearray)) else ""

    def _summaries(self, flt: Mapping[str, Any], batch_size: int) -> Iterator[SessionSummary]:
        """Blob sizes come from ``$binarySize`` server-side, so no blob crosses the wire.
        A server (or fake) without the operator falls back to reading blobs batch by
        batch, decided once."""
        if self._size_by_aggregate is not False:
            pipeline = [
                {"$match": dict(flt)},
                {"$sort": {"_id": 1}},
                {"$addFields": {"blob_size": {"$cond": [
                    {"$eq": [{"$type": "$blob"}, "binData"]}, {"$binarySize": "$blob"}, None]}}},
                {"$project": {"blob": 0}},
            ]
            try:
                cursor = self._collection.aggregate(pipeline, batchSize=batch_size)
                first = next(cursor, None)
            except Exception as exc:  # noqa: BLE001
                if not _is_unknown_operator(exc):
                    with driver_errors("state.enumerate"):
                        raise
                self._size_by_aggregate = False
            else:
                self._size_by_aggregate = True
                if first is None:
                    return
                if not self._expired(first):
                    yield self._summary(first, int(first.get("blob_size") or 0))
                with driver_errors("state.enumerate"):
                    for doc in cursor:
                        if not self._expired(doc):
                            yield self._summary(doc, int(doc.get("blob_size") or 0))
                return
        with driver_errors("state.enumerate"):
            cursor = self._collection.find(dict(flt)).sort("_id", 1).batch_size(batch_size)
            for doc in cursor:
                if self._expired(doc):
                    continue
                blob = doc.get("blob")
                if isinstance(blob, (bytes, bytearray)):
                    doc = {**doc, "blob_size": len(blob)}
                else:
                    doc = {k: v for k, v in doc.items() if k != "blob"}
                yield self._summary(doc, int(doc.get("blob_size") or 0))

    def iter_sessions(
        self,
        *,
        owner_subject: OwnerFilter = UNSCOPED,
        match: str | None = None,
        batch_size: int = 500,
    ) -> Iterator[SessionSummary]:
        flt: dict[str, Any] = dict(owner_clause(owner_subject))
        if match is not None and match != "*":
            flt["_id"] = {"$regex": glob_to_regex(match)}
        yield from self._summaries(flt, max(1, int(batch_size)))

    def describe_session(self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED) -> SessionSummary | None:
        flt = {"_id": session_id, **owner_clause(owner_subject)}
        return next(self._summaries(flt, 1), None)
