"""The compliance event log: ``compliance_events`` plus per-user ``compliance_event_counters``.

Sequences are gap-free because the counter is bumped with ``INSERT ... ON CONFLICT DO
UPDATE ... RETURNING`` inside the same transaction as the event row (and, for
commit_turn, the state row): a rolled-back turn rolls its counter back too. The counter
row lock also serialises concurrent appends of one user. Events are listed in sequence
order, ascending.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Sequence

from backends.contract import UNSCOPED, MemoryEvent, OwnerFilter, validate_turn_events
from backends.errors import InvalidEvent
from backends.pgvector.database import Database
from backends.pgvector.schema import STATE_GROUP
from backends.pgvector.state import has_nul, owner_clause

_COLUMNS = (
    "event_id, user_id, sequence, owner_subject, session_id, created_at, content,"
    " embedding, meta, source_event_id"
)


def _nul_anywhere(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_nul_anywhere(k) or _nul_anywhere(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_nul_anywhere(v) for v in value)
    return False


def validate_pg_events(events: Sequence[Any] | None) -> list[MemoryEvent]:
    """``validate_turn_events``, then InvalidEvent before any write for text PostgreSQL
    cannot store (NUL, also as a ``\\u0000`` escape inside meta, which jsonb refuses)."""
    checked = validate_turn_events(events)
    for event in checked:
        for name in ("event_id", "user_id", "content", "owner_subject", "session_id",
                     "source_event_id"):
            if has_nul(getattr(event, name)):
                raise InvalidEvent(f"event {name} contains a NUL character, which "
                                   "PostgreSQL text cannot store")
        if _nul_anywhere(dict(event.meta)):
            raise InvalidEvent("event meta contains a NUL character, which PostgreSQL "
                               "jsonb cannot store")
    return checked


def append_in_transaction(conn: Any, db: Database, events: Sequence[MemoryEvent]) -> list[MemoryEvent]:
    """Write already-validated events on a connection inside a transaction.

    An event id that is already recorded raises InvalidEvent; the caller's transaction
    then rolls back, so nothing of the turn remains.
    """
    if not events:
        return []
    t = db.tables
    ids = [e.event_id for e in events]
    taken = conn.execute(
        f"SELECT event_id FROM {t.events} WHERE event_id = ANY(%s) LIMIT 1", (ids,)
    ).fetchone()
    if taken is not None:
        raise InvalidEvent(f"event id {taken[0]!r} is already recorded")
    stored = []
    for event in events:
        (sequence,) = conn.execute(
            f"INSERT INTO {t.counters} AS c (user_id, last_sequence) VALUES (%s, 1)"
            " ON CONFLICT (user_id) DO UPDATE SET last_sequence = c.last_sequence + 1"
            " RETURNING last_sequence",
            (event.user_id,),
        ).fetchone()
        embedding = (
            json.dumps([float(x) for x in event.embedding]) if event.embedding is not None else None
        )
        conn.execute(
            f"INSERT INTO {t.events} ({_COLUMNS}) VALUES"
            " (%s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s)",
            (event.event_id, event.user_id, sequence, event.owner_subject, event.session_id,
             event.created_at, event.content, embedding, json.dumps(dict(event.meta)),
             event.source_event_id),
        )
        stored.append(event.with_sequence(int(sequence)))
    return stored


def _event_from_row(row: Any) -> MemoryEvent:
    created = row[5]
    if created.tzinfo is None:
        created = created.replace(tzinfo=timezone.utc)
    embedding = row[7]
    return MemoryEvent(
        event_id=row[0],
        user_id=row[1],
        sequence=int(row[2]),
        owner_subject=row[3],
        session_id=row[4],
        created_at=created.astimezone(timezone.utc),
        content=row[6],
        embedding=tuple(float(x) for x in embedding) if embedding is not None else None,
        meta=dict(row[8] or {}),
        source_event_id=row[9],
    )


class PgVectorEventStore:
    """EventStore over PostgreSQL (per-user, gap-free, sequence-ordered)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._t = db.tables

    def append(self, event: MemoryEvent) -> MemoryEvent:
        validate_pg_events([event])

        def work(conn: Any) -> MemoryEvent:
            with conn.transaction():
                return append_in_transaction(conn, self._db, [event])[0]

        return self._db.write(STATE_GROUP, work)

    def list_events(
        self,
        user_id: str,
        *,
        owner_subject: OwnerFilter = UNSCOPED,
        after_sequence: int = 0,
        limit: int | None = None,
    ) -> list[MemoryEvent]:
        clause, params = owner_clause(owner_subject)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ValueError("limit must be None or a non-negative int")
        if limit == 0 or has_nul(user_id, owner_subject):
            return []
        sql = (
            f"SELECT {_COLUMNS} FROM {self._t.events} WHERE user_id = %s AND sequence > %s"
            f" AND {clause} ORDER BY sequence ASC"
        )
        args: list[Any] = [user_id, int(after_sequence), *params]
        if limit is not None:
            sql += " LIMIT %s"
            args.append(limit)

        def work(conn: Any) -> list[MemoryEvent]:
            return [_event_from_row(r) for r in conn.execute(sql, args).fetchall()]

        return self._db.read(work, list)

    def get_event(self, event_id: str) -> MemoryEvent | None:
        if has_nul(event_id):
            return None

        def work(conn: Any) -> MemoryEvent | None:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM {self._t.events} WHERE event_id = %s", (event_id,)
            ).fetchone()
            return _event_from_row(row) if row else None

        return self._db.read(work, lambda: None)

    def delete_older_than(self, cutoff: datetime, *, user_id: str | None = None) -> int:
        """Delete events created strictly before ``cutoff``. Counters are kept, so a
        later event never reuses a deleted sequence number."""
        if not isinstance(cutoff, datetime) or cutoff.tzinfo is None:
            raise ValueError("cutoff must be a timezone-aware datetime")
        if has_nul(user_id):
            return 0
        sql = f"DELETE FROM {self._t.events} WHERE created_at < %s"
        args: list[Any] = [cutoff]
        if user_id is not None:
            sql += " AND user_id = %s"
            args.append(user_id)

        def work(conn: Any) -> int:
            return conn.execute(sql, args).rowcount

        return self._db.read(work, lambda: 0)

    def purge_user(self, user_id: str) -> int:
        """Remove a user's events AND sequence counter (erasure); the user's next event
        starts again at 1. Returns the number of events removed."""
        if has_nul(user_id):
            return 0

        def work(conn: Any) -> int:
            with conn.transaction():
                removed = conn.execute(
                    f"DELETE FROM {self._t.events} WHERE user_id = %s", (user_id,)
                ).rowcount
                conn.execute(f"DELETE FROM {self._t.counters} WHERE user_id = %s", (user_id,))
                return removed

        return self._db.read(work, lambda: 0)
