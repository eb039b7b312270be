"""The compliance event log in the engine's ``semvec_memory_events`` table.

The engine's SQL layout has no sequence column: the engine reads every SQL event with
sequence 0 and lists a user's events newest first. We do the same rather than invent a
column, so the store declares ``assigns_sequences = False`` (the conformance case
``events.sequence_gap_free`` is then not applicable, with that reason). Ids are UUID text
(VARCHAR(36)), the embedding a JSON list in TEXT, meta a JSON object in TEXT, and an
unowned event has owner ``''``.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterator, Sequence

from backends.contract import (
    as_utc,
    speaks_both_conventions,
    UNSCOPED,
    EngineEventSurface,
    LogShape,
    MemoryEvent,
    meta_json,
    OwnerFilter,
    validate_turn_events,
)
from backends.contract.embedding_text import embedding_json
from backends.errors import CorruptEvent, InvalidEvent
from backends.contract.event_fields import strict_embedding, strict_meta
from backends.postgres.bulk import SqlEventBulk
from backends.postgres.database import Database
from backends.postgres.placement import Placement
from backends.postgres.schema import STATE_GROUP
from backends.postgres.state import has_nul, owner_clause

_COLUMNS = (
    "event_id, user_id, owner_subject, session_id, created_at, content, embedding, meta,"
    " source_event_id"
)

#: VARCHAR widths of the engine's table: longer values would fail mid-turn
_WIDTHS = {"user_id": 128, "owner_subject": 128, "session_id": 64}


def validate_pg_events(events: Sequence[Any] | None) -> list[MemoryEvent]:
    """``validate_turn_events``, then InvalidEvent before any write for values the
    engine's columns cannot hold (NUL in text, a value wider than its VARCHAR)."""
    checked = validate_turn_events(events)
    for event in checked:
        for name in ("event_id", "user_id", "content", "owner_subject", "session_id",
                     "source_event_id"):
            if has_nul(getattr(event, name)):
                raise InvalidEvent(f"event {name} contains a NUL character, which "
                                   "PostgreSQL text cannot store")
        for name, width in _WIDTHS.items():
            if len(getattr(event, name)) > width:
                raise InvalidEvent(f"event {name} is longer than {width} characters, the "
                                   "width of the engine's column")
    return checked


def _naive_utc(value: datetime) -> datetime:
    """The engine's ``created_at`` is TIMESTAMP without zone: UTC wall time."""
    return value.astimezone(timezone.utc).replace(tzinfo=None)


def append_in_transaction(conn: Any, db: Database, events: Sequence[MemoryEvent]) -> list[MemoryEvent]:
    """Write already-validated events on a connection inside a transaction.

    An event id that is already recorded raises InvalidEvent; the caller's transaction
    then rolls back, so nothing of the turn remains.
    """
    if not events:
        return []
    table = db.tables.events
    ids = [e.event_id for e in events]
    taken = conn.execute(
        f"SELECT event_id FROM {table} WHERE event_id = ANY(%s) LIMIT 1", (ids,)
    ).fetchone()
    if taken is not None:
        raise InvalidEvent(f"event id {taken[0]!r} is already recorded")
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {table} ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [(e.event_id, e.user_id, e.owner_subject, e.session_id, _naive_utc(e.created_at),
              e.content, embedding_json(e.embedding), meta_json(e.meta),
              e.source_event_id) for e in events],
        )
    return list(events)


def event_from_row(row: Any) -> MemoryEvent:
    """An event from its row, strictly: a missing user or time, a ``meta`` that is not a
    JSON object or an ``embedding`` that is not a JSON array of finite numbers raises
    CorruptEvent naming the event and the column (the engine could not read it either)."""
    event_id, user_id, created_at = row[0], row[1], row[4]
    if user_id is None or user_id == "" or created_at is None or created_at == "":
        column = "user_id" if user_id is None or user_id == "" else "created_at"
        raise CorruptEvent(str(event_id), column, "is missing", user_id=user_id or None)
    return MemoryEvent.decoded(
        event_id=event_id,
        user_id=user_id,
        owner_subject=row[2] or "",
        session_id=row[3] or "",
        created_at=as_utc(created_at),
        content=row[5] or "",
        embedding=strict_embedding(row[6], str(event_id), user_id),
        meta=strict_meta(row[7], str(event_id), user_id),
        source_event_id=row[8] or None,
    )


def _newest_first(event: MemoryEvent) -> tuple:
    return (event.created_at, event.event_id)


@speaks_both_conventions
class SqlEventStore(SqlEventBulk, EngineEventSurface):
    """EventStore over the engine's SQL table: no sequences, newest first.

    On a sharded deployment a turn's events live on its session's shard and an event
    appended outside a turn on the primary (ENGINE-WIRE section 10): every read here
    covers every database of the deployment and merges them in the engine's order
    (newest first), every delete reaches every database. (The engine's own readers open
    the primary only.)"""

    #: the engine's SQL layout has no sequence column (see the module docstring)
    assigns_sequences = False
    #: what the batch members (:mod:`backends.postgres.bulk`) select, decode and check
    _select = _COLUMNS
    _row_event = staticmethod(event_from_row)
    _checked = staticmethod(validate_pg_events)

    def __init__(self, placement: Placement | Database) -> None:
        if not isinstance(placement, Placement):
            placement = Placement(placement, ())
        self._placement = placement
        self._db = placement.primary
        self._table = placement.primary.tables.events

    def _databases(self) -> list[Database]:
        return self._placement.databases()

    def _sum(self, work) -> int:
        return sum(int(db.read(work, lambda: 0)) for db in self._databases())

    def init_schema(self) -> None:
        """The engine calls this before first use: create the tables if missing (on the
        primary, where an event appended outside a turn goes)."""
        self._db.provision(STATE_GROUP)

    def append(self, event: MemoryEvent) -> MemoryEvent:
        checked = validate_pg_events([event])

        def work(conn: Any) -> MemoryEvent:
            with conn.transaction():
                return append_in_transaction(conn, self._db, checked)[0]

        return self._db.write(STATE_GROUP, work)

    def append_batch(self, events: Sequence[MemoryEvent]) -> list[MemoryEvent]:
        """:meth:`append` of every event in one transaction (one id check, one batch of
        inserts), all or none: a copy's or an import's batch of events costs one round
        trip, not one transaction per event."""
        checked = validate_pg_events(list(events))
        if not checked:
            return []

        def work(conn: Any) -> list[MemoryEvent]:
            with conn.transaction():
                return append_in_transaction(conn, self._db, checked)

        return self._db.write(STATE_GROUP, work)

    def list_events(
        self,
        user_id: str,
        *,
        owner_subject: OwnerFilter = UNSCOPED,
        after_sequence: int = 0,
        limit: int | None = None,
    ) -> list[MemoryEvent]:
        """A user's events, newest first (as the engine lists SQL events); the owner
        filter applies before the limit. Every event has sequence 0, so a positive
        ``after_sequence`` finds nothing."""
        clause, params = owner_clause(owner_subject)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ValueError("limit must be None or a non-negative int")
        if limit == 0 or after_sequence > 0 or has_nul(user_id, owner_subject):
            return []
        if limit is not None and self._placement.sharded:
            # a shard's misplaced rows are dropped after its query: page until the limit
            import itertools

            return list(itertools.islice(self.iter_events(user_id, owner_subject=owner_subject,
                                                          page=min(limit, 500)), limit))
        sql = (f"SELECT {_COLUMNS} FROM {self._table} WHERE user_id = %s AND {clause}"
               " ORDER BY created_at DESC, event_id DESC")
        args: list[Any] = [user_id, *params]
        if limit is not None:
            sql += " LIMIT %s"
            args.append(limit)

        def work(conn: Any) -> list[Any]:
            return conn.execute(sql, args).fetchall()

        found = [event_from_row(r) for db in self._databases()
                 for r in self._placed_rows(db, db.read(work, list))]
        if len(self._databases()) > 1:
            found.sort(key=_newest_first, reverse=True)
        return found if limit is None else found[:limit]

    def events_of_users(self, user_ids: Sequence[str], *,
                        owner_subject: OwnerFilter = UNSCOPED) -> dict[str, list[MemoryEvent]]:
        """Several users' events in one query per database (the ``user_id`` index serves
        ``= ANY``), each list newest first as :meth:`list_events` gives it: an export
        with events asks for a chunk of users at a time, not one query per user."""
        clause, params = owner_clause(owner_subject)
        wanted = [u for u in dict.fromkeys(user_ids) if not has_nul(u, owner_subject)]
        found: dict[str, list[MemoryEvent]] = {u: [] for u in dict.fromkeys(user_ids)}
        if not wanted:
            return found

        def work(conn: Any) -> list[Any]:
            return conn.execute(f"SELECT {_COLUMNS} FROM {self._table} WHERE user_id = ANY(%s)"
                                f" AND {clause}", (wanted, *params)).fetchall()

        for db in self._databases():
            for row in self._placed_rows(db, db.read(work, list)):
                found[row[1]].append(event_from_row(row))
        for events in found.values():
            events.sort(key=_newest_first, reverse=True)
        return found

    def iter_events(self, user_id: str, *, owner_subject: OwnerFilter = UNSCOPED,
                    page: int = 500) -> Iterator[MemoryEvent]:
        """:meth:`list_events`'s order (newest first), a page per query: keyset on
        ``(created_at, event_id)``, so memory is bounded by the page however long the log
        (a page per database, merged)."""
        clause, params = owner_clause(owner_subject)
        if has_nul(user_id, owner_subject):
            return
        streams = [self._iter_on(db, user_id, clause, params, page) for db in self._databases()]
        if len(streams) == 1:
            yield from streams[0]
            return
        import heapq

        yield from heapq.merge(*streams, key=_newest_first, reverse=True)

    def _iter_on(self, db: Database, user_id: str, clause: str, params: tuple,
                 page: int) -> Iterator[MemoryEvent]:
        after: tuple[Any, str] | None = None
        while True:
            sql = f"SELECT {_COLUMNS} FROM {self._table} WHERE user_id = %s AND {clause}"
            args: list[Any] = [user_id, *params]
            if after is not None:
                sql += " AND (created_at, event_id) < (%s, %s)"
                args.extend(after)
            sql += " ORDER BY created_at DESC, event_id DESC LIMIT %s"
            args.append(page)

            def work(conn: Any, sql: str = sql, args: list[Any] = args) -> list[Any]:
                return conn.execute(sql, args).fetchall()

            rows = db.read(work, list)
            yield from (event_from_row(r) for r in self._placed_rows(db, rows))
            if len(rows) < page:
                return
            after = (rows[-1][4], rows[-1][0])

    def get_event(self, event_id: str, *,
                  owner_subject: OwnerFilter = UNSCOPED) -> MemoryEvent | None:
        clause, params = owner_clause(owner_subject)
        if has_nul(event_id, owner_subject):
            return None

        def work(conn: Any) -> MemoryEvent | None:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM {self._table} WHERE event_id = %s AND {clause}",
                (str(event_id), *params),
            ).fetchone()
            return event_from_row(row) if row else None

        for db in self._databases():
            found = db.read(work, lambda: None)
            if found is not None:
                return found
        return None

    def count_for_user(self, user_id: str) -> int:
        if has_nul(user_id):
            return 0

        def work(conn: Any) -> int:
            return int(conn.execute(f"SELECT count(*) FROM {self._table} WHERE user_id = %s",
                                    (user_id,)).fetchone()[0])

        if self._placement.sharded:  # what list_events lists: misplaced copies not counted
            return sum(self._placed_count(db, user_id) for db in self._databases())
        return self._sum(work)

    def iter_log_shapes(self, *, batch_size: int = 500) -> Iterator[LogShape]:
        """Every user's event count and events per UTC day, a page of users at a time
        (keyset by user id: memory is one page whatever the table's size); over several
        databases, each one's users merged by id and a user's days added up."""
        streams = [self._shapes_on(db, batch_size) for db in self._databases()]
        if len(streams) == 1:
            yield from streams[0]
            return
        import heapq
        import itertools

        merged = heapq.merge(*streams, key=lambda shape: shape.user_id)
        for user, shapes in itertools.groupby(merged, key=lambda shape: shape.user_id):
            days: dict[str, int] = {}
            for shape in shapes:
                for day, count in shape.per_day.items():
                    days[day] = days.get(day, 0) + count
            yield LogShape(user, sum(days.values()), dict(sorted(days.items())))

    def _shapes_on(self, db: Database, batch_size: int) -> Iterator[LogShape]:
        after = ""
        while True:
            def work(conn: Any, after: str = after) -> list[Any]:
                users = [r[0] for r in conn.execute(
                    f'SELECT DISTINCT user_id COLLATE "C" FROM {self._table} WHERE'
                    ' user_id COLLATE "C" > %s ORDER BY 1 LIMIT %s',
                    (after, batch_size)).fetchall()]
                if not users:
                    return []
                return [(users, conn.execute(
                    f"SELECT user_id, created_at::date, count(*) FROM {self._table} "
                    "WHERE user_id = ANY(%s) GROUP BY 1, 2 ORDER BY 1, 2", (users,)).fetchall())]

            page = db.read(work, list)
            if not page:
                return
            users, rows = page[0]
            per_user: dict[str, dict[str, int]] = {u: {} for u in users}
            for user, day, count in rows:
                per_user[user][day.isoformat()] = int(count)
            for user in users:
                days = per_user[user]
                yield LogShape(user, sum(days.values()), days)
            if len(users) < batch_size:
                return
            after = users[-1]

    def session_subjects(self, session_id: str) -> list[str]:
        """The users with events in ``session_id`` (the engine's optional member)."""
        if has_nul(session_id):
            return []

        def work(conn: Any) -> list[str]:
            rows = conn.execute(
                f"SELECT DISTINCT user_id FROM {self._table} WHERE session_id = %s",
                (session_id,)).fetchall()
            return [r[0] for r in rows]

        return sorted({u for db in self._databases() for u in db.read(work, list)})

    def subjects_by_session(self) -> dict[str, list[str]]:
        """Every session's users in one pass over each database (the engine's layout has
        no index on ``session_id``: one query per session would scan the table each
        time), for exports, copies, migrations and erasure."""

        def work(conn: Any) -> list[Any]:
            return conn.execute(
                f"SELECT session_id, array_agg(DISTINCT user_id) FROM {self._table}"
                " WHERE session_id <> '' GROUP BY session_id").fetchall()

        databases = self._databases()
        if len(databases) == 1:  # a row per session, its users distinct: nothing to merge
            return {sid: sorted(users) for sid, users in databases[0].read(work, list)}
        found: dict[str, set[str]] = {}
        for db in databases:
            for session_id, users in db.read(work, list):
                found.setdefault(session_id, set()).update(users)
        return {sid: sorted(users) for sid, users in found.items()}

    #: the order of :meth:`events_by_session`: session, then user, then log order, each
    #: text in code points (``COLLATE "C"``), as Python compares them, so databases merge
    _SESSION_ORDER = ('session_id COLLATE "C", user_id COLLATE "C", created_at,'
                      ' event_id COLLATE "C"')

    def events_by_session(self, *, owner_subject: OwnerFilter = UNSCOPED,
                          page: int = 2000) -> Iterator[tuple[str, tuple[MemoryEvent, ...]]]:
        """Every session's events as ``(session id, events)``, sessions in code-point
        order (the order ``iter_sessions`` lists them in), each session's events by user
        then oldest first: one query through a server-side cursor per database, sorted
        by the server, ``page`` rows a fetch. The engine's layout has no index on
        ``session_id``, so an export of a whole store reads its events in this one pass
        instead of a query per session or per chunk of users; memory holds one page and
        one session. Over shards, each database's placed rows, merged."""
        clause, params = owner_clause(owner_subject)
        sql = (f"SELECT {_COLUMNS} FROM {self._table} WHERE session_id <> '' AND {clause}"
               f" ORDER BY {self._SESSION_ORDER}")
        streams = [self._sorted_on(db, sql, params, page) for db in self._databases()]
        import itertools

        if len(streams) == 1:
            merged: Iterator[MemoryEvent] = streams[0]
        else:
            import heapq

            merged = heapq.merge(*streams, key=lambda e: (e.session_id, e.user_id,
                                                          e.created_at, e.event_id))
        for session_id, events in itertools.groupby(merged, key=lambda e: e.session_id):
            yield session_id, tuple(events)

    def encoded_events_by_session(self, encode: Any, *, owner_subject: OwnerFilter = UNSCOPED,
                                  page: int = 2000) -> Iterator[tuple[str, int, bytes]]:
        """:meth:`events_by_session` in a process of its own, each session's events
        handed to ``encode`` (a module-level function) there: ``(session id, number of
        events, encode(events))``. An export of a large store writes them as they come,
        while the pass's reading, decoding and encoding run on another core (see
        :mod:`backends.postgres.event_pass`)."""
        from backends.postgres.event_pass import encoded_by_session

        return encoded_by_session(self._placement, encode, owner_subject=owner_subject,
                                  page=page)

    def _sorted_on(self, db: Database, sql: str, params: tuple,
                   page: int) -> Iterator[MemoryEvent]:
        """One database's rows of ``sql`` decoded, without a shard's misplaced ones."""
        check = self._placement.sharded and db is not self._db
        for row in db.stream(sql, params, page, unpooled=True):
            if check and not self._placement.places(db, row[3]):
                continue
            yield event_from_row(row)

    def primary_only_count(self, user_id: str) -> int | None:
        """How many of the user's events the engine's own readers see on a sharded
        deployment (they open the primary only, ENGINE-WIRE section 7); None when the
        store is not sharded (they then see all of them)."""
        if not self._placement.sharded or has_nul(user_id):
            return None

        def work(conn: Any) -> int:
            return int(conn.execute(f"SELECT count(*) FROM {self._table} WHERE user_id = %s",
                                    (user_id,)).fetchone()[0])

        return int(self._db.read(work, lambda: 0))

    def locate_events(self, event_ids: Sequence[str]) -> dict[str, str]:
        """Which database holds each event (``primary``, ``shard N``), by primary key: what
        an erasure receipt counts per database. Empty for an unsharded store."""
        if not self._placement.sharded or not event_ids:
            return {}
        ids = [str(e) for e in event_ids if not has_nul(str(e))]

        def work(conn: Any) -> list[Any]:
            return conn.execute(f"SELECT event_id FROM {self._table} WHERE event_id = ANY(%s)",
                                (ids,)).fetchall()

        return {row[0]: self._placement.label(db) for db in self._databases()
                for row in db.read(work, list)}

    def delete_event(self, event_id: str) -> bool:
        if has_nul(event_id):
            return False

        def work(conn: Any) -> bool:
            return conn.execute(f"DELETE FROM {self._table} WHERE event_id = %s",
                                (str(event_id),)).rowcount

        return self._sum(work) > 0

    def delete_events_before(self, cutoff: datetime, *, user_id: str | None = None) -> int:
        """Delete events created strictly before ``cutoff``."""
        if not isinstance(cutoff, datetime) or cutoff.tzinfo is None:
            raise ValueError("cutoff must be a timezone-aware datetime")
        if has_nul(user_id):
            return 0
        sql = f"DELETE FROM {self._table} WHERE created_at < %s"
        args: list[Any] = [_naive_utc(cutoff)]
        if user_id is not None:
            sql += " AND user_id = %s"
            args.append(user_id)

        def work(conn: Any) -> int:
            return conn.execute(sql, args).rowcount

        return self._sum(work)

    def event_refs(self, user_id: str) -> list[tuple[str, str | None, str | None, str | None]]:
        """Every event row of the user, read raw (for erasure): tuples ``(event_id,
        owner_subject, session_id, problem)``, ``problem`` saying why the row cannot be
        decoded (None when it can)."""
        if has_nul(user_id):
            return []

        def work(conn: Any) -> list[Any]:
            return conn.execute(f"SELECT {_COLUMNS} FROM {self._table} WHERE user_id = %s"
                                " ORDER BY created_at, event_id", (user_id,)).fetchall()

        refs: list[tuple[str, str | None, str | None, str | None]] = []
        rows = [row for db in self._databases() for row in db.read(work, list)]
        for row in rows:
            problem = None
            try:
                event_from_row(row)
            except CorruptEvent as exc:  # the strict decoder names the event and the field
                problem = str(exc)
            except (ValueError, TypeError) as exc:
                problem = f"event {row[0]!r} cannot be decoded: {type(exc).__name__}: {exc}"
            refs.append((row[0], row[2] or "", row[3] or "", problem))
        return refs

    def purge_user(self, user_id: str) -> int:
        """Remove every event of a user (erasure). Returns the number removed."""
        if has_nul(user_id):
            return 0

        def work(conn: Any) -> int:
            return conn.execute(f"DELETE FROM {self._table} WHERE user_id = %s",
                                (user_id,)).rowcount

        return self._sum(work)

    def restore_events(self, events: Sequence[MemoryEvent]) -> int:
        """Write copied events whole (a migration's, a reshard's), each where the engine's
        turn writes it: on its session's shard when it names a session, else on the
        primary. One transaction per database; an event id already recorded there refuses
        that database's events (InvalidEvent). The layout keeps no sequence: 0 is stored."""
        checked = validate_pg_events([e.with_sequence(0) for e in events])
        groups: dict[Database, list[MemoryEvent]] = {}
        for event in checked:
            db = self._placement.for_session(event.session_id) if event.session_id else self._db
            groups.setdefault(db, []).append(event)

        def work(conn: Any, db: Database, part: list[MemoryEvent]) -> None:
            with conn.transaction():
                append_in_transaction(conn, db, part)

        for db, part in groups.items():
            db.write(STATE_GROUP, lambda conn, db=db, part=part: work(conn, db, part))
        return len(checked)

    def _placed_rows(self, db: Database, rows: list[Any]) -> list[Any]:
        """``rows`` (of ``_COLUMNS``) read on ``db`` without those a shard holds for a
        session the routing places elsewhere (misplaced: an old copy a reshard left, which
        the engine never reads and doctor removes); the primary's rows are all kept (an
        event appended outside a turn lives there whatever its session)."""
        if not self._placement.sharded or db is self._db:
            return rows
        return [r for r in rows if not r[3] or self._placement.places(db, r[3])]

    def _placed_count(self, db: Database, user_id: str) -> int:
        """The user's events on ``db`` that :meth:`_placed_rows` keeps, counted per session
        (one grouped query)."""
        def work(conn: Any) -> list[Any]:
            return conn.execute(f"SELECT session_id, count(*) FROM {self._table} WHERE user_id = %s"
                                " GROUP BY session_id", (user_id,)).fetchall()

        rows = db.read(work, list)
        if db is self._db:
            return sum(int(n) for _, n in rows)
        return sum(int(n) for sid, n in rows if not sid or self._placement.places(db, sid))
