"""The SQL audit (``postgres``, and the base of a flavour's): every check is one query that the
server filters, read through a server-side cursor, so only damaged rows cross the wire
and memory stays flat however large the tables are.

The engine's SQL layout keeps no sequence numbers, counters or index entries for events
(ENGINE-WIRE section 5), so the event checks here are the readability ones (an embedding
or meta that is not plainly well-formed is parsed in Python by the decoders' rules). The
one safe repair is purging the item-mirror rows of a session that is gone; the orphans
are collected before the first is reported, so a purge never runs under an open cursor.
The engine's other tables (ENGINE-WIRE 6b) are known and not reported.

A sharded deployment (ENGINE-WIRE section 10) is audited whole: every check runs on each
database of the placement (the primary, then the shards), each finding's place naming
its database (``shard 1: row ...``), and the placement checks report the rows a database
holds for sessions the routing never reads there: misplaced state rows (alone, or a
duplicate of the copy on the session's shard, or a conflict with it), events and item rows
away from their session's shard. Those are found from one stream of each database's
session ids (``stored_ids``) and one grouped scan of its events and item tables (the
engine's events table has no index on session_id); the ids found misplaced are held
(memory grows with the misplaced rows, not with the store) and looked up in batches on
the other databases. Their repairs are :mod:`backends.postgres.relocation`'s.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterator

from backends.contract.index_findings import index_findings
from backends.contract.event_check import StoredEvent, describe_problems, event_problems
from backends.info import declared_ttl_env
from backends.contract.findings import (Finding, Leftovers, Section, Severity, chunks, topology_findings,
                                   unknown_name, unreadable_event, unreadable_state)

#: the engine's own other tables in the same database (ENGINE-WIRE section 6b): known,
#: not ours to judge, not reported
ENGINE_TABLES = frozenset({
    "semvec_sessions", "semvec_clusters", "semvec_cluster_members", "semvec_cluster_registry",
    "semvec_cortex_state", "semvec_audit_logs", "semvec_observer_registry", "semvec_regions",
    "semvec_region_registry", "semvec_region_clusters"})
_UUID = "^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"
_TTL_ENV = declared_ttl_env("postgres")



_NUMBER = r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?"
#: a JSON array of decimal numbers, nothing else (NaN, Infinity, strings, nesting fail it)
_NUMBER_ARRAY = rf"^\s*\[\s*({_NUMBER}(\s*,\s*{_NUMBER})*)?\s*\]\s*$"


class SqlAudit:
    def __init__(self, adapter: Any, *, batch: int = 500, timeout: float = 5.0,
                 progress: Callable[[int], None] | None = None) -> None:
        from backends.postgres.placement import Placement
        from backends.postgres.schema import companion_tables, legacy_tables

        self.adapter = adapter
        self.placement = getattr(adapter, "placement", None) or Placement(adapter._db, ())
        self.schema = adapter.config.schema
        self.batch = batch
        self.timeout = timeout
        self.progress = progress
        self.seen = 0
        self._use(self.placement.primary)
        # a flavour's tables are known whichever SQL backend reads the database
        backend, layout = adapter.config.backend, self.db.layout
        self.session_tables = companion_tables(backend, layout)
        from backends.postgres.schema import OWN_TABLES

        self.known = {*layout.tables, *self.session_tables, *OWN_TABLES}
        #: legacy table -> the backend whose older release made it
        self.legacy = legacy_tables(backend, layout)

    def _use(self, db: Any) -> None:
        """Point the per-database checks at ``db`` (the primary unless sharded)."""
        self.db = db
        self.tables = db.tables

    def _at(self, where: str, db: Any = None) -> str:
        """A finding's place: on a sharded deployment, prefixed by its database."""
        if not self.placement.sharded:
            return where
        return f"{self.placement.label(db if db is not None else self.db)}: {where}"

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
        """Rows of one query through a server-side cursor, ``batch`` at a time."""
        with self.db.connection() as conn, conn.transaction():
            with conn.cursor(name="semvecctl_doctor") as cur:
                cur.itersize = self.batch
                cur.execute(sql, params)
                for row in cur:
                    yield row

    def _present(self) -> set[str]:
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = %s AND c.relkind IN ('r', 'p')", (self.schema,)).fetchall()
        return {r[0] for r in rows}

    def run(self) -> Iterator[Finding]:
        yield from self.deployment()
        for db in self.placement.databases():
            self._use(db)
            yield from self.database()
        self._use(self.placement.primary)

    def database(self) -> Iterator[Finding]:
        """Every check of one database (``self.db``)."""
        from backends.postgres.schema import EVENTS_TABLE, STATE_TABLE

        present = self._present()
        if STATE_TABLE in present:
            yield from self.states()
            yield from self.ttl_coverage()
        if EVENTS_TABLE in present:
            yield from self.events()
        yield from self.flavour_checks(present)
        if self.placement.sharded:
            yield from self.placement_checks(present)
        yield from self.leftovers(present)
        for table in sorted(present):
            if table in self.known or table in ENGINE_TABLES:
                continue
            if table.startswith("semvec_") or table in self.legacy:
                owner = self.legacy.get(table)
                yield unknown_name(
                    "namespace.unknown-table", self._at(f"table {self.schema}.{table}"),
                    "a table in the engine's namespace that semvecctl does not know"
                    + (f" (an older semvecctl {owner} layout)" if owner else ""))

    def _tick(self) -> None:
        self.seen += 1
        if self.progress is not None and self.seen % self.batch == 0:
            self.progress(self.seen)

    def states(self) -> Iterator[Finding]:
        sql = (f"SELECT session_id, state_blob IS NOT NULL, version FROM {self.tables.state}"
               " WHERE state_blob IS NULL OR version IS NULL OR version < 1")
        from backends.postgres.state import damage_of

        for session_id, has_blob, version in self._rows(sql):
            self._tick()
            yield unreadable_state(self._at(f"row {self.tables.state} {session_id!r}"), session_id,
                                   damage_of(session_id, has_blob, version))

    def ttl_coverage(self) -> Iterator[Finding]:
        try:
            ttl = int(os.environ.get(_TTL_ENV, "0") or 0)
        except ValueError:
            ttl = 0
        if ttl <= 0:
            return
        sql = f"SELECT session_id FROM {self.tables.state} WHERE updated_at IS NULL"
        for (session_id,) in self._rows(sql):
            yield Finding(
                "state.no-ttl", Severity.warning, self._at(f"row {self.tables.state} {session_id!r}"),
                f"session {session_id!r} has no updated_at though an idle TTL of {ttl}s "
                f"is configured ({_TTL_ENV})",
                "the idle sweep compares updated_at: this row is never reclaimed",
                "let the next write set updated_at, or set it by hand after checking")

    def events(self) -> Iterator[Finding]:
        """Every event the engine could not read. The server filters out the plainly
        sound rows (cheap checks in SQL: a UUID id and source, a user, a time, an
        embedding that is plainly a JSON array of decimal numbers, a meta that is plainly
        a JSON object); each suspect row is judged by the shared strict judge
        (:mod:`backends.contract.event_check`), so only suspect rows cross the wire and
        the verdict is every backend's."""
        t = self.tables.events
        plain = [
            "event_id !~ %(uuid)s",
            "coalesce(user_id, '') = ''",
            "created_at IS NULL",
            "embedding IS NULL OR btrim(embedding::text) = 'null'",
            "coalesce(source_event_id, '') <> '' AND source_event_id !~ %(uuid)s",
            # a JSON array of plain decimals (a 3-digit exponent may overflow a float)
            "embedding::text !~ %(array)s OR embedding::text ~ '[eE][-+]?[0-9]{3}'",
            "meta IS NOT NULL AND btrim(meta::text) NOT IN ('{}', '') AND "
            + ("NOT (meta::text IS JSON OBJECT)" if self._server_version() >= 160000 else "true"),
        ]
        where = " OR ".join(f"({cond})" for cond in plain)
        params: dict[str, Any] = {"uuid": _UUID, "array": _NUMBER_ARRAY}
        sql = (f"SELECT event_id, user_id, created_at, embedding::text, meta::text,"
               f" source_event_id FROM {t} WHERE {where}")
        for event_id, user_id, created_at, embedding, meta, source in self._rows(sql, params):  # type: ignore[arg-type]
            self._tick()
            problems = event_problems(StoredEvent(
                key=event_id, event_id=event_id, user_id=user_id, created_at=created_at,
                embedding=embedding, meta=meta, source_event_id=source, sequenced=False))
            if problems:
                yield unreadable_event(self._at(f"row {t} {event_id!r} (user {user_id!r})"),
                                       describe_problems(problems))

    def _server_version(self) -> int:
        with self.db.connection() as conn:
            return int(conn.info.server_version)

    def flavour_checks(self, present: set[str]) -> Iterator[Finding]:
        """A flavour's checks of its own tables (its subclass's); none here."""
        return iter(())

    def leftovers(self, present: set[str]) -> Iterator[Finding]:
        """Rows a load or conformance run left (its cleanup never finished)."""
        from backends.postgres.schema import EVENTS_TABLE, STATE_TABLE

        found = Leftovers(self._at("rows"), lambda prefix: (
            f"list them with semvecctl sessions list --match '{prefix}*', then delete each "
            f"(semvecctl sessions delete ID --yes; events: DELETE FROM "
            f"{self.tables.events} WHERE user_id LIKE '{prefix}%')"))
        for table, column, name in ((STATE_TABLE, "session_id", self.tables.state),
                                    (EVENTS_TABLE, "user_id", self.tables.events),
                                    *((t, "session_id", self.tables.of(t)) for t in self.session_tables)):
            if table not in present:
                continue
            sql = (f"SELECT DISTINCT {column} FROM {name} WHERE {column} LIKE 'semvec-load-%%'"
                   f" OR {column} LIKE 'semvec-conf-%%'")
            for (value,) in self._rows(sql):
                found.see(str(value))
        yield from found.findings()

    def deployment(self) -> Iterator[Finding]:
        for finding in index_findings(self.adapter, engine={_engine_index()}):
            if self.placement.sharded:  # the target names the database: say it first
                finding.where = _database_first(finding.where)
            yield finding
        if not self.placement.sharded:
            yield from self._durability(self.adapter.health_details(self.timeout), "server")
            return
        from backends.postgres.health import database_details

        for db in self.placement.databases():
            yield from self._durability(database_details(self.adapter, db, self.timeout),
                                        self._at("server", db))

    def _durability(self, details: dict[str, Any], where: str) -> Iterator[Finding]:
        yield from topology_findings(details, where, "point the store (or this shard's "
                                     "entry of the shard list) at the primary")
        if details.get("primary"):
            return  # a standby's own settings are not what the engine writes to
        if details.get("reachable") and not details.get("durable", True):
            yield Finding("advice.durability", Severity.warning, where,
                          details.get("durability_reason") or "durability settings are off",
                          "a crash can lose acknowledged turns",
                          "fsync, synchronous_commit and full_page_writes on", Section.advice)

    # -- placement (sharded deployments) ----------------------------------------------

    def placement_checks(self, present: set[str]) -> Iterator[Finding]:
        """The rows ``self.db`` holds for sessions the routing reads elsewhere: state
        rows (misplaced, duplicate, conflict), events (not on the primary: the events
        appended outside a turn live there) and rows of the flavours' tables."""
        from backends.postgres.schema import EVENTS_TABLE, STATE_TABLE

        db, placement = self.db, self.placement
        states: list[str] = []
        if STATE_TABLE in present:
            for session_id in self.adapter.state_store().stored_ids(db, batch=self.batch):
                if not placement.places(db, session_id):
                    states.append(session_id)
        events: dict[str, int] = {}
        if EVENTS_TABLE in present and db is not placement.primary:
            sql = (f"SELECT session_id, count(*) FROM {self.tables.events}"
                   " WHERE session_id <> '' GROUP BY session_id")
            for session_id, count in self._rows(sql):
                if not placement.places(db, session_id):
                    events[session_id] = int(count)
        flavours: dict[str, dict[str, int]] = {}
        for table in db.session_tables():
            if table not in present:
                continue
            sql = (f"SELECT session_id, count(*) FROM {self.tables.of(table)}"
                   " GROUP BY session_id")
            flavours[table] = {sid: int(n) for sid, n in self._rows(sql)
                               if not placement.places(db, sid)}
        with_state = set(states)
        every = sorted(with_state.union(events, *flavours.values()))
        for part in chunks(iter(every), self.batch):
            copies = self._copies([sid for sid in part if sid in with_state])
            event_ids = self._event_ids([sid for sid in part if sid in events])
            for session_id in part:
                self._tick()
                found = (self._state_finding(session_id, copies.get(session_id, {}),
                                             event_ids.get(session_id, []))
                         if session_id in with_state else None)
                if found is not None:
                    yield found
                if session_id in events:
                    yield self._events_finding(session_id, event_ids.get(session_id, []))
                for table, counts in flavours.items():
                    if session_id in counts:
                        yield self._rows_finding(table, session_id, counts[session_id],
                                                 session_id in with_state)

    def _copies(self, session_ids: list[str]) -> dict[str, dict[Any, Any]]:
        """Every database's copy of each of ``session_ids`` (one lookup per database)."""
        from backends.postgres.relocation import state_copies

        found: dict[str, dict[Any, Any]] = {}
        if not session_ids:
            return found
        for db in self.placement.databases():
            for session_id, copy in state_copies(db, session_ids).items():
                found.setdefault(session_id, {})[db] = copy
        return found

    def _event_ids(self, session_ids: list[str]) -> dict[str, list[str]]:
        """The ids of the events of ``session_ids`` on this database (one scan)."""
        found: dict[str, list[str]] = {}
        if not session_ids:
            return found
        sql = (f"SELECT session_id, event_id FROM {self.tables.events}"
               " WHERE session_id = ANY(%s) ORDER BY event_id")
        for session_id, event_id in self._rows(sql, (session_ids,)):
            found.setdefault(session_id, []).append(event_id)
        return found

    def _state_finding(self, session_id: str, copies: dict[Any, Any],
                       event_ids: list[str]) -> Finding | None:
        """The finding for the misplaced state row of ``session_id`` here, judged against
        every database's copy (None when the row went meanwhile)."""
        from backends.contract.session_ids import shown
        from backends.postgres.relocation import PlacementConflict, holds, newest_copy, settle

        db, placement = self.db, self.placement
        owner = placement.for_session(session_id)
        here, there = placement.label(db), placement.label(owner)
        mine, theirs = copies.get(db), copies.get(owner)
        if mine is None:
            return None
        where = self._at(f"row {self.tables.state} {session_id!r}")
        name = shown(session_id)
        conflict = finding = None
        if theirs is not None and theirs.covers(mine):
            finding = Finding(
                "placement.duplicate", Severity.warning, where,
                f"session {name} is stored twice: on {here} ({mine.describe()}), which the "
                f"routing never reads for it, and on its shard {there} ({theirs.describe()}),"
                " the copy the engine reads",
                "the copy here is a state the engine has moved past: never read, skipped by "
                "listings, still holding the session's data",
                f"remove the copy on {here} (safe: only while {there} holds the same version "
                "or a newer one; its events move there first; --fix --apply does it)")
        elif theirs is not None:
            newer = (mine.version is not None and theirs.version is not None
                     and mine.version > theirs.version)
            conflict = (f"session {name} on {here} ({mine.describe()}), which the routing "
                        "never reads for it, is " + ("newer than" if newer else "not the same as")
                        + f" the copy the engine reads on its shard {there} "
                        f"({theirs.describe()})")
        else:
            misplaced = {d: c for d, c in copies.items() if d is not owner}
            try:
                newest = newest_copy(misplaced)
            except PlacementConflict as exc:
                conflict = (f"session {name} is on "
                            + ", ".join(f"{placement.label(d)} ({c.describe()})"
                                        for d, c in misplaced.items())
                            + f", never on its shard {there}, and the copies disagree ({exc})")
            else:
                if newest is db:
                    others = [placement.label(d) for d in misplaced if d is not db]
                    finding = Finding(
                        "placement.misplaced", Severity.error, where,
                        f"session {name} is stored on {here} ({mine.describe()}), which the "
                        f"routing never reads for it; its shard {there} holds no copy"
                        + (f" (older copies on {', '.join(others)})" if others else ""),
                        "the engine reads the session on its shard only: it finds nothing "
                        "there and starts the session over, while this row sits unread "
                        "(written under another shard list, or copied by hand)",
                        f"move it to {there} (safe: an insert that never overwrites, with the "
                        "session's events and items; --fix --apply does it)")
                else:
                    finding = Finding(
                        "placement.duplicate", Severity.warning, where,
                        f"session {name} is stored on {here} ({mine.describe()}) and on "
                        f"{placement.label(newest)} ({misplaced[newest].describe()}), neither "
                        f"its shard {there}: the engine reads neither",
                        "the copy here is older than the one that moves to the session's shard",
                        f"move the newest copy to {there}, then remove this one (safe; "
                        "--fix --apply does both)")
        if finding is None:
            return Finding(
                "placement.conflict", Severity.error, where, str(conflict),
                "the engine reads only the copy on the session's shard; either copy may hold "
                "turns the other lacks, so no rule may drop one",
                f"compare the rows on {here} and on {there} and keep one by hand; doctor "
                "never chooses")

        def fix() -> None:
            settle(placement, session_id, db, event_ids)

        finding.fix = fix
        finding.verify = lambda: not holds(db, session_id) and holds(owner, session_id)
        return finding

    def _events_finding(self, session_id: str, event_ids: list[str]) -> Finding:
        from backends.contract.session_ids import shown
        from backends.postgres.relocation import events_left, move_events

        db, placement = self.db, self.placement
        owner = placement.for_session(session_id)
        here, there = placement.label(db), placement.label(owner)
        finding = Finding(
            "events.misplaced", Severity.warning,
            self._at(f"rows {self.tables.events} session {session_id!r}"),
            f"{len(event_ids)} event(s) of session {shown(session_id)} are on {here}; the "
            f"engine writes a turn's events on the session's shard, {there}",
            "written under another shard list: per-shard maintenance and a move of the "
            "session's rows miss them, and semvecctl's event listings skip them as old "
            "copies (erase still finds and removes them)",
            f"move them to {there} (safe: copied, then deleted here only where {there} "
            "holds the identical row; --fix --apply does it)")

        def fix() -> None:
            move_events(db, owner, event_ids)

        finding.fix = fix
        finding.verify = lambda: not events_left(db, event_ids)
        return finding

    def _rows_finding(self, table: str, session_id: str, count: int,
                      with_state: bool) -> Finding:
        from backends.contract.session_ids import shown
        from backends.postgres.relocation import purge_rows_without_state, rows_left

        db, placement = self.db, self.placement
        here, there = placement.label(db), placement.label(placement.for_session(session_id))
        qualified = self.tables.of(table)
        finding = Finding(
            "items.misplaced", Severity.warning,
            self._at(f"rows {qualified} session {session_id!r}"),
            f"{count} item-mirror row(s) of session {shown(session_id)} are on {here}; its "
            f"shard is {there}",
            "retrieval reads the session's shard only: these rows are never served, and "
            "the session's erasure misses them",
            "they follow the session's misplaced state row here (moved or removed with it "
            "by its repair; by hand with it when that one is a conflict)" if with_state
            else "purge them (safe: only while this database holds no state row of the "
                 "session; --fix --apply does it)")

        def fix() -> None:
            purge_rows_without_state(db, qualified, session_id)

        finding.fix = fix
        finding.verify = lambda: not rows_left(db, qualified, session_id)
        return finding


def _database_first(where: str) -> str:
    """``index X on shard 1: t`` -> ``shard 1: index X on t``."""
    head, sep, rest = where.partition(" on ")
    label, colon, target = rest.partition(": ")
    if not (sep and colon) or not (label.startswith(("primary", "shard "))):
        return where
    return f"{label}: {head} on {target}"


def _engine_index() -> str:
    from backends.postgres.schema import EVENTS_USER_INDEX

    return EVENTS_USER_INDEX


def audit(adapter: Any, **options: Any) -> Iterator[Finding]:
    return SqlAudit(adapter, **options).run()
