"""``sessions export --skip-damaged``, previews that run every check ``--apply`` runs,
``--overwrite`` for existing archives, and the archive-version advice (#23).

Real redis-server and PostgreSQL+pgvector from the suite's fixtures; damaged rows are
made by hand on the server, the way an operator meets them.
"""

from __future__ import annotations

import json
import uuid

import pytest
from typer.testing import CliRunner

from backends.archive import ArchiveReader
from backends.memory import MemoryBackendAdapter
from semvecctl.app import app
from tests.support import transfer_doubles

runner = CliRunner()
DIMS = 8


def invoke(*args: str):
    return runner.invoke(app, list(args))


def error_lines(result) -> list[str]:
    return [l for l in result.stderr.splitlines() if l.startswith("error: ")]


def sessions_in(path) -> list[str]:
    with ArchiveReader(path) as reader:
        return [r.session_id for r in reader.sessions()]


@pytest.fixture
def redis(redis_url):
    from backends.redis import RedisBackendAdapter

    adapter = RedisBackendAdapter(redis_url)
    yield adapter
    adapter.close()


def seed(adapter, tag: str, n: int = 5) -> list[str]:
    ids = [f"{tag}-{i}" for i in range(n)]
    for sid in ids:
        adapter.state_store().save(sid, sid.encode(), expected_version=None, owner_subject="acme")
    return ids


def break_redis_row(url: str, session_id: str) -> None:
    import redis as redis_py

    client = redis_py.Redis.from_url(url)
    try:
        client.hdel(f"semvec:state:{session_id}", "version")
    finally:
        client.close()


def break_sql_row(url: str, session_id: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE semvec_session_state SET version = 0 WHERE session_id = %s",
                     (session_id,))


# -- 3. export --skip-damaged ------------------------------------------------------------------


def test_one_damaged_row_fails_the_export_naming_it_and_leaves_no_file(redis, redis_url, tmp_path):
    tag = uuid.uuid4().hex[:8]
    ids = seed(redis, tag)
    break_redis_row(redis_url, ids[2])
    path = tmp_path / "backup.jsonl"
    result = invoke("sessions", "export", "--uri", redis_url, "--out", str(path))
    assert result.exit_code == 1, result.output
    (line,) = error_lines(result)
    assert repr(ids[2]) in line and "'version'" in line and "--skip-damaged" in line
    assert "unexpected" not in result.stderr and "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("store", ["redis", "pgvector"])
def test_skip_damaged_writes_the_rest_and_lists_what_it_left(request, store, tmp_path):
    if store == "redis":
        adapter, url = request.getfixturevalue("redis"), request.getfixturevalue("redis_url")
        breaker = break_redis_row
    else:
        url = request.getfixturevalue("pgvector_url")
        adapter = request.getfixturevalue("pgvector_adapter_factory")(dimensions=DIMS)
        breaker = break_sql_row
    tag = uuid.uuid4().hex[:8]
    ids = seed(adapter, tag)
    breaker(url, ids[1])
    breaker(url, ids[3])
    path = tmp_path / "backup.jsonl.gz"
    result = invoke("sessions", "export", "--uri", url, "--out", str(path), "--skip-damaged")
    assert result.exit_code == 1, result.output
    lines = error_lines(result)
    assert len(lines) == 3, result.stderr
    assert any(f"left out damaged session {ids[1]!r}" in l and "version" in l for l in lines)
    assert any(f"left out damaged session {ids[3]!r}" in l for l in lines)
    assert "2 damaged session(s) left out" in lines[-1] and "exported 3 other session(s)" in lines[-1]
    assert sorted(sessions_in(path)) == sorted([ids[0], ids[2], ids[4]])
    # a clean store exports with exit 0 under the same flag
    for sid in (ids[1], ids[3]):
        adapter.state_store().delete(sid)
    again = invoke("sessions", "export", "--uri", url, "--out", str(path), "--skip-damaged",
                   "--overwrite")
    assert again.exit_code == 0, again.output
    assert sorted(sessions_in(path)) == sorted([ids[0], ids[2], ids[4]])


# -- 4. the preview runs every check --apply runs --------------------------------------------


@pytest.fixture
def long_id_archive(tmp_path):
    adapter = MemoryBackendAdapter()
    store = adapter.state_store()
    store.save("fine", b"ok", expected_version=None)
    store.save("x" * 129, b"too long for the engine's column", expected_version=None)
    transfer_doubles.MEMORY["current"] = adapter
    path = tmp_path / "long.jsonl"
    result = invoke("sessions", "export", "--adapter", "tests.support.transfer_doubles:memory_shared",
                    "--out", str(path))
    assert result.exit_code == 0, result.output
    return path


@pytest.mark.parametrize("extra", [(), ("--apply", "--yes"), ("--apply", "--yes", "--on-conflict", "skip"),
                                   ("-o", "json")])
def test_preview_and_apply_refuse_a_session_id_the_target_cannot_store(long_id_archive, pgvector_url,
                                                                       pgvector_adapter_factory,
                                                                       monkeypatch, extra):
    monkeypatch.setenv("SEMVEC_PGVECTOR_DIMENSIONS", str(DIMS))
    target = pgvector_adapter_factory(dimensions=DIMS)
    result = invoke("sessions", "import", str(long_id_archive), "--uri", pgvector_url, *extra)
    assert result.exit_code == 1, result.output
    (line,) = error_lines(result)
    assert "archive line 3" in line and "(129 characters)" in line and "'xxxxxxxx" in line
    assert "longer than 128 characters" in line and "nothing was written" in line
    assert "unexpected" not in result.stderr and result.stdout == ""
    assert list(target.iter_sessions()) == []


def test_the_same_archive_imports_into_a_target_without_that_limit(long_id_archive, redis_url, redis):
    result = invoke("sessions", "import", str(long_id_archive), "--uri", redis_url, "--apply", "--yes")
    assert result.exit_code == 0, result.output
    assert len(list(redis.iter_sessions())) == 2


# -- 6. --overwrite, never --yes, replaces an archive ------------------------------------------


def test_events_export_never_overwrites_without_overwrite(redis, redis_url, tmp_path):
    from datetime import datetime, timezone

    from backends.contract import MemoryEvent

    user = f"u-{uuid.uuid4().hex[:8]}"
    redis.event_store().append(MemoryEvent(
        event_id=str(uuid.uuid4()), user_id=user, content="hi",
        created_at=datetime(2026, 11, 1, tzinfo=timezone.utc), embedding=(0.1, 0.2),
        meta={}, owner_subject="", session_id="s"))
    path = tmp_path / "u.jsonl"
    path.write_bytes(b"an earlier archive\n")
    for extra in ((), ("--yes",)):
        result = invoke("events", "export", "--uri", redis_url, "--user", user, "--out", str(path), *extra)
        assert result.exit_code == 2, result.output
        (line,) = error_lines(result)
        assert "already exists" in line and "--overwrite" in line
        assert path.read_bytes() == b"an earlier archive\n"
    replaced = invoke("events", "export", "--uri", redis_url, "--user", user, "--out", str(path),
                      "--overwrite")
    assert replaced.exit_code == 0, replaced.output
    with ArchiveReader(path) as reader:
        assert reader.header.with_events is True
        (record,) = list(reader.records())
    assert record.user_id == user and len(record.events) == 1


# -- 5. the archive-version advice says what is true --------------------------------------------


def test_newer_archive_version_advice_does_not_name_pypi(long_id_archive, redis_url):
    from backends.archive.format import canonical

    lines = long_id_archive.read_bytes().splitlines(keepends=True)
    header = json.loads(lines[0])
    header["format_version"] = 99
    long_id_archive.write_bytes(canonical(header) + b"\n" + b"".join(lines[1:]))
    result = invoke("sessions", "import", str(long_id_archive), "--uri", redis_url)
    assert result.exit_code == 3, result.output
    (line,) = error_lines(result)
    assert "pip install -U" not in line and "not on PyPI" in line
    assert "source checkout" in line and "upgrade semvecctl" in line


def test_a_write_rule_the_checks_do_not_know_is_still_named_not_unexpected(long_id_archive):
    """A target whose write refuses a value for a reason of its own (a plain ValueError):
    the import stops naming the session and how far it got, as a refusal (exit 1)."""
    from backends.transfer import ArchiveFile, SessionImporter, UnimportableRecord
    from semvecctl.errors import classify

    class Picky(MemoryBackendAdapter):
        def restore_session(self, session_id, blob, **kwargs):
            if session_id.startswith("x"):
                raise ValueError("this store refuses ids starting with x")
            return super().restore_session(session_id, blob, **kwargs)

    target = Picky()
    with pytest.raises(UnimportableRecord) as caught:
        SessionImporter(target, ArchiveFile(long_id_archive), on_conflict="skip").apply()
    message = str(caught.value)
    assert "refuses ids starting with x" in message and "1 session(s) were written before it" in message
    code, text = classify(caught.value)
    assert int(code) == 1 and "unexpected" not in text
