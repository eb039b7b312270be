"""Moving one session's rows between the databases of a sharded SQL deployment: the
repairs behind ``doctor``'s placement findings (ENGINE-WIRE section 10).

A misplaced state row (on a database the routing never reads for its session) is
settled against the copy on the session's shard, the one the engine reads:

- the shard holds no copy: the row is MOVED there, with the session's events and item
  rows, by an insert that never overwrites (when several misplaced copies exist, the
  newest moves; copies that differ at the same version are a conflict);
- the shard holds the same version with the same content, or a newer version: the
  misplaced row is REMOVED (its events move to the shard first; its item rows, the
  mirror of a state nobody reads, go with it);
- the shard holds an older version, or the same version with other content: a
  :class:`PlacementConflict` for a person; nothing is touched.

Every step is one transaction on one database, in an order an interruption cannot turn
into a loss: the shard is written first (state, events and items together), then the
misplaced database loses exactly the rows the shard now holds identically. An interrupted
move leaves two identical copies, which the next run removes as a duplicate. The copy on
the session's shard is never updated or deleted here.

Rows travel as ``to_jsonb`` of the source row into ``jsonb_populate_recordset`` of the
target table (the columns both sides have, generated ones left to the target), so every
column type (bytea, vector, arrays, timestamps) keeps its exact value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from backends.postgres.schema import STATE_GROUP, shared_layouts

if TYPE_CHECKING:  # pragma: no cover
    from backends.postgres.database import Database
    from backends.postgres.placement import Placement


class PlacementConflict(RuntimeError):
    """Two copies of a session that no rule may settle: a person decides."""


class RelocationRefused(RuntimeError):
    """A move that cannot be made as asked (a table missing on the target, a row that
    changed while it was being moved); nothing was removed."""


@dataclass(frozen=True)
class StateCopy:
    """What decides between two copies of a session: version and content digest."""

    version: int | None
    digest: str | None
    owner: str
    pending: str

    def same(self, other: "StateCopy") -> bool:
        return (self.digest, self.owner, self.pending) == (other.digest, other.owner,
                                                           other.pending)

    def covers(self, other: "StateCopy") -> bool:
        """Whether this copy (the one the engine reads) makes ``other`` redundant: a newer
        version, or the same version with the same content."""
        if not isinstance(self.version, int) or not isinstance(other.version, int):
            return False
        return self.version > other.version or (self.version == other.version
                                                and self.same(other))

    def describe(self) -> str:
        return "damaged (no version)" if self.version is None else f"version {self.version}"


_COPY_COLUMNS = ("session_id, version, encode(sha256(state_blob), 'hex'),"
                 " coalesce(owner_subject, ''), coalesce(pending_message, '')")


def state_copies(db: "Database", session_ids: Sequence[str]) -> dict[str, StateCopy]:
    """The copies ``db`` holds of ``session_ids``: one primary-key lookup for them all."""
    ids = list(session_ids)
    if not ids:
        return {}

    def work(conn: Any) -> list[Any]:
        return conn.execute(f"SELECT {_COPY_COLUMNS} FROM {db.tables.state}"
                            " WHERE session_id = ANY(%s)", (ids,)).fetchall()

    return {row[0]: StateCopy(row[1] if isinstance(row[1], int) and row[1] >= 1 else None,
                              row[2], row[3], row[4])
            for row in db.read(work, list)}


def newest_copy(copies: dict["Database", StateCopy]) -> "Database":
    """The database whose copy is the newest of ``copies`` (misplaced ones, none on the
    session's shard): the one that moves there. Copies that tie at the top version
    with other content, or any damaged copy, are a PlacementConflict."""
    if any(copy.version is None for copy in copies.values()):
        raise PlacementConflict("a copy has no readable version")
    top = max(copy.version or 0 for copy in copies.values())
    best = [db for db, copy in copies.items() if copy.version == top]
    if any(not copies[db].same(copies[best[0]]) for db in best[1:]):
        raise PlacementConflict(f"copies at version {top} differ in content")
    return best[0]


def settle(placement: "Placement", session_id: str, source: "Database",
           event_ids: Iterable[str] = ()) -> str:
    """Settle the misplaced copy of ``session_id`` on ``source`` (see the module):
    ``moved``, ``removed`` or ``nothing left`` (the row was gone already). ``event_ids``:
    the session's events on ``source`` (the audit found them in its one scan; the events
    table has no index on session_id), moved with it."""
    owner = placement.for_session(session_id)
    if owner is source:
        return "nothing left"
    ids = list(event_ids)
    for _attempt in range(3):
        mine = state_copies(source, [session_id]).get(session_id)
        if mine is None:
            return "nothing left"
        theirs = state_copies(owner, [session_id]).get(session_id)
        if theirs is None:
            copies = {db: copy for db in placement.databases() if db is not owner
                      for copy in [state_copies(db, [session_id]).get(session_id)] if copy}
            donor = newest_copy(copies)
            moved_ids = ids if donor is source else []
            if not _insert_on_owner(donor, owner, session_id, copies[donor], moved_ids):
                continue  # the shard was written meanwhile: judge again
            _drop(donor, owner, session_id, copies[donor], moved_ids)
            if donor is source:
                return "moved"
            continue  # the newest copy moved from elsewhere: judge this one against it
        if not theirs.covers(mine):
            raise PlacementConflict(
                f"the copy on its shard is {theirs.describe()}"
                + (" with other content" if theirs.version == mine.version else "")
                + f", this one {mine.describe()}: decide by hand")
        move_events(source, owner, ids)
        _drop(source, owner, session_id, mine, ids)
        return "removed"
    raise RelocationRefused("the copies changed while they were settled; run doctor again")


def holds(db: "Database", session_id: str) -> bool:
    return session_id in state_copies(db, [session_id])


# -- rows as JSON ---------------------------------------------------------------------


def _exists(conn: Any, qualified: str) -> bool:
    return conn.execute("SELECT to_regclass(%s)", (qualified,)).fetchone()[0] is not None


def _rows_as_json(conn: Any, qualified: str, where: str, args: Sequence[Any]) -> list[dict]:
    if not _exists(conn, qualified):
        return []
    return [row[0] for row in conn.execute(
        f"SELECT to_jsonb(t) FROM {qualified} t WHERE {where}", list(args)).fetchall()]


def _insert_json(conn: Any, qualified: str, rows: list[dict]) -> int:
    """Insert ``rows`` (``to_jsonb`` of source rows) into ``qualified``, skipping any that
    collide with a stored key; the columns both sides have, generated ones left out.
    Returns the number inserted."""
    if not rows:
        return 0
    insertable = [r[0] for r in conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0"
        " AND NOT attisdropped AND attgenerated = '' ORDER BY attnum", (qualified,)).fetchall()]
    present = set().union(*(row.keys() for row in rows))
    columns = ", ".join('"' + c.replace('"', '""') + '"' for c in insertable if c in present)
    return len(conn.execute(
        f"INSERT INTO {qualified} ({columns}) SELECT {columns} FROM"
        f" jsonb_populate_recordset(NULL::{qualified}, %s::jsonb) ON CONFLICT DO NOTHING"
        " RETURNING 1", (json.dumps(rows),)).fetchall())


def _same_rows(ours: list[dict], theirs: list[dict], key: str) -> set[str]:
    """Keys of ``ours`` whose row ``theirs`` holds identically (on the columns both
    have)."""
    by_key = {row[key]: row for row in theirs}
    same: set[str] = set()
    for row in ours:
        other = by_key.get(row[key])
        if other is not None and all(other[c] == v for c, v in row.items() if c in other):
            same.add(row[key])
    return same


class _Lost(Exception):
    """Rolls the owner's transaction back: its state row appeared meanwhile."""


def _flavour_tables(db: "Database") -> list[str]:
    return [db.tables.of(table) for table in db.session_tables()]


def _ensure_tables(owner: "Database", tables: Iterable[str]) -> None:
    """Provision the owner's groups holding ``tables`` (unqualified names); a table its
    layout does not know is a RelocationRefused."""
    for table in tables:
        groups = [g for g in owner.layout.groups if table in g.tables]
        if not groups:
            keepers = [name for name, layout in shared_layouts(owner.config.backend)
                       if table in layout.tables]
            raise RelocationRefused(
                f"the session's shard has no table {table} in this backend's layout: "
                f"use the backend that keeps it ({' or '.join(keepers) or 'its own'}), "
                "or semvecctl indexes ensure")
        owner.provision(groups[0].name)


def _insert_on_owner(donor: "Database", owner: "Database", session_id: str,
                     copy: StateCopy, event_ids: list[str]) -> bool:
    """Copy the donor's state row (still exactly ``copy``), its item rows and the given
    events onto ``owner`` in one transaction; False (nothing written) when the owner
    holds the session by then."""
    with donor.connection() as conn:
        state = _rows_as_json(conn, donor.tables.state, "session_id = %s", (session_id,))
        flavours = {table: _rows_as_json(conn, donor.tables.of(table), "session_id = %s",
                                         (session_id,))
                    for table in donor.session_tables()}
        events = _rows_as_json(conn, donor.tables.events, "event_id = ANY(%s)",
                               (event_ids,)) if event_ids else []
    now = state_copies(donor, [session_id]).get(session_id)
    if not state or now != copy:
        raise RelocationRefused("the misplaced row changed while it was moved; run doctor again")
    _ensure_tables(owner, [t for t, rows in flavours.items() if rows])

    def work(conn: Any) -> bool:
        try:
            with conn.transaction():
                if _insert_json(conn, owner.tables.state, state) != 1:
                    raise _Lost()
                for table, rows in flavours.items():
                    # item rows the shard held without a state row were orphans: the
                    # moved state's own replace them
                    qualified = owner.tables.of(table)
                    if _exists(conn, qualified):
                        conn.execute(f"DELETE FROM {qualified} WHERE session_id = %s",
                                     (session_id,))
                    _insert_json(conn, qualified, rows)
                _insert_json(conn, owner.tables.events, events)
        except _Lost:
            return False
        return True

    return bool(owner.write(STATE_GROUP, work))


def move_events(source: "Database", owner: "Database", event_ids: Sequence[str]) -> int:
    """Copy the events ``event_ids`` from ``source`` to ``owner`` (never overwriting),
    then delete on ``source`` those the owner holds identically. Returns how many were
    removed from ``source``."""
    ids = list(event_ids)
    if not ids:
        return 0
    with source.connection() as conn:
        rows = _rows_as_json(conn, source.tables.events, "event_id = ANY(%s)", (ids,))
    if not rows:
        return 0

    def insert(conn: Any) -> None:
        with conn.transaction():
            _insert_json(conn, owner.tables.events, rows)

    owner.write(STATE_GROUP, insert)
    return _delete_events_held(source, owner, rows)


def _delete_events_held(source: "Database", owner: "Database", rows: list[dict],
                        conn: Any | None = None) -> int:
    if not rows:
        return 0
    with owner.connection() as other:
        theirs = _rows_as_json(other, owner.tables.events, "event_id = ANY(%s)",
                               ([r["event_id"] for r in rows],))
    held = sorted(_same_rows(rows, theirs, "event_id"))
    if not held:
        return 0
    sql = f"DELETE FROM {source.tables.events} WHERE event_id = ANY(%s)"
    if conn is not None:
        return int(conn.execute(sql, (held,)).rowcount)
    with source.connection() as own:
        return int(own.execute(sql, (held,)).rowcount)


def _drop(source: "Database", owner: "Database", session_id: str, copy: StateCopy,
          event_ids: list[str]) -> None:
    """Remove from ``source``, in one transaction, the state row (only while it is still
    exactly ``copy``), the session's item rows, and those of ``event_ids`` the owner holds
    identically."""
    with source.connection() as conn:
        rows = _rows_as_json(conn, source.tables.events, "event_id = ANY(%s)",
                             (event_ids,)) if event_ids else []
    with source.connection() as conn, conn.transaction():
        gone = conn.execute(
            f"DELETE FROM {source.tables.state} WHERE session_id = %s AND version"
            " IS NOT DISTINCT FROM %s AND encode(sha256(state_blob), 'hex') IS NOT DISTINCT"
            " FROM %s AND coalesce(owner_subject, '') = %s AND coalesce(pending_message, '')"
            " = %s RETURNING 1",
            (session_id, copy.version, copy.digest, copy.owner, copy.pending)).fetchone()
        if gone is None:
            raise RelocationRefused("the misplaced row changed while it was settled; "
                                    "run doctor again")
        for qualified in _flavour_tables(source):
            if _exists(conn, qualified):
                conn.execute(f"DELETE FROM {qualified} WHERE session_id = %s", (session_id,))
        _delete_events_held(source, owner, rows, conn)


def purge_rows_without_state(db: "Database", qualified: str, session_id: str) -> None:
    """Delete ``session_id``'s rows of a flavour table on ``db``, in one statement that
    keeps them while ``db`` holds a state row of the session (they go with that row)."""
    with db.connection() as conn:
        conn.execute(f"DELETE FROM {qualified} t WHERE t.session_id = %s AND NOT EXISTS"
                     f" (SELECT 1 FROM {db.tables.state} s WHERE s.session_id = %s)",
                     (session_id, session_id))


def rows_left(db: "Database", qualified: str, session_id: str) -> bool:
    with db.connection() as conn:
        if not _exists(conn, qualified):
            return False
        return conn.execute(f"SELECT EXISTS (SELECT 1 FROM {qualified} WHERE session_id = %s)",
                            (session_id,)).fetchone()[0]


def events_left(db: "Database", event_ids: Sequence[str]) -> bool:
    with db.connection() as conn:
        return conn.execute(f"SELECT EXISTS (SELECT 1 FROM {db.tables.events}"
                            " WHERE event_id = ANY(%s))", (list(event_ids),)).fetchone()[0]
