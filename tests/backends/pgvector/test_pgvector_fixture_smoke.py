"""The PostgreSQL fixture hands out an isolated database with pgvector available."""

import pytest

pytestmark = pytest.mark.postgres


def test_each_test_gets_its_own_database_with_the_vector_extension(pgvector_url):
    import psycopg

    with psycopg.connect(pgvector_url) as conn:
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname='vector'").fetchone()
        assert version is not None
        conn.execute("CREATE TABLE marker (id int)")
