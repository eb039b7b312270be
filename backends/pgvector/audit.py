"""``pgvector``'s doctor audit: the shared SQL audit plus the checks of its item mirror
(rows of sessions that are gone, with their one safe repair), on each database of the
deployment (rows away from their session's shard are the base's placement check)."""

from __future__ import annotations

from typing import Any, Callable, Iterator

from backends.contract.findings import Finding, Severity
from backends.pgvector.schema import ITEMS_TABLE
from backends.postgres.audit import SqlAudit


class PgVectorAudit(SqlAudit):
    def flavour_checks(self, present: set[str]) -> Iterator[Finding]:
        from backends.postgres.schema import STATE_TABLE

        if ITEMS_TABLE in present and STATE_TABLE in present:
            yield from self.orphan_items()

    def orphan_items(self) -> Iterator[Finding]:
        """Item-mirror rows of sessions that are gone, one finding per session. The
        sessions are collected before any is reported, so a purge (another connection)
        never runs while this cursor holds one, and cannot shift what is still to read."""
        items, state = self.tables.of(ITEMS_TABLE), self.tables.state
        sql = (f"SELECT i.session_id, count(*) FROM {items} i"
               f" WHERE NOT EXISTS (SELECT 1 FROM {state} s"
               "  WHERE s.session_id = i.session_id) GROUP BY i.session_id"
               " ORDER BY i.session_id")
        for session_id, count in list(self._rows(sql)):
            if self.placement.sharded and not self.placement.places(self.db, session_id):
                continue  # away from its shard: the placement check reports it
            self._tick()
            finding = Finding(
                "items.orphaned", Severity.warning,
                self._at(f"rows {items} session {session_id!r}"),
                f"{count} item-mirror row(s) of session {session_id!r}, which no longer exists",
                "server-side retrieval can still serve them, and an erasure of the session "
                "missed them",
                "purge the session's items (safe: only while the session is absent; "
                "--fix --apply does it)")
            finding.fix = self._purge_orphan(session_id)
            finding.verify = self._orphan_gone(session_id)
            yield finding

    def _purge_orphan(self, session_id: str) -> Callable[[], None]:
        items, state, db = self.tables.of(ITEMS_TABLE), self.tables.state, self.db

        def purge() -> None:
            # one statement: a session that came back meanwhile keeps its items
            with db.connection() as conn:
                conn.execute(f"DELETE FROM {items} i WHERE i.session_id = %s AND NOT EXISTS"
                             f" (SELECT 1 FROM {state} s WHERE s.session_id = %s)",
                             (session_id, session_id))
        return purge

    def _orphan_gone(self, session_id: str) -> Callable[[], bool]:
        items, state, db = self.tables.of(ITEMS_TABLE), self.tables.state, self.db

        def gone() -> bool:
            with db.connection() as conn:
                row = conn.execute(
                    f"SELECT EXISTS (SELECT 1 FROM {items} WHERE session_id = %s)"
                    f" AND NOT EXISTS (SELECT 1 FROM {state} WHERE session_id = %s)",
                    (session_id, session_id)).fetchone()
            return not row[0]
        return gone



def audit(adapter: Any, **options: Any) -> Iterator[Finding]:
    return PgVectorAudit(adapter, **options).run()
