"""A reshard's full passes move rows shard to shard as PostgreSQL sends them.

Both ends of a reshard are tables of the engine's layout, so a moved session's row can
go from the old shard's binary fetch straight into the new shard's binary COPY: the
driver parses and formats it (in C), and nothing of ours touches it per row besides the
summary the state file needs. That per-row work of ours (a summary, a loaded state, a
restore row, the checks a caller's values need) is most of what a pass costs otherwise
(bench/bench_shards.py). The digest the state file records is that of the blob
fetched, which is the blob written. The target write is the batch restore's
insert-if-absent
(:meth:`backends.postgres.state.SqlStateStore.restore_copied`): a row that exists there is
left alone and reported, as with any other rows.

Used by the passes through :class:`ReshardCopier` (given to the live migration by
:func:`backends.migrate.shards.reshard_migration`); catch-up passes, which read
only what changed, go the ordinary way. A database whose state table is not of the
engine's column types (binary COPY needs them) makes the copier step aside.
"""

from __future__ import annotations

import contextlib
import fnmatch
from dataclasses import dataclass
from typing import Any, Iterator, NamedTuple, Sequence

from backends.contract import OwnerFilter, SessionSummary, UNSCOPED
from backends.postgres.schema import STATE_COPY_COLUMNS

#: moved sessions read per query (their rows are held until written: about 1 MiB at
#: 2 KB a row)
READ_BATCH = 500


@dataclass(frozen=True, eq=False)
class CopiedRows:
    """Rows of one old shard as its binary fetch gave them (the engine's state columns,
    :data:`STATE_COPY_COLUMNS` order), all routed to one database of the new list."""

    rows: list[tuple]


class CopiedState(NamedTuple):
    """A moved session's row as the passes see it: what they compare, and the batch its
    row is in (``rows``)."""

    version: int
    owner_subject: str | None
    pending_message: str | None
    rows: CopiedRows


class ReshardCopier:
    """The full passes' reads and writes of a reshard, with the rows as fetched."""

    def __init__(self, reshard: Any) -> None:
        self._rs = reshard
        self._usable: bool | None = None

    def usable(self) -> bool:
        """Every database of both lists holds a state table of the engine's column types
        (or none yet: it is made with them): asked once."""
        if self._usable is None:
            from backends.postgres.schema import has_copy_types

            databases = {*self._rs.old.placement.state_databases(),
                         *self._rs.new.placement.state_databases()}
            self._usable = all(
                db.read(lambda conn, db=db: has_copy_types(conn, db.tables.state), lambda: True)
                for db in databases)
        return self._usable

    def owns(self, state: Any) -> bool:
        return isinstance(state, CopiedState)

    def iter_rows(self, *, owner_subject: OwnerFilter = UNSCOPED, match: str | None = None,
                  batch_size: int = READ_BATCH) -> Iterator[tuple[SessionSummary, CopiedState]]:
        """Every move the old list holds, with its row: the ids streamed from each old
        shard (no blob) and routed on a thread of their own, while the rows of the
        batches found so far are read by id, a query per batch and destination."""
        from backends.transfer.readahead import read_ahead
        from backends.postgres.state import owner_clause

        clause, params = owner_clause(owner_subject)
        size = max(1, min(batch_size, READ_BATCH))
        with contextlib.closing(read_ahead(self._batches(clause, params, match, size),
                                           depth=4)) as batches:
            for db, ids in batches:
                yield from _read_moves(db, ids, clause, params)

    def _batches(self, clause: str, params: Sequence[Any], match: str | None,
                 size: int) -> Iterator[tuple[Any, list[str]]]:
        """(old shard, ids) of the moves, at most ``size`` ids with one destination each."""
        for db in self._rs.old.placement.state_databases():
            destination = self._rs.destination_on("old", db)
            # one loop, per destination's batch: every id of the deployment passes here
            batches: dict[int, list[str]] = {}
            for (sid,) in db.stream(f"SELECT session_id FROM {db.tables.state} WHERE {clause}",
                                    params):
                j = destination(sid)
                if j is None or (match is not None and not fnmatch.fnmatchcase(sid, match)):
                    continue
                batch = batches.setdefault(j, [])
                batch.append(sid)
                if len(batch) >= size:
                    yield db, batch
                    batches[j] = []
            for batch in batches.values():
                if batch:
                    yield db, batch

    def write(self, fresh: Sequence[tuple[Any, CopiedState, str]]) -> set[str]:
        """Write the sessions of ``fresh`` (summary, state, digest) as their rows were
        fetched, insert-if-absent; returns the ids that someone else created first."""
        store = self._rs.new.state_store()
        wanted: dict[int, tuple[CopiedRows, list[str]]] = {}
        for summary, state, _ in fresh:
            wanted.setdefault(id(state.rows), (state.rows, []))[1].append(summary.session_id)
        existed: set[str] = set()
        for rows, ids in wanted.values():
            existed |= store.restore_copied(rows.rows, ids)
        return existed


def _read_moves(db: Any, ids: list[str], clause: str,
                params: Sequence[Any]) -> Iterator[tuple[SessionSummary, CopiedState]]:
    """The rows of ``ids`` on ``db`` that are still there, in one query, each with its
    summary (the digest of the blob fetched)."""
    from backends.postgres.state import summary_and_state

    columns = ", ".join(STATE_COPY_COLUMNS)
    sql = f"SELECT {columns} FROM {db.tables.state} WHERE session_id = ANY(%s) AND {clause}"

    def work(conn: Any) -> list[Any]:
        # binary results: a blob comes as its bytes, not as hex text twice its size
        return conn.execute(sql, (ids, *params), binary=True).fetchall()

    fetched = db.read(work, list)
    batch = CopiedRows(fetched)
    for sid, blob, version, exempt, owner, pending, updated in fetched:
        summary, state = summary_and_state((sid, blob, version, owner, pending, updated, exempt))
        yield summary, CopiedState(state.version, state.owner_subject, pending, batch)
