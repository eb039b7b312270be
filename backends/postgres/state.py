"""Compare-and-set session state in the engine's ``semvec_session_state`` table.

The rules are the memory reference's; here each is one statement, so the database
arbitrates races: insert is ``INSERT ... ON CONFLICT DO NOTHING`` (no row back = the
session exists, unless it holds exactly this write: a retry), update is ``UPDATE ...
WHERE version = expected AND owner allows`` (no row back = conflict, same retry rule).
The layout is the engine's (``state_blob``, ``drift_exempt``, no digest column).
"""

from __future__ import annotations

import fnmatch
import hashlib
from datetime import datetime
from typing import Any, Iterator, Sequence

from backends.contract import (
    as_utc,
    DerivedReads,
    speaks_both_conventions,
    UNSCOPED,
    LoadedState,
    OwnerFilter,
    SessionSummary,
    StoredDigest,
    check_delete_version,
    normalise_pending,
    validate_owner_filter,
    validate_save_args,
)
from backends.errors import CorruptState, StateVersionConflict, cas_refusal, session_exists
from backends.postgres.database import Database
from backends.postgres.placement import Placement
from backends.postgres.schema import STATE_COPY_COLUMNS, STATE_COPY_TYPES, STATE_GROUP


#: the binary COPY's value types: the columns' own, but varchar goes as text (the same
#: binary form; psycopg before 3.2 has no binary dumper named varchar)
_COPY_DUMPERS = ["text" if t == "varchar" else t for t in STATE_COPY_TYPES]

#: the engine's ``version`` column is INTEGER
MAX_VERSION = 2**31 - 1
#: sessions whose taken-along item rows are remembered for the erasure hook (the oldest
#: go first: the engine asks right after its state delete)
_TAKEN_ALONG_KEPT = 10_000


def has_nul(*values: Any) -> bool:
    """PostgreSQL text cannot hold NUL: such a value can never be stored or matched."""
    for value in values:  # a loop, not any(): checked for every field of every restored row
        if isinstance(value, str) and "\x00" in value:
            return True
    return False


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
    if expected_version is not None and expected_version >= MAX_VERSION:
        raise ValueError(f"version must stay below {MAX_VERSION}: the engine's version "
                         "column is INTEGER")
    for name, value in (("session_id", session_id), ("owner_subject", owner_subject)):
        if value is not None and len(value) > 128:
            raise ValueError(f"{name} is longer than 128 characters, the width of the "
                             "engine's column")


def owner_clause(owner_subject: OwnerFilter, column: str = "owner_subject") -> tuple[str, tuple]:
    """SQL for the three-state owner filter, and its parameters. The engine writes ``""``
    for unowned rows where we may find NULL: both are unowned."""
    validate_owner_filter(owner_subject)
    if owner_subject is UNSCOPED:
        return "TRUE", ()
    if owner_subject is None:
        return f"({column} IS NULL OR {column} = '')", ()
    return f"{column} = %s", (owner_subject,)


def _insert_if_absent(conn: Any, table: str, feed: Any, binary: bool,
                      ids: Sequence[str]) -> set[str]:
    """The rows ``feed(copy)`` writes (those of ``ids``) into ``table``, each only where
    its id is absent; returns the ids written. One COPY straight into the table (the
    pool's connections are in autocommit, so the COPY is its own transaction, with no
    BEGIN, savepoint or COMMIT round trip); when an id exists (a unique violation:
    nothing of the COPY is kept), one transaction COPYs into a temporary table (emptied
    at commit) and runs one INSERT ... ON CONFLICT DO NOTHING."""
    from psycopg.errors import UniqueViolation

    columns = ", ".join(STATE_COPY_COLUMNS)
    options = " (FORMAT BINARY)" if binary else ""

    def copy_into(target: str) -> None:
        with conn.cursor().copy(f"COPY {target} ({columns}) FROM STDIN{options}") as copy:
            feed(copy)

    try:
        copy_into(table)
        return set(ids)
    except UniqueViolation:
        pass  # the COPY's own transaction is rolled back: nothing of it stays
    with conn.transaction():
        conn.execute(
            "CREATE TEMP TABLE IF NOT EXISTS semvec_restore_rows (session_id varchar,"
            " state_blob bytea, version integer, drift_exempt boolean, owner_subject"
            " varchar, pending_message text, updated_at timestamp) ON COMMIT DELETE ROWS")
        copy_into("semvec_restore_rows")
        rows = conn.execute(
            f"INSERT INTO {table} ({columns}) SELECT {columns} FROM semvec_restore_rows"
            " ON CONFLICT (session_id) DO NOTHING RETURNING session_id").fetchall()
    return {r[0] for r in rows}


def _utc_now_sql() -> str:
    # updated_at is TIMESTAMP (no zone) in the engine's DDL: store UTC wall time whatever
    # the session's TimeZone is
    return "(now() AT TIME ZONE 'UTC')"


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
    """The compare-and-set itself, on a connection already inside a transaction.

    A write that finds its own exact result already stored (same blob, owner and pending
    message, at the version this write would produce) returns that version: it is the
    retry of a write whose acknowledgement was lost, not a lost race. ``drift_exempt`` is
    never changed by a save (the engine's rule)."""
    data = bytes(blob)
    pending = normalise_pending(pending_message)
    if expected_version is None:
        row = conn.execute(
            # every column named: the engine's create_all gives no server DEFAULTs
            f"INSERT INTO {table} (session_id, state_blob, version, drift_exempt, owner_subject,"
            f" pending_message, updated_at) VALUES (%s, %s, 1, false, %s, %s, {_utc_now_sql()})"
            " ON CONFLICT (session_id) DO NOTHING RETURNING version",
            (session_id, data, owner_subject, pending),
        ).fetchone()
        if row is not None:
            return int(row[0])
        if _already_written(conn, table, session_id, data, 1, owner_subject, pending):
            return 1
        raise session_exists(session_id)
    row = conn.execute(
        f"UPDATE {table} SET version = version + 1, state_blob = %s, owner_subject = %s,"
        f" pending_message = %s, updated_at = {_utc_now_sql()}"
        " WHERE session_id = %s AND version = %s AND (%s::text IS NULL"
        " OR owner_subject IS NULL OR owner_subject = '' OR owner_subject = %s)"
        " RETURNING version",
        (data, owner_subject, pending, session_id, expected_version,
         owner_subject, owner_subject),
    ).fetchone()
    if row is not None:
        return int(row[0])
    if _already_written(conn, table, session_id, data, expected_version + 1, owner_subject,
                        pending):
        return expected_version + 1
    raise _explain_conflict(conn, table, session_id, expected_version)


def _already_written(conn: Any, table: str, session_id: str, data: bytes, version: int,
                     owner_subject: str | None, pending: str | None) -> bool:
    """Whether the row already holds exactly what this write would have produced."""
    row = conn.execute(
        f"SELECT version, state_blob = %s, owner_subject, pending_message FROM {table}"
        " WHERE session_id = %s",
        (data, session_id),
    ).fetchone()
    if row is None or row[0] != version or row[1] is not True:
        return False
    return (row[2] or None) == owner_subject and normalise_pending(row[3]) == pending


def _explain_conflict(conn: Any, table: str, session_id: str, expected: int) -> StateVersionConflict:
    current = conn.execute(
        f"SELECT version FROM {table} WHERE session_id = %s", (session_id,)
    ).fetchone()
    return cas_refusal(session_id, None if current is None else current[0], expected)


def strict_version(session_id: str, version: Any) -> int:
    """The stored version, or CorruptState: NULL or below 1 is never read as a guess."""
    if version is None:
        raise CorruptState(session_id, "version", "is NULL")
    if isinstance(version, bool) or not isinstance(version, int):
        raise CorruptState(session_id, "version", f"is not an integer ({type(version).__name__})")
    if version < 1:
        raise CorruptState(session_id, "version", f"is {version}, below 1")
    return version


def strict_blob(session_id: str, blob: Any) -> bytes:
    """The stored blob, or CorruptState: a NULL state_blob is not an empty session."""
    if blob is None:
        raise CorruptState(session_id, "state_blob", "is NULL")
    return bytes(blob)


def damage_of(session_id: str, blob_present: Any, version: Any) -> str:
    """What is wrong with a row, for listings that report damage instead of failing."""
    try:
        if not blob_present:
            raise CorruptState(session_id, "state_blob", "is NULL")
        strict_version(session_id, version)
    except CorruptState as exc:
        return f"field {exc.field!r} {exc.problem}"
    return ""


@speaks_both_conventions
class SqlStateStore(DerivedReads):
    """StateStoreProtocol over the engine's ``semvec_session_state`` table (plus the
    operator seams it can serve). Shared by every backend built on this base.

    Reads are strict: a NULL ``state_blob`` or a NULL / below-1 ``version`` raises
    :class:`CorruptState` naming the session and the field. The layout keeps no blob
    digest, so retries are recognised by comparing the stored bytes themselves.

    On a sharded deployment (:class:`~backends.postgres.placement.Placement`) every
    single-session call goes to the session's shard, and listings, counts and sweeps
    cover every shard; a row on a database the routing never reads for it (misplaced)
    is not listed here: ``doctor`` reports it."""

    #: a retried insert or compare-and-set whose exact result is stored returns its
    #: version (the conformance suite checks it)
    idempotent_retries = True
    #: every write stamps ``updated_at`` (UTC), so idle sessions can be found (``prune``)
    records_write_time = True
    #: the layout keeps no per-session expiry (the engine purges idle rows instead)
    lists_expiry = False

    def __init__(self, placement: Placement | Database) -> None:
        if not isinstance(placement, Placement):
            placement = Placement(placement, ())
        self._placement = placement
        self._db = placement.primary
        self._table = placement.primary.tables.state
        #: per database: whether the table's columns have the engine's types (binary
        #: COPY), once asked
        self._binary_copy: dict[Database, bool] = {}
        #: item rows a state delete took along, per session, until the engine's erasure
        #: asks for them (``erasure_backend().erase_sessions`` reports them: the engine
        #: deletes the state first, then counts what its erasure hook removed)
        self.items_taken_along: dict[str, int] = {}

    def _at(self, session_id: str) -> Database:
        return self._placement.for_session(session_id)

    def check_write(self, session_id: str, blob: bytes, *, version: int | None,
                    owner_subject: str | None = None, pending_message: str | None = None) -> None:
        """Run the checks a save or restore of these values runs, without any I/O: raises
        the ValueError/TypeError the write would (an import's preview runs them)."""
        validate_pg_save_args(session_id, blob, version, owner_subject, pending_message)

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

        return self._at(session_id).write(STATE_GROUP, work)

    def _select(self, columns: str, session_id: str, owner_subject: OwnerFilter):
        clause, params = owner_clause(owner_subject)
        if has_nul(session_id, owner_subject):
            return None

        def work(conn: Any):
            return conn.execute(
                f"SELECT {columns} FROM {self._table} WHERE session_id = %s AND {clause}",
                (session_id, *params),
            ).fetchone()

        return self._at(session_id).read(work, lambda: None)

    def load_full(
        self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED
    ) -> LoadedState | None:
        row = self._select("state_blob, version, owner_subject, pending_message", session_id,
                           owner_subject)
        if row is None:
            return None
        return LoadedState(strict_blob(session_id, row[0]), strict_version(session_id, row[1]),
                           row[2] or None, row[3])

    def load_full_many(self, session_ids: Any, *,
                       owner_subject: OwnerFilter = UNSCOPED) -> list[LoadedState | None]:
        """``load_full`` for many sessions in one query (exports, verification, a live
        migration's target reads), in order, None where missing or filtered out; a
        damaged row raises as ``load_full`` would."""
        ids = list(session_ids)
        rows = self._rows_of(ids, "state_blob, version, owner_subject, pending_message",
                             owner_subject)
        found: list[LoadedState | None] = []
        for sid in ids:
            row = rows.get(sid)
            found.append(None if row is None else LoadedState(
                strict_blob(sid, row[1]), strict_version(sid, row[2]), row[3] or None, row[4]))
        return found

    def load_digests_many(self, session_ids: Any, *,
                          owner_subject: OwnerFilter = UNSCOPED) -> list[StoredDigest | None]:
        """``load_full_many`` with the blob hashed by the server (no blob is sent) and the
        drift flag read in the same query: what a verification compares."""
        ids = list(session_ids)
        rows = self._rows_of(ids, "encode(sha256(state_blob), 'hex'), version, owner_subject,"
                                  " pending_message, drift_exempt", owner_subject)
        found: list[StoredDigest | None] = []
        for sid in ids:
            row = rows.get(sid)
            if row is None:
                found.append(None)
                continue
            if row[1] is None:  # a NULL blob (its sha256 is NULL too): damaged
                raise CorruptState(sid, "state_blob", "is NULL")
            found.append(StoredDigest(row[1], strict_version(sid, row[2]), row[3] or None,
                                      row[4], bool(row[5])))
        return found

    def _rows_of(self, ids: list[str], columns: str, owner_subject: OwnerFilter) -> dict[str, Any]:
        """``session_id, columns`` of the rows of ``ids`` under the owner filter, by id:
        one query per database holding them."""
        clause, params = owner_clause(owner_subject)
        wanted = [sid for sid in ids if not has_nul(sid, owner_subject)]
        if not wanted:
            return {}

        def work(conn: Any, ids: list[str]) -> list[Any]:
            return conn.execute(
                f"SELECT session_id, {columns} FROM {self._table}"
                f" WHERE session_id = ANY(%s) AND {clause}",
                (ids, *params),
            ).fetchall()

        return {r[0]: r for db, part in self._placement.group(wanted)
                for r in db.read(lambda conn, part=part: work(conn, part), lambda: [])}

    def load_owner(self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED) -> str | None:
        row = self._select("owner_subject", session_id, owner_subject)
        return (row[0] or None) if row else None

    def current_version(
        self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED
    ) -> int | None:
        row = self._select("version", session_id, owner_subject)
        return strict_version(session_id, row[0]) if row else None

    def delete(self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED,
               expected_version: int | None = None) -> bool:
        """Delete the row (under the owner filter); with ``expected_version`` only while
        it is still at that version, else a conflict and nothing is deleted. The
        session's item rows go in the same transaction (no orphan a server-side search
        could still serve)."""
        clause, params = owner_clause(owner_subject)
        if expected_version is not None:
            check_delete_version(session_id, expected_version, expected_version)
        if has_nul(session_id, owner_subject):
            return False

        db = self._at(session_id)

        def work(conn: Any) -> bool:
            with conn.transaction():
                if expected_version is not None:
                    found = conn.execute(
                        f"SELECT version FROM {self._table} WHERE session_id = %s AND {clause}"
                        " FOR UPDATE", (session_id, *params),
                    ).fetchone()
                    if found is None:
                        return False
                    check_delete_version(session_id, found[0], expected_version)
                row = conn.execute(
                    f"DELETE FROM {self._table} WHERE session_id = %s AND {clause} RETURNING 1",
                    (session_id, *params),
                ).fetchone()
                if row is not None:
                    self._delete_items(conn, db, session_id)
                return row is not None

        return db.read(work, lambda: False)

    def _delete_items(self, conn: Any, db: Database, session_id: str) -> None:
        """The deleted session's rows in the flavours' tables (the item mirror: every
        owner's, they belong to the session), in the caller's transaction; nothing where
        such a table does not exist (the ``postgres`` layout, or a flavour's before its
        first row)."""
        for table in db.session_tables():
            qualified = db.tables.of(table)
            if conn.execute("SELECT to_regclass(%s)", (qualified,)).fetchone()[0] is None:
                continue
            removed = conn.execute(f"DELETE FROM {qualified} WHERE session_id = %s",
                                   (session_id,)).rowcount
            if removed > 0:
                if len(self.items_taken_along) >= _TAKEN_ALONG_KEPT:
                    self.items_taken_along.pop(next(iter(self.items_taken_along)))
                self.items_taken_along[session_id] = (
                    self.items_taken_along.get(session_id, 0) + removed)

    # -- the engine's extra members -------------------------------------------------

    def set_drift_exempt(self, session_id: str, exempt: bool) -> None:
        """Mark a session exempt from drift checks; a missing row is left alone."""
        if has_nul(session_id):
            return

        def work(conn: Any) -> None:
            conn.execute(f"UPDATE {self._table} SET drift_exempt = %s WHERE session_id = %s",
                         (bool(exempt), session_id))

        self._at(session_id).read(work, lambda: None)

    def is_drift_exempt(self, session_id: str) -> bool:
        """False for a missing row (the engine's rule)."""
        row = self._select("drift_exempt", session_id, UNSCOPED)
        return bool(row and row[0])

    def purge_idle(self, ttl_seconds: int) -> int:
        """Delete every session untouched for more than ``ttl_seconds`` (the engine's
        ``SEMVEC_SQL_SESSION_TTL_S`` sweep: owner-agnostic, ``updated_at`` older than the
        cutoff); ``ttl_seconds <= 0`` is a no-op. Returns the number removed."""
        if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int):
            raise ValueError("ttl_seconds must be an int")
        if ttl_seconds <= 0:
            return 0

        def work(conn: Any) -> int:
            return conn.execute(
                f"DELETE FROM {self._table} WHERE updated_at <"
                f" {_utc_now_sql()} - make_interval(secs => %s)", (ttl_seconds,)).rowcount

        return sum(db.read(work, lambda: 0) for db in self._placement.state_databases())

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
        drift_exempt: bool = False,
        updated_at: datetime | None = None,
    ) -> None:
        """Create the row at exactly ``version``; never overwrites. The SQL layout keeps
        no per-row TTL, so ``ttl_seconds`` is accepted and ignored (the engine purges idle
        rows by ``SEMVEC_SQL_SESSION_TTL_S``). ``updated_at`` (a copy's source write
        time) is stored as given, so the idle clock does not restart; else now."""
        validate_pg_save_args(session_id, blob, version, owner_subject, pending_message)
        data = bytes(blob)
        if updated_at is not None and not isinstance(updated_at, datetime):
            raise ValueError("updated_at must be a datetime")
        stamp = "%s" if updated_at is not None else _utc_now_sql()
        extra = (as_utc(updated_at).replace(tzinfo=None),) if updated_at is not None else ()

        def work(conn: Any) -> None:
            row = conn.execute(
                f"INSERT INTO {self._table} (session_id, state_blob, version, drift_exempt,"
                " owner_subject, pending_message, updated_at) VALUES (%s, %s, %s, %s, %s, %s,"
                f" {stamp}) ON CONFLICT (session_id) DO NOTHING RETURNING 1",
                (session_id, data, version, bool(drift_exempt), owner_subject,
                 normalise_pending(pending_message), *extra),
            ).fetchone()
            if row is None:
                raise session_exists(session_id)

        self._at(session_id).write(STATE_GROUP, work)

    def restore_sessions(self, rows: Any) -> set[str]:
        """``restore_session`` for many rows, a COPY per database
        (:func:`_insert_if_absent`). Rows whose id exists are left as they are and their
        ids returned.

        The COPY is binary (a blob travels as its bytes, not escaped text): about a third
        less time per row, measured (bench/bench_migrate.py). A table whose columns are
        not the engine's types would refuse binary data: it is written as text."""
        rows = list(rows)
        if not rows:
            return set()
        for row in rows:  # every check before any I/O
            validate_pg_save_args(row.session_id, row.blob, row.version, row.owner_subject,
                                  row.pending_message)
            if row.updated_at is not None and not isinstance(row.updated_at, datetime):
                raise ValueError("updated_at must be a datetime")

        def work(conn: Any, db: Database, rows: list[Any]) -> set[str]:
            # rows without a write time are stamped now (UTC, the server's clock); a batch
            # whose rows all carry theirs (a migration's) costs no round trip for it
            now = (None if all(row.updated_at for row in rows)
                   else conn.execute(f"SELECT {_utc_now_sql()}").fetchone()[0])
            values = [(row.session_id, bytes(row.blob), row.version, bool(row.drift_exempt),
                       row.owner_subject, normalise_pending(row.pending_message),
                       as_utc(row.updated_at).replace(tzinfo=None) if row.updated_at else now)
                      for row in rows]
            binary = self._copies_binary(conn, db)

            def feed(copy: Any) -> None:
                if binary:
                    copy.set_types(_COPY_DUMPERS)
                for value in values:
                    copy.write_row(value)

            return _insert_if_absent(conn, self._table, feed, binary,
                                     [value[0] for value in values])

        by_id: dict[str, Any] = {}
        for row in rows:
            by_id.setdefault(row.session_id, row)
        written: set[str] = set()
        for db, ids in self._placement.group(by_id):
            part = [by_id[sid] for sid in ids]
            written |= db.write(STATE_GROUP, lambda conn, db=db, part=part: work(conn, db, part))
        return set(by_id) - written

    def restore_copied(self, rows: Sequence[tuple], wanted: Sequence[str]) -> set[str]:
        """``restore_sessions`` for rows as another database of the deployment sent them:
        tuples of the engine's state columns (:data:`STATE_COPY_COLUMNS`, in that order,
        as a binary fetch of a state table of the engine's types gives them), all placed
        on one database of this store. They are written as they are: a stored row needs
        none of the checks a caller's values do. Only the ``wanted`` ones are written;
        returns those that exist (left as they are)."""
        wanted_ids = set(wanted)
        part = [row for row in rows if row[0] in wanted_ids]
        if not part:
            return set()
        db = self._placement.for_session(part[0][0])

        def work(conn: Any) -> set[str]:
            if not self._copies_binary(conn, db):
                raise ValueError(f"the state table on {db.config.display_uri} is not of the "
                                 "engine's column types: stored rows cannot be written as they are")

            def feed(copy: Any) -> None:
                copy.set_types(_COPY_DUMPERS)
                for row in part:
                    copy.write_row(row)

            return _insert_if_absent(conn, self._table, feed, True, [r[0] for r in part])

        return {row[0] for row in part} - db.write(STATE_GROUP, work)

    def _copies_binary(self, conn: Any, db: Database) -> bool:
        """Do the table's columns have exactly the types a binary COPY names (the
        engine's)? Asked once per store and database."""
        if db not in self._binary_copy:
            from backends.postgres.schema import has_copy_types

            self._binary_copy[db] = has_copy_types(conn, self._table)
        return self._binary_copy[db]

    _SUMMARY_COLUMNS = (
        "session_id, version, owner_subject, pending_message, octet_length(state_blob),"
        " encode(sha256(state_blob), 'hex'), updated_at, drift_exempt"
    )

    @staticmethod
    def _summary(row: Any) -> SessionSummary:
        """A listing row; a damaged one is reported (``extra['damaged']``), not raised,
        so one bad row never hides the others."""
        damage = damage_of(row[0], row[4] is not None, row[1])
        extra: dict[str, Any] = {"drift_exempt": bool(row[7])}
        if damage:
            extra["damaged"] = damage
        version = row[1] if isinstance(row[1], int) and row[1] >= 1 else 0
        updated = row[6]
        if updated is not None:
            updated = as_utc(updated)
        return SessionSummary(
            session_id=row[0], version=version, owner_subject=row[2] or None,
            pending_message=row[3], blob_size=int(row[4] or 0), blob_sha256=row[5] or "",
            ttl_seconds=None, updated_at=updated, extra=extra,
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
        """Keyset-paginated by session_id; blobs are never sent (octet_length and a
        server-side sha256). ``match`` is a glob; its literal prefix narrows the scan.
        Over shards: each shard's placed rows, merged in session-id order."""
        return self._listing(self._SUMMARY_COLUMNS, self._summary, lambda s: s.session_id,
                             owner_subject, match, batch_size)

    _STATE_COLUMNS = ("session_id, state_blob, version, owner_subject, pending_message,"
                      " updated_at, drift_exempt")

    def iter_session_states(self, *, owner_subject: OwnerFilter = UNSCOPED,
                            match: str | None = None, batch_size: int = 500
                            ) -> Iterator[tuple[SessionSummary, LoadedState]]:
        """:meth:`iter_sessions` with each row, from one read: the blob is sent (binary)
        and hashed here, so a copy reads each blob once and the digest it records is that
        of the bytes it writes. A damaged row raises as ``load_full`` would."""
        return self._listing(self._STATE_COLUMNS, summary_and_state,
                             lambda pair: pair[0].session_id, owner_subject, match, batch_size,
                             binary=True)

    def _listing(self, columns: str, convert: Any, key: Any, owner_subject: OwnerFilter,
                 match: str | None, batch_size: int, *, binary: bool = False) -> Iterator[Any]:
        """``columns`` of every listed row, converted, in session-id order (each shard's
        placed rows, merged)."""
        clause, params = owner_clause(owner_subject)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError("batch_size must be a positive int")
        streams = [self._iter_placed(db, clause, params, match, batch_size, columns, convert,
                                     binary)
                   for db in self._placement.state_databases()]
        if len(streams) == 1:
            yield from streams[0]
            return
        import heapq

        yield from heapq.merge(*streams, key=key)

    def _iter_placed(self, db: Database, clause: str, params: tuple, match: str | None,
                     batch_size: int, columns: str, convert: Any, binary: bool) -> Iterator[Any]:
        """One database's rows in session-id order (``COLLATE "C"``: the code-point order
        Python's own comparison gives, so shards merge), those the routing reads there.

        One query through a server-side cursor, ``batch_size`` rows a fetch: the server
        sorts once. (Keyset pages in ``COLLATE "C"`` cannot use the primary key, whose
        index has the database's collation, so each page sorted and hashed the whole rest
        of the table again: the listing grew quadratically.)"""
        from backends.postgres.database import is_absent_table_error

        prefix = _glob_prefix(match) if match else ""
        check = self._placement.sharded
        conditions = [clause]
        args: list[Any] = list(params)
        if prefix:
            conditions.append("starts_with(session_id, %s)")
            args.append(prefix)
        sql = (f"SELECT {columns} FROM {self._table} WHERE "
               + " AND ".join(conditions) + ' ORDER BY session_id COLLATE "C"')
        try:
            with db.connection() as conn, conn.transaction():
                with conn.cursor(name="semvecctl_sessions", binary=binary) as cur:
                    cur.itersize = batch_size
                    cur.execute(sql, args)
                    for row in cur:
                        if check and not self._placement.places(db, row[0]):
                            continue
                        if match is None or fnmatch.fnmatchcase(row[0], match):
                            yield convert(row)
        except Exception as exc:
            if not is_absent_table_error(exc):
                raise

    def count_sessions(self, *, owner_subject: OwnerFilter = UNSCOPED,
                       match: str | None = None) -> int:
        """One ``count(*)`` when the glob is absent or only a literal prefix and ``*``;
        any other glob, and a sharded store (only placed rows count: a misplaced copy is
        not a session the engine reads), count the listed ids."""
        prefix = _glob_prefix(match) if match else ""
        if self._placement.sharded or (match is not None and match != prefix + "*"):
            return sum(1 for _ in self.iter_session_ids(owner_subject=owner_subject, match=match))
        where, args = _listing_filter(owner_subject, prefix)
        sql = f"SELECT count(*) FROM {self._table} WHERE {where}"

        def work(conn: Any) -> int:
            return int(conn.execute(sql, args).fetchone()[0])

        return int(self._db.read(work, int))

    def iter_session_ids(self, *, owner_subject: OwnerFilter = UNSCOPED,
                         match: str | None = None) -> Iterator[str]:
        """The ids :meth:`iter_sessions` lists, in no set order, without reading the rows:
        no digest is computed, so no blob is fetched."""
        where, args = _listing_filter(owner_subject, _glob_prefix(match) if match else "")
        for db in self._placement.state_databases():
            for sid in self.stored_ids(db, where=where, args=args):
                if self._placement.sharded and not self._placement.places(db, sid):
                    continue
                if match is None or fnmatch.fnmatchcase(sid, match):
                    yield sid

    def locate_sessions(self, session_ids: Sequence[str]) -> dict[str, str]:
        """The database each session is routed to (``shard N``), for receipts that count
        per database. Empty for an unsharded store."""
        if not self._placement.sharded:
            return {}
        return {sid: self._placement.label(self._at(sid)) for sid in session_ids}

    def stored_ids(self, db: Database, *, where: str = "TRUE", args: Any = (),
                   batch: int = 5000) -> Iterator[str]:
        """Every session id stored on ``db`` (placed there or not), through a server-side
        cursor: what counts, doctor's placement checks and resharding read."""
        sql = f"SELECT session_id FROM {self._table} WHERE {where}"
        return (row[0] for row in db.stream(sql, args, batch))


def summary_and_state(row: Any) -> tuple[SessionSummary, LoadedState]:
    """A state row (``session_id, state_blob, version, owner_subject, pending_message,
    updated_at, drift_exempt``, the blob fetched binary) as its summary, the digest that
    of the bytes fetched, and its loaded state. A damaged row raises as ``load_full``
    would."""
    sid = row[0]
    blob, version = strict_blob(sid, row[1]), strict_version(sid, row[2])
    owner = row[3] or None
    summary = SessionSummary(
        session_id=sid, version=version, owner_subject=owner, pending_message=row[4],
        blob_size=len(blob), blob_sha256=hashlib.sha256(blob).hexdigest(), ttl_seconds=None,
        updated_at=as_utc(row[5]) if row[5] is not None else None,
        extra={"drift_exempt": bool(row[6])})
    return summary, LoadedState(blob, version, owner, row[4])


def _listing_filter(owner_subject: OwnerFilter, prefix: str) -> tuple[str, list[Any]]:
    """A listing's WHERE clause and parameters: the owner filter and the glob's literal
    prefix (the rest of the glob is matched in Python, not in SQL)."""
    clause, params = owner_clause(owner_subject)
    conditions, args = [clause], list(params)
    if prefix:
        conditions.append("starts_with(session_id, %s)")
        args.append(prefix)
    return " AND ".join(conditions), args


def _glob_prefix(pattern: str) -> str:
    prefix = []
    for char in pattern:
        if char in "*?[":
            break
        prefix.append(char)
    return "".join(prefix)
