"""The SQL audit (``postgres``, and the base of ``pgvector``'s): every check is one query that the
server filters, read through a server-side cursor, so only damaged rows cross the wire
and memory stays flat however large the tables are.

The engine's SQL layout keeps no sequence numbers, counters or index entries for events
(ENGINE-WIRE section 5), so the event checks here are the readability ones (an embedding
or meta that is not plainly well-formed is parsed in Python by the decoders' rules). The
one safe repair is purging the item-mirror rows of a session that is gone; the orphans
are collected before the first is reported, so a purge never runs under an open cursor.
The engine's other tables (ENGINE-WIRE 6b) are known and not reported.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterator

from backends.doctor.indexes import index_findings
from backends.event_fields import embedding_problem, meta_problem
from backends.info import declared_ttl_env
from backends.doctor.model import (Finding, Leftovers, Section, Severity, unknown_name,
                                   unreadable_event, unreadable_state)

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
        from backends.sql.schema import FLAVOUR_TABLES

        self.adapter = adapter
        self.db = adapter._db
        self.schema = adapter.config.schema
        self.tables = self.db.tables
        self.batch = batch
        self.timeout = timeout
        self.progress = progress
        # a flavour's tables are known whichever SQL backend reads the database
        self.known = {*self.db.layout.tables, *FLAVOUR_TABLES}
        self.seen = 0

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
        from backends.sql.schema import EVENTS_TABLE, LEGACY_TABLES, STATE_TABLE

        present = self._present()
        yield from self.deployment()
        if STATE_TABLE in present:
            yield from self.states()
            yield from self.ttl_coverage()
        if EVENTS_TABLE in present:
            yield from self.events()
        yield from self.flavour_checks(present)
        yield from self.leftovers(present)
        for table in sorted(present):
            if table in self.known or table in ENGINE_TABLES:
                continue
            if table.startswith("semvec_") or table in LEGACY_TABLES:
                yield unknown_name(
                    "namespace.unknown-table", f"table {self.schema}.{table}",
                    "a table in the engine's namespace that semvecctl does not know"
                    + (" (an older semvecctl pgvector layout)" if table in LEGACY_TABLES else ""))

    def _tick(self) -> None:
        self.seen += 1
        if self.progress is not None and self.seen % self.batch == 0:
            self.progress(self.seen)

    def states(self) -> Iterator[Finding]:
        sql = (f"SELECT session_id, state_blob IS NOT NULL, version FROM {self.tables.state}"
               " WHERE state_blob IS NULL OR version IS NULL OR version < 1")
        from backends.sql.state import damage_of

        for session_id, has_blob, version in self._rows(sql):
            self._tick()
            yield unreadable_state(f"row {self.tables.state} {session_id!r}", session_id,
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
                "state.no-ttl", Severity.warning, f"row {self.tables.state} {session_id!r}",
                f"session {session_id!r} has no updated_at though an idle TTL of {ttl}s "
                f"is configured ({_TTL_ENV})",
                "the idle sweep compares updated_at: this row is never reclaimed",
                "let the next write set updated_at, or set it by hand after checking")

    def events(self) -> Iterator[Finding]:
        """Every event the engine could not read. The server filters: cheap checks in SQL,
        an embedding that is not plainly a JSON array of decimal numbers and a meta that
        is not plainly a JSON object are sent for the strict parse in Python (the same
        rules the decoders apply), so only suspect rows cross the wire."""
        t = self.tables.events
        checks = [
            ("event_id !~ %(uuid)s", "event_id is not a UUID"),
            ("coalesce(user_id, '') = ''", "user_id is missing"),
            ("created_at IS NULL", "created_at is missing"),
            ("embedding IS NULL OR btrim(embedding::text) = 'null'", "embedding is null"),
            ("coalesce(source_event_id, '') <> '' AND source_event_id !~ %(uuid)s",
             "source_event_id is not a UUID"),
        ]
        # a JSON array of plain decimals (a 3-digit exponent may overflow a float: parsed)
        emb_suspect = ("embedding IS NOT NULL AND btrim(embedding::text) <> 'null' AND"
                       " (embedding::text !~ %(array)s OR embedding::text ~ '[eE][-+]?[0-9]{3}')")
        meta_suspect = ("meta IS NOT NULL AND btrim(meta::text) NOT IN ('{}', '') AND "
                        + ("NOT (meta::text IS JSON OBJECT)" if self._server_version() >= 160000
                           else "true"))
        cases = ", ".join(f"CASE WHEN {cond} THEN %(w{i})s END" for i, (cond, _) in enumerate(checks))
        where = " OR ".join(f"({cond})" for cond, _ in checks)
        params: dict[str, Any] = {"uuid": _UUID, "array": _NUMBER_ARRAY}
        params.update({f"w{i}": words for i, (_, words) in enumerate(checks)})
        sql = (f"SELECT event_id, user_id, concat_ws('; ', {cases}),"
               f" CASE WHEN {emb_suspect} THEN embedding::text END,"
               f" CASE WHEN {meta_suspect} THEN meta::text END"
               f" FROM {t} WHERE {where} OR ({emb_suspect}) OR ({meta_suspect})")
        for event_id, user_id, listed, embedding, meta in self._rows(sql, params):  # type: ignore[arg-type]
            self._tick()
            problems = [listed] if listed else []
            if embedding is not None:
                problem = embedding_problem(embedding)[1]
                if problem:
                    problems.append(f"embedding {problem}")
            if meta is not None:
                problem = meta_problem(meta)[1]
                if problem:
                    problems.append(f"meta {problem}")
            if problems:
                yield unreadable_event(f"row {t} {event_id!r} (user {user_id!r})",
                                       "; ".join(problems))

    def _server_version(self) -> int:
        with self.db.connection() as conn:
            return int(conn.info.server_version)

    def flavour_checks(self, present: set[str]) -> Iterator[Finding]:
        """A flavour's checks of its own tables (pgvector's item mirror); none here."""
        return iter(())

    def leftovers(self, present: set[str]) -> Iterator[Finding]:
        """Rows a load or conformance run left (its cleanup never finished)."""
        from backends.sql.schema import EVENTS_TABLE, FLAVOUR_TABLES, STATE_TABLE

        found = Leftovers("rows", lambda prefix: (
            f"list them with semvecctl sessions list --match '{prefix}*', then delete each "
            f"(semvecctl sessions delete ID --yes; events: DELETE FROM "
            f"{self.tables.events} WHERE user_id LIKE '{prefix}%')"))
        for table, column, name in ((STATE_TABLE, "session_id", self.tables.state),
                                    (EVENTS_TABLE, "user_id", self.tables.events),
                                    *((t, "session_id", self.tables.of(t)) for t in FLAVOUR_TABLES)):
            if table not in present:
                continue
            sql = (f"SELECT DISTINCT {column} FROM {name} WHERE {column} LIKE 'semvec-load-%%'"
                   f" OR {column} LIKE 'semvec-conf-%%'")
            for (value,) in self._rows(sql):
                found.see(str(value))
        yield from found.findings()

    def deployment(self) -> Iterator[Finding]:
        yield from index_findings(self.adapter, engine={_engine_index()})
        details = self.adapter.health_details(self.timeout)
        if details.get("reachable") and not details.get("durable", True):
            yield Finding("advice.durability", Severity.warning, "server",
                          details.get("durability_reason") or "durability settings are off",
                          "a crash can lose acknowledged turns",
                          "fsync, synchronous_commit and full_page_writes on", Section.advice)


def _engine_index() -> str:
    from backends.sql.schema import EVENTS_USER_INDEX

    return EVENTS_USER_INDEX


def audit(adapter: Any, **options: Any) -> Iterator[Finding]:
    return SqlAudit(adapter, **options).run()
