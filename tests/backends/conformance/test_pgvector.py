"""The conformance suite against a real PostgreSQL, both SQL backends: every group, FULL
level, including (pgvector) retrieval with two tenants of identical content and index
provisioning.

The event table is the engine's ``semvec_memory_events``, which keeps no sequence: the
sequence case is not applicable (declared ``assigns_sequences = False``, and seen from the
events read back), and no other case depends on listing order."""

from __future__ import annotations

import psycopg
import pytest

from backends.conformance import ConformanceSuite, Level, Status, run_conformance
from backends.conformance.context import ConformanceOptions

pytestmark = pytest.mark.postgres

OPTIONS = ConformanceOptions(allow_provisioning=True, index_dimensions=8, retrieval_dimensions=8)


@pytest.mark.parametrize("backend", ["postgres", "pg-vector"])
def test_sql_backends_conform_fully_and_clean_up(pgvector_url, backend):
    from backends.conformance.children import target_recipe
    from backends.pgvector import PgVectorAdapter
    from backends.postgres import PostgresAdapter

    if backend == "postgres":
        factory = lambda: PostgresAdapter(pgvector_url)  # noqa: E731
        recipe = target_recipe("backends.postgres:PostgresAdapter", {"uri": pgvector_url})
    else:
        factory = lambda: PgVectorAdapter(pgvector_url, dimensions=8)  # noqa: E731
        recipe = target_recipe("backends.pgvector:PgVectorAdapter",
                               {"uri": pgvector_url, "dimensions": 8})
    report = run_conformance(factory, selected_name=backend, options=OPTIONS, recipe=recipe)
    problems = [f"{r.case_id}: {r.status} {r.message}" for r in report.cases
                if r.status != Status.PASSED]
    assert report.level == Level.FULL, "\n".join(problems)
    groups = {r.group for r in report.cases if r.status == Status.PASSED}
    assert {"indexes", "events", "commit_turn", "concurrency", "faults", "isolation"} <= groups
    # issue 25: every new case applied (children rebuilt from the recipe), none skipped
    for case_id in ("concurrency.processes", "durability.sigkill", "faults.connection",
                    "isolation.empty_values", "isolation.owner_variants"):
        assert report.case(case_id).status == Status.PASSED, report.case(case_id)
    owners_in_search = report.case("isolation.retrieval_owner_variants")
    assert owners_in_search.status == (Status.NOT_APPLICABLE if backend == "postgres"
                                       else Status.PASSED), owners_in_search
    if backend != "postgres":
        assert "retrieval" in groups
    with psycopg.connect(pgvector_url) as conn:
        tables = ["semvec_session_state", "semvec_memory_events"]
        tables += [] if backend == "postgres" else ["semvec_memory_items"]
        for table in tables:
            (left,) = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            assert left == 0, f"{table} keeps {left} rows after the run"


@pytest.mark.parametrize("redis_url", [None, "redis://127.0.0.1:1/0"])
def test_the_redis_layout_cases_say_why_they_do_not_apply_to_postgres(pgvector_url, redis_url,
                                                                      monkeypatch):
    """Issue 42: the two cases that plant or read keys of the engine's Redis layout said
    "no Redis URI" on PostgreSQL; the reason is that the store is not Redis at all."""
    from backends.postgres import PostgresAdapter

    monkeypatch.delenv("REDIS_URL", raising=False)
    report = run_conformance(lambda: PostgresAdapter(pgvector_url), selected_name="postgres",
                             only="commit_turn.atomic_on_server_error,durability.server_is_durable",
                             options=ConformanceOptions(redis_url=redis_url))
    assert len(report.cases) == 2
    for result in report.cases:
        assert result.status == Status.NOT_APPLICABLE, result
        assert "Redis URI" not in result.message, result.message
    atomic = report.case("commit_turn.atomic_on_server_error")
    assert "backend 'postgres' keeps its sessions elsewhere: cannot plant a key" in atomic.message
    # the engine's own postgres adapter has no health-details seam: the durability case
    # looks for the server's Redis INFO, and says why there is none
    from backends.memory import MemoryBackendAdapter

    class EngineLikePostgres(MemoryBackendAdapter):
        name = "postgres"
        is_persistent = True

    report = run_conformance(EngineLikePostgres, only="durability.server_is_durable",
                             options=ConformanceOptions(redis_url=redis_url))
    (durable,) = report.cases
    assert durable.status == Status.NOT_APPLICABLE, durable
    assert "Redis URI" not in durable.message
    assert "backend 'postgres' keeps its sessions elsewhere" in durable.message


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


def test_an_unconfigured_adapter_takes_its_dimensions_from_the_store(pgvector_url, monkeypatch):
    """Issue 15.4: a store provisioned at vector(8) certifies without telling the suite 8."""
    from backends.pgvector import PgVectorAdapter

    monkeypatch.delenv("SEMVEC_PGVECTOR_DIMENSIONS", raising=False)
    PgVectorAdapter(pgvector_url, dimensions=8).ensure_schema()
    unconfigured = PgVectorAdapter(pgvector_url)
    try:
        assert unconfigured.dimensions == 8
    finally:
        unconfigured.close()
    report = run_conformance(lambda: PgVectorAdapter(pgvector_url), selected_name="pgvector",
                             options=ConformanceOptions(), only=("retrieval",))
    assert report.level == Level.FULL, [f"{r.case_id}: {r.message}" for r in report.cases
                                        if r.status != Status.PASSED]
