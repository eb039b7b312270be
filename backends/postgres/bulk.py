"""Set-based reads and writes for a transfer's batches (the ``bulk`` role: the same file
in every backend): events by id in one ``= ANY(%s)`` query per database, and a batch of
events written in one ``INSERT … SELECT FROM unnest(…) ON CONFLICT DO NOTHING`` per
database and transaction, the ids already recorded held back alone (the rest lands).
A batch of users' logs is :meth:`SqlEventStore.events_of_users`. Mixed into the event
store (:class:`~backends.contract.defaults.EventStoreDefaults` gives the slow default).
The engine's layout keeps no sequence: events are written with none."""

from __future__ import annotations

from datetime import timezone
from typing import Any, Sequence

from backends.contract import MemoryEvent, meta_json
from backends.contract.embedding_text import embedding_json
from backends.postgres.schema import STATE_GROUP

#: the event table's columns, in the order of the unnest arrays and their types
_UNNEST = ("event_id", "user_id", "owner_subject", "session_id", "created_at", "content",
           "embedding", "meta", "source_event_id")
_TYPES = ("text[]", "text[]", "text[]", "text[]", "timestamp[]", "text[]", "text[]", "text[]",
          "text[]")


def _columns(events: Sequence[MemoryEvent]) -> list[list[Any]]:
    rows = [(e.event_id, e.user_id, e.owner_subject, e.session_id,
             e.created_at.astimezone(timezone.utc).replace(tzinfo=None), e.content,
             embedding_json(e.embedding), meta_json(e.meta), e.source_event_id) for e in events]
    return [list(column) for column in zip(*rows)]


class SqlEventBulk:
    """The batch members of :class:`~backends.postgres.events.SqlEventStore`."""

    _placement: Any
    _db: Any
    _table: str
    #: set by the store: its select list, its strict row decoder and its event checks
    _select: str
    _row_event: Any
    _checked: Any

    def events_by_ids(self, event_ids: Sequence[str]) -> dict[str, MemoryEvent]:
        """The stored events among ``event_ids``: one ``= ANY`` query per database (a
        shard's misplaced copies left out, as the readers leave them)."""
        ids = [str(i) for i in dict.fromkeys(event_ids) if "\x00" not in str(i)]
        found: dict[str, MemoryEvent] = {}
        if not ids:
            return found

        def work(conn: Any) -> list[Any]:
            return conn.execute(f"SELECT {self._select} FROM {self._table} WHERE event_id = ANY(%s)",
                                (ids,)).fetchall()

        for db in self._placement.databases():
            for row in self._placed_rows(db, db.read(work, list)):  # type: ignore[attr-defined]
                found.setdefault(row[0], self._row_event(row))
        return found

    def restore_event_batch(self, events: Sequence[MemoryEvent]) -> set[str]:
        """Events written each where a turn writes it (its session's shard, else the
        primary), one statement and transaction per database: an id already recorded
        there is skipped and returned; the rest lands. No sequence is kept."""
        checked = self._checked([e.with_sequence(0) for e in events])
        groups: dict[Any, list[MemoryEvent]] = {}
        for event in checked:
            db = self._placement.for_session(event.session_id) if event.session_id else self._db
            groups.setdefault(db, []).append(event)
        clashes: set[str] = set()
        for db, part in groups.items():
            clashes |= db.write(STATE_GROUP, lambda conn, part=part: self._insert(conn, part))
        return clashes

    def _insert(self, conn: Any, part: list[MemoryEvent]) -> set[str]:
        arrays = ", ".join(f"%s::{t}" for t in _TYPES)
        names = ", ".join(_UNNEST)
        sql = (f"INSERT INTO {self._table} ({names}) SELECT * FROM unnest({arrays}) "
               "ON CONFLICT (event_id) DO NOTHING RETURNING event_id")
        with conn.transaction():
            written = {row[0] for row in conn.execute(sql, _columns(part)).fetchall()}
        return {e.event_id for e in part} - written
