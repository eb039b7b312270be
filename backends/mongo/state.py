"""Session state on MongoDB: one document per session, compare-and-set by filter.

The version check, the owner rule and the write happen in ONE server-side operation
(``find_one_and_replace`` with the expected version and owner in the filter), so two
writers can never both win. ``blob_sha256`` is written with every blob and verified on
every load: a blob damaged at rest is reported, never handed to the engine.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from typing import Any, Iterator, Mapping

from backends.contract import (
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
from backends.errors import IntegrityError, StateVersionConflict
from backends.mongo.errors import driver_errors
from backends.mongo.names import STATE_COLLECTION

#: Everything but the blob: what reads that do not need it fetch.
META_PROJECTION = {"blob": 0}


def as_utc(value: Any) -> datetime | None:
    """BSON datetimes come back naive (UTC) unless the client is tz-aware."""
    if not isinstance(value, datetime):
        return None
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def bson_time(value: Any) -> datetime | None:
    """:func:`as_utc`, truncated to BSON's millisecond precision so a round trip
    compares equal."""
    value = as_utc(value)
    if value is None:
        return None
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


def utcnow() -> datetime:
    """Now, at BSON's millisecond precision."""
    return bson_time(datetime.now(timezone.utc))  # type: ignore[return-value]


def owner_clause(owner_subject: OwnerFilter) -> dict[str, Any]:
    """The three-state owner filter as a query fragment (``None`` matches a missing field)."""
    validate_owner_filter(owner_subject)
    if owner_subject is UNSCOPED:
        return {}
    return {"owner_subject": owner_subject}


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


def _exists(session_id: str) -> StateVersionConflict:
    return StateVersionConflict(f"session {session_id!r} already exists")


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

    def __init__(self, database: Any, *, session_ttl_s: int | None = None) -> None:
        self._collection = database[STATE_COLLECTION]
        self._session_ttl_s = session_ttl_s
        self._size_by_aggregate: bool | None = None

    @property
    def collection(self) -> Any:
        return self._collection

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
            with driver_errors("state.insert", on_duplicate=lambda: _exists(session_id)):
                self._collection.insert_one(doc, **kwargs)
            return 1
        flt: dict[str, Any] = {"_id": session_id, "version": expected_version}
        if owner_subject is not None:
            flt["owner_subject"] = {"$in": [None, owner_subject]}
        replacement = {k: v for k, v in doc.items() if k != "_id"}
        with driver_errors("state.compare_and_set"):
            before = self._collection.find_one_and_replace(
                flt, replacement, projection={"_id": 1}, **kwargs
            )
        if before is None:
            raise self._explain_conflict(session_id, expected_version, owner_subject, kwargs)
        return new_version

    def _explain_conflict(self, session_id: str, expected_version: int,
                          owner_subject: str | None, kwargs: Mapping[str, Any]) -> StateVersionConflict:
        with driver_errors("state.explain_conflict"):
            current = self._collection.find_one(
                {"_id": session_id}, {"version": 1, "owner_subject": 1}, **kwargs
            )
        if current is None:
            return StateVersionConflict(f"session {session_id!r} does not exist")
        if current.get("version") != expected_version:
            return StateVersionConflict(
                f"session {session_id!r} is at version {current.get('version')}, "
                f"not {expected_version}"
            )
        return StateVersionConflict(f"session {session_id!r} belongs to another owner")

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
        """Create a session at ``version``; never overwrites. ``ttl_seconds`` is not
        per-session on MongoDB (the idle TTL index applies to every session)."""
        validate_save_args(session_id, blob, version, owner_subject)
        doc = state_document(session_id, blob, version, owner_subject, pending_message)
        with driver_errors("state.restore", on_duplicate=lambda: _exists(session_id)):
            self._collection.insert_one(doc)

    def delete(self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED) -> bool:
        flt = {"_id": session_id, **owner_clause(owner_subject)}
        with driver_errors("state.delete"):
            return self._collection.delete_one(flt).deleted_count == 1

    # -- reads ----------------------------------------------------------------------

    def _find(self, session_id: str, owner_subject: OwnerFilter,
              projection: Mapping[str, Any] | None = None) -> Mapping[str, Any] | None:
        flt = {"_id": session_id, **owner_clause(owner_subject)}
        with driver_errors("state.load"):
            return self._collection.find_one(flt, projection)

    def load_full(self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED) -> LoadedState | None:
        doc = self._find(session_id, owner_subject)
        if doc is None:
            return None
        blob = bytes(doc.get("blob") or b"")
        stored = doc.get("blob_sha256")
        if stored is not None and hashlib.sha256(blob).hexdigest() != stored:
            raise IntegrityError(
                "stored session blob failed sha256 verification; the document was changed "
                "or damaged outside semvec"
            )
        return LoadedState(
            blob=blob,
            version=int(doc["version"]),
            owner_subject=doc.get("owner_subject"),
            pending_message=normalise_pending(doc.get("pending_message")),
        )

    def load_owner(self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED) -> str | None:
        doc = self._find(session_id, owner_subject, {"owner_subject": 1})
        return doc.get("owner_subject") if doc else None

    def current_version(self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED) -> int | None:
        doc = self._find(session_id, owner_subject, {"version": 1})
        return int(doc["version"]) if doc else None

    # -- enumeration ----------------------------------------------------------------

    def _summary(self, doc: Mapping[str, Any], blob_size: int) -> SessionSummary:
        updated = as_utc(doc.get("updated_at"))
        ttl_left = None
        if self._session_ttl_s is not None and updated is not None:
            elapsed = (datetime.now(timezone.utc) - updated).total_seconds()
            ttl_left = max(0, int(self._session_ttl_s - elapsed))
        return SessionSummary(
            session_id=str(doc["_id"]),
            version=int(doc["version"]),
            owner_subject=doc.get("owner_subject"),
            pending_message=normalise_pending(doc.get("pending_message")),
            blob_size=blob_size,
            blob_sha256=str(doc.get("blob_sha256") or ""),
            ttl_seconds=ttl_left,
            updated_at=updated,
        )

    def _summaries(self, flt: Mapping[str, Any], batch_size: int) -> Iterator[SessionSummary]:
        """Blob sizes come from ``$binarySize`` server-side, so no blob crosses the wire.
        A server (or fake) without the operator falls back to reading blobs batch by
        batch, decided once."""
        if self._size_by_aggregate is not False:
            pipeline = [
                {"$match": dict(flt)},
                {"$sort": {"_id": 1}},
                {"$addFields": {"blob_size": {"$binarySize": "$blob"}}},
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
                yield self._summary(first, int(first.get("blob_size") or 0))
                with driver_errors("state.enumerate"):
                    for doc in cursor:
                        yield self._summary(doc, int(doc.get("blob_size") or 0))
                return
        with driver_errors("state.enumerate"):
            cursor = self._collection.find(dict(flt)).sort("_id", 1).batch_size(batch_size)
            for doc in cursor:
                yield self._summary(doc, len(doc.get("blob") or b""))

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
