"""Compare-and-set session state in ``semvec_session_state``.

The rules are the memory reference's; here each is one statement, so the database
arbitrates races: insert is ``INSERT ... ON CONFLICT DO NOTHING`` (no row back = the
session exists), update is ``UPDATE ... WHERE version = expected AND owner allows``
(no row back = conflict). ``blob_sha256`` is stored with every write and verified on
every blob read.
"""

from __future__ import annotations

import fnmatch
import hashlib
from typing import Any, Iterator

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
from backends.pgvector.database import Database
from backends.pgvector.schema import STATE_GROUP


def has_nul(*values: Any) -> bool:
    """PostgreSQL text cannot hold NUL: such a value can never be stored or matched."""
    return any(isinstance(v, str) and "\x00" in v for v in values)


def validate_pg_save_args(session_id: Any, blob: Any, expected_version: Any,
                          owner_subject: Any, pending_message: Any) -> None:
    """``validate_save_args``, then a clear ValueError for text PostgreSQL cannot store
    (NUL), all before any write (psycopg would raise DataError mid-call)."""
    validate_save_args(session_id, blob, expected_version, owner_subject)
    for name, value in (("session_id", session_id), ("owner_subject", owner_subject),
                        ("pending_message", pending_message)):
        if has_nul(value):
            raise ValueError(f"{name} contains a NUL character, which PostgreSQL text "
                             "cannot store")


def owner_clause(owner_subject: OwnerFilter, column: str = "owner_subject") -> tuple[str, tuple]:
    """SQL for the three-state owner filter, and its parameters."""
    validate_owner_filter(owner_subject)
    if owner_subject is UNSCOPED:
        return "TRUE", ()
    if owner_subject is None:
        return f"{column} IS NULL", ()
    return f"{column} = %s", (owner_subject,)


def save_in_transaction(
    conn: Any,
    table: str,
    session_id: str,
    blob: bytes,
    *,
    expected_version: int | None,
    owner_subject: str | None,
    pending_message: str | None,
) -> int:
    """The compare-and-set itself, on a connection already inside a transaction."""
    data = bytes(blob)
    digest = hashlib.sha256(data).hexdigest()
    pending = normalise_pending(pending_message)
    if expected_version is None:
        row = conn.execute(
            f"INSERT INTO {table} AS s (session_id, version, blob, blob_sha256, owner_subject,"
            " pending_message, updated_at) VALUES (%s, 1, %s, %s, %s, %s, now())"
            " ON CONFLICT (session_id) DO NOTHING RETURNING version",
            (session_id, data, digest, owner_subject, pending),
        ).fetchone()
        if row is None:
            raise StateVersionConflict(f"session {session_id!r} already exists")
        return int(row[0])
    row = conn.execute(
        f"UPDATE {table} SET version = version + 1, blob = %s, blob_sha256 = %s,"
        " owner_subject = %s, pending_message = %s, updated_at = now()"
        " WHERE session_id = %s AND version = %s"
        " AND (%s::text IS NULL OR owner_subject IS NULL OR owner_subject = %s)"
        " RETURNING version",
        (data, digest, owner_subject, pending, session_id, expected_version,
         owner_subject, owner_subject),
    ).fetchone()
    if row is not None:
        return int(row[0])
    raise _explain_conflict(conn, table, session_id, expected_version)


def _explain_conflict(conn: Any, table: str, session_id: str, expected: int) -> StateVersionConflict:
    current = conn.execute(
        f"SELECT version FROM {table} WHERE session_id = %s", (session_id,)
    ).fetchone()
    if current is None:
        return StateVersionConflict(f"session {session_id!r} does not exist")
    if int(current[0]) != expected:
        return StateVersionConflict(
            f"session {session_id!r} is at version {current[0]}, not {expected}"
        )
    return StateVersionConflict(f"session {session_id!r} belongs to another owner")


def _verified(session_id: str, blob: Any, digest: str | None) -> bytes:
    data = bytes(blob)
    if digest and hashlib.sha256(data).hexdigest() != digest:
        raise IntegrityError(
            f"session {session_id!r}: stored blob does not match its blob_sha256"
        )
    return data


@speaks_both_conventions
class PgVectorStateStore(DerivedReads):
    """StateStoreProtocol over one PostgreSQL table (plus the operator seams it can serve)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._table = db.tables.state

    def save(
        self,
        session_id: str,
        blob: bytes,
        *,
        expected_version: int | None,
        owner_subject: str | None = None,
        pending_message: str | None = None,
    ) -> int:
        validate_pg_save_args(session_id, blob, expected_version, owner_subject,
                              pending_message)

        def work(conn: Any) -> int:
            with conn.transaction():
                return save_in_transaction(
                    conn, self._table, session_id, blob,
                    expected_version=expected_version, owner_subject=owner_subject,
                    pending_message=pending_message,
                )

        return self._db.write(STATE_GROUP, work)

    def _select(self, columns: str, session_id: str, owner_subject: OwnerFilter):
        clause, params = owner_clause(owner_subject)
        if has_nul(session_id, owner_subject):
            return None

        def work(conn: Any):
            return conn.execute(
                f"SELECT {columns} FROM {self._table} WHERE session_id = %s AND {clause}",
                (session_id, *params),
            ).fetchone()

        return self._db.read(work, lambda: None)

    def load_full(
        self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED
    ) -> LoadedState | None:
        row = self._select(
            "blob, blob_sha256, version, owner_subject, pending_message", session_id, owner_subject
        )
        if row is None:
            return None
        return LoadedState(_verified(session_id, row[0], row[1]), int(row[2]), row[3], row[4])

    def load_owner(self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED) -> str | None:
        row = self._select("owner_subject", session_id, owner_subject)
        return row[0] if row else None

    def current_version(
        self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED
    ) -> int | None:
        row = self._select("version", session_id, owner_subject)
        return int(row[0]) if row else None

    def delete(self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED) -> bool:
        clause, params = owner_clause(owner_subject)
        if has_nul(session_id, owner_subject):
            return False

        def work(conn: Any) -> bool:
            row = conn.execute(
                f"DELETE FROM {self._table} WHERE session_id = %s AND {clause} RETURNING 1",
                (session_id, *params),
            ).fetchone()
            return row is not None

        return self._db.read(work, lambda: False)

    # -- operator seams ---------------------------------------------------------------

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
        """Create the row at exactly ``version``; never overwrites. PostgreSQL keeps no
        TTL, so ``ttl_seconds`` is accepted and ignored (idle expiry is an operator job)."""
        validate_pg_save_args(session_id, blob, version, owner_subject, pending_message)
        data = bytes(blob)

        def work(conn: Any) -> None:
            row = conn.execute(
                f"INSERT INTO {self._table} (session_id, version, blob, blob_sha256,"
                " owner_subject, pending_message, updated_at) VALUES (%s, %s, %s, %s, %s, %s, now())"
                " ON CONFLICT (session_id) DO NOTHING RETURNING 1",
                (session_id, version, data, hashlib.sha256(data).hexdigest(), owner_subject,
                 normalise_pending(pending_message)),
            ).fetchone()
            if row is None:
                raise StateVersionConflict(f"session {session_id!r} already exists")

        self._db.write(STATE_GROUP, work)

    _SUMMARY_COLUMNS = (
        "session_id, version, owner_subject, pending_message, octet_length(blob), blob_sha256,"
        " updated_at"
    )

    @staticmethod
    def _summary(row: Any) -> SessionSummary:
        return SessionSummary(
            session_id=row[0], version=int(row[1]), owner_subject=row[2],
            pending_message=row[3], blob_size=int(row[4]), blob_sha256=row[5],
            ttl_seconds=None, updated_at=row[6],
        )

    def describe_session(
        self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED
    ) -> SessionSummary | None:
        row = self._select(self._SUMMARY_COLUMNS, session_id, owner_subject)
        return self._summary(row) if row else None

    def iter_sessions(
        self,
        *,
        owner_subject: OwnerFilter = UNSCOPED,
        match: str | None = None,
        batch_size: int = 500,
    ) -> Iterator[SessionSummary]:
        """Keyset-paginated by session_id; blobs are never read (octet_length + stored
        sha). ``match`` is a glob; its literal prefix narrows the scan server-side."""
        clause, params = owner_clause(owner_subject)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError("batch_size must be a positive int")
        prefix = _glob_prefix(match) if match else ""
        after = None
        while True:
            conditions = [clause]
            args: list[Any] = list(params)
            if prefix:
                conditions.append("starts_with(session_id, %s)")
                args.append(prefix)
            if after is not None:
                conditions.append('session_id COLLATE "C" > %s')
                args.append(after)
            sql = (
                f"SELECT {self._SUMMARY_COLUMNS} FROM {self._table} WHERE "
                + " AND ".join(conditions) + " ORDER BY session_id COLLATE \"C\" LIMIT %s"
            )
            args.append(batch_size)

            def work(conn: Any, sql: str = sql, args: list = args):
                return conn.execute(sql, args).fetchall()

            rows = self._db.read(work, list)
            for row in rows:
                if match is None or fnmatch.fnmatchcase(row[0], match):
                    yield self._summary(row)
            if len(rows) < batch_size:
                return
            after = rows[-1][0]


def _glob_prefix(pattern: str) -> str:
    prefix = []
    for char in pattern:
        if char in "*?[":
            break
        prefix.append(char)
    return "".join(prefix)
