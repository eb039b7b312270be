"""The conformance suite against a sharded SQL deployment (a primary and 3 shards on the
suite's real PostgreSQL): FULL, its case sessions written on every shard (each database's
own insert counter moves), and nothing of the run left on any database."""

from __future__ import annotations

import time

import psycopg
import pytest

from backends.conformance import Level, Status, run_conformance
from backends.conformance.context import ConformanceOptions

pytestmark = pytest.mark.postgres

OPTIONS = ConformanceOptions(allow_provisioning=True, index_dimensions=8, retrieval_dimensions=8)


def _inserted(url: str) -> int:
    """Rows ever inserted into the state table of this database (PostgreSQL's counter)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT coalesce(sum(n_tup_ins), 0) FROM pg_stat_user_tables"
                           " WHERE relname = 'semvec_session_state'").fetchone()
        return int(row[0])


#: pgvector adds items on the sessions' shards: its own groups, the rest is postgres's
ONLY = {"postgres": None, "pgvector": ("state", "commit_turn", "retrieval", "indexes")}


@pytest.mark.parametrize("backend", ["postgres", "pgvector"])
def test_a_sharded_deployment_conforms_with_case_sessions_on_every_shard(sharded_sql, backend):
    from backends.conformance.children import target_recipe
    from backends.registry import Registry

    options = {"uri": sharded_sql.primary, "shards": sharded_sql.shard_list,
               **({"dimensions": 8} if backend == "pgvector" else {})}
    target = {"postgres": "backends.postgres:PostgresAdapter",
              "pgvector": "backends.pgvector:PgVectorAdapter"}[backend]
    report = run_conformance(lambda: Registry().load_adapter(backend, **options),
                             selected_name=backend, options=OPTIONS, only=ONLY[backend],
                             recipe=target_recipe(target, options))
    problems = [f"{r.case_id}: {r.status} {r.message}" for r in report.cases
                if r.status not in (Status.PASSED, Status.NOT_APPLICABLE)]
    assert report.level == Level.FULL, "\n".join(problems)
    deadline = time.monotonic() + 30  # the server publishes its counters within a second or so
    while True:
        counts = [_inserted(url) for url in sharded_sql.shards]
        if all(counts) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert all(counts), f"a shard received no case session: {counts}"
    for url in (sharded_sql.primary, *sharded_sql.shards):
        with psycopg.connect(url) as conn:
            for table in ("semvec_session_state", "semvec_memory_events", "semvec_memory_items"):
                if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is None:
                    continue
                (left,) = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
                assert left == 0, f"{table} keeps {left} rows on {url.rsplit('/', 1)[1]}"
