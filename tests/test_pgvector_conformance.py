"""The conformance suite against a real PostgreSQL + pgvector: every group, FULL level,
including retrieval with two tenants of identical content and index provisioning."""

from __future__ import annotations

import psycopg
import pytest

from backends.conformance import ConformanceSuite, Level, Status, run_conformance
from backends.conformance.context import ConformanceOptions

pytestmark = pytest.mark.postgres

OPTIONS = ConformanceOptions(allow_provisioning=True, index_dimensions=8, retrieval_dimensions=8)


def test_pgvector_conforms_fully_and_cleans_up(pgvector_url):
    from backends.pgvector import PgVectorAdapter

    report = run_conformance(lambda: PgVectorAdapter(pgvector_url, dimensions=8),
                             selected_name="pg-vector", options=OPTIONS)
    problems = [f"{r.case_id}: {r.status} {r.message}" for r in report.cases
                if r.status != Status.PASSED]
    assert report.level == Level.FULL, "\n".join(problems)
    groups = {r.group for r in report.cases if r.status == Status.PASSED}
    assert {"retrieval", "indexes", "events", "commit_turn", "concurrency"} <= groups
    with psycopg.connect(pgvector_url) as conn:
        for table in ("semvec_session_state", "compliance_events", "semvec_memory_items"):
            (left,) = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            assert left == 0, f"{table} keeps {left} rows after the run"


class TestPgVectorConformanceMixin(ConformanceSuite):
    """The same suite through the pytest mixin a plugin author would use."""

    conformance_name = "pgvector"
    conformance_options = OPTIONS
    conformance_only = ("state", "retrieval")

    @pytest.fixture
    def adapter(self, pgvector_url):
        from backends.pgvector import PgVectorAdapter

        adapter = PgVectorAdapter(pgvector_url, dimensions=8)
        yield adapter
        adapter.close()
