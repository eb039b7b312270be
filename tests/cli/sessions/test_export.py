"""``semvecctl sessions export|import`` and ``config view`` on the command line.

Targets are a real redis-server (the suite's fixture) or a pre-filled memory store loaded
with ``--adapter tests.support.transfer_doubles:...``. Every refusal is checked for its exit code,
a one-line message, and an unchanged target.
"""

from __future__ import annotations

import base64
import gzip
import json

import pytest
from typer.testing import CliRunner

from backends.archive.format import canonical, sha256_hex
from backends.memory import MemoryBackendAdapter
from semvecctl.app import app
from tests.support import transfer_doubles

runner = CliRunner()


def invoke(*args: str, **kwargs):
    return runner.invoke(app, list(args), **kwargs)


def error_line(result) -> str:
    lines = [l for l in result.stderr.splitlines() if l.startswith("error: ")]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture
def source():
    """A memory store with 6 sessions, loaded by the CLI through --adapter."""
    adapter = MemoryBackendAdapter()
    store = adapter.state_store()
    for i in range(6):
        sid = f"s{i}"
        store.save(sid, bytes([i]) * 300 + b"tail", expected_version=None,
                   owner_subject="acme" if i % 2 else None)
        store.save(sid, bytes([i]) * 300, expected_version=1, owner_subject="acme" if i % 2 else None,
                   pending_message="confirm?" if i == 3 else None)
    transfer_doubles.MEMORY["current"] = adapter
    return adapter


SRC = ("--adapter", "tests.support.transfer_doubles:memory_shared")


@pytest.fixture
def archive(source, tmp_path):
    path = tmp_path / "backup.jsonl"
    result = invoke("sessions", "export", *SRC, "--out", str(path))
    assert result.exit_code == 0, result.output
    return path


def redis_snapshot(url: str) -> dict:
    import redis as redis_py

    client = redis_py.Redis.from_url(url)
    try:
        return {k: client.hgetall(k) for k in client.scan_iter("*")}
    finally:
        client.close()


@pytest.fixture
def target(redis_url):
    """A Redis target holding one unrelated session, so 'unchanged' means something."""
    from backends.redis import RedisBackendAdapter

    with RedisBackendAdapter(redis_url) as adapter:
        adapter.state_store().save("pre-existing", b"keep me", expected_version=None)
    return redis_url


# -- export --------------------------------------------------------------------------------


def test_export_writes_private_verified_archive(archive, source):
    assert archive.stat().st_mode & 0o777 == 0o600
    records = [json.loads(l) for l in archive.read_text().splitlines()]
    assert records[0]["source_backend"] == "memory" and records[-1]["count"] == 6
    assert [r["session_id"] for r in records[1:-1]] == [f"s{i}" for i in range(6)]
    assert base64.b64decode(records[1]["blob"]) == bytes([0]) * 300
    assert [p.name for p in archive.parent.iterdir()] == ["backup.jsonl"]


def test_export_filters_by_owner_and_glob(source, tmp_path):
    path = tmp_path / "a.jsonl.gz"
    result = invoke("sessions", "export", *SRC, "--owner", "acme", "--match", "s[0-3]", "--out", str(path))
    assert result.exit_code == 0, result.output
    records = [json.loads(l) for l in gzip.decompress(path.read_bytes()).splitlines()]
    assert [r["session_id"] for r in records[1:-1]] == ["s1", "s3"]
    assert records[0]["filters"] == {"owner_subject": "acme", "match": "s[0-3]"}
    assert "exported 2 session(s)" in result.stderr


def test_export_to_stdout_and_import_from_stdin(source, target):
    exported = invoke("sessions", "export", *SRC, "--out", "-")
    assert exported.exit_code == 0, exported.output
    assert exported.stdout.splitlines()[-1].startswith('{"count":6')
    result = invoke("sessions", "import", "-", "--uri", target, "--apply", "--yes", input=exported.stdout)
    assert result.exit_code == 0, result.output
    assert "wrote 6 session(s)" in result.stderr


def test_export_redacts_the_source_uri_in_the_header(redis_server, tmp_path):
    url = redis_server.url.replace("redis://", "redis://default:topsecret@")
    with redis_server.client() as c:
        c.config_set("requirepass", "topsecret")
    try:
        path = tmp_path / "a.jsonl"
        result = invoke("sessions", "export", "--uri", url, "--out", str(path))
        assert result.exit_code == 0, result.output
        assert "topsecret" not in path.read_text() and "topsecret" not in result.output
        assert json.loads(path.read_text().splitlines()[0])["source_uri"].startswith("redis://default:***@")
    finally:
        with redis_server.client(password="topsecret") as c:
            c.config_set("requirepass", "")


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), RuntimeError("connection dropped")],
                         ids=["ctrl-c", "error"])
def test_interrupted_export_leaves_no_partial_file(source, tmp_path, exc):
    transfer_doubles.INTERRUPT.update(after=3, exc=exc)
    path = tmp_path / "backup.jsonl.gz"
    result = invoke("sessions", "export", "--adapter", "tests.support.transfer_doubles:interrupting_shared",
                    "--out", str(path))
    assert result.exit_code != 0
    assert list(tmp_path.iterdir()) == []


def test_interrupted_export_keeps_the_previous_archive(archive):
    before = archive.read_bytes()
    transfer_doubles.INTERRUPT.update(after=2, exc=KeyboardInterrupt())
    result = invoke("sessions", "export", "--adapter", "tests.support.transfer_doubles:interrupting_shared",
                    "--out", str(archive), "--overwrite")
    assert result.exit_code != 0
    assert archive.read_bytes() == before
    assert [p.name for p in archive.parent.iterdir()] == ["backup.jsonl"]


def test_export_refuses_to_overwrite_without_overwrite_even_with_yes(archive):
    """#23 Build 1: a confirmation flag never replaces an archive; --overwrite does."""
    before = archive.read_bytes()
    for extra in ((), ("--yes",)):
        result = invoke("sessions", "export", *SRC, "--out", str(archive), *extra)
        assert result.exit_code == 2 and "--overwrite" in error_line(result)
        assert "already exists" in error_line(result) and archive.read_bytes() == before
    replaced = invoke("sessions", "export", *SRC, "--match", "s1", "--out", str(archive), "--overwrite")
    assert replaced.exit_code == 0, replaced.output
    assert archive.read_bytes() != before and "exported 1 session(s)" in replaced.stderr


def test_sessions_enumerated_twice_are_written_once(source, tmp_path, monkeypatch):
    from backends.transfer import export_to_path

    repeating = transfer_doubles.Repeating(source, {"s1", "s4"})
    path = tmp_path / "a.jsonl"
    result = export_to_path(repeating, path, source_uri="memory://")
    assert result.count == 6 and result.duplicates_dropped == 2
    ids = [json.loads(l).get("session_id") for l in path.read_text().splitlines()[1:-1]]
    assert sorted(ids) == [f"s{i}" for i in range(6)]
    verify = invoke("sessions", "import", str(path), *SRC)
    assert verify.exit_code == 1  # all exist in the source store itself: conflicts, but readable
    assert "archive verified: 6 session(s)" in verify.stderr


def test_export_with_items_from_a_store_without_items_is_a_lossy_transfer(source, tmp_path):
    """#15.9: the same rule (exit 1, --allow-loss) as import and copy."""
    path = tmp_path / "a.jsonl"
    result = invoke("sessions", "export", *SRC, "--with-items", "--out", str(path))
    assert result.exit_code == 1 and "no item mirror" in error_line(result)
    assert "--allow-loss" in error_line(result)
    assert list(tmp_path.iterdir()) == []
    accepted = invoke("sessions", "export", *SRC, "--with-items", "--allow-loss", "--out", str(path))
    assert accepted.exit_code == 0, accepted.output
    assert "accepted loss: the items (backend 'memory' has no item mirror" in accepted.stderr
    assert json.loads(path.read_text().splitlines()[0])["with_items"] is False


# -- import: preview, apply, conflicts ---------------------------------------------------------


def test_import_previews_by_default_and_writes_nothing(archive, target):
    before = redis_snapshot(target)
    result = invoke("sessions", "import", str(archive), "--uri", target, "-o", "jsonl")
    assert result.exit_code == 0, result.output
    rows = [json.loads(l) for l in result.stdout.splitlines()]
    assert [r["action"] for r in rows] == ["create"] * 6
    assert rows[0]["detail"] == "at version 2"
    assert "nothing was written" in result.stderr
    assert redis_snapshot(target) == before


def test_import_apply_preserves_versions_and_reads_back(archive, target, source):
    from backends.redis import RedisBackendAdapter

    result = invoke("sessions", "import", str(archive), "--uri", target, "--apply", "--yes", "--keep-versions",
                    "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["created"] == 6 and doc["versions_preserved"] and doc["verified"]["matched"] == 6
    with RedisBackendAdapter(target) as redis:
        for i in range(6):
            assert redis.state_store().load_full(f"s{i}") == source.state_store().load_full(f"s{i}")


def test_conflicts_refuse_before_any_write_and_skip_leaves_them(archive, target):
    from backends.redis import RedisBackendAdapter

    with RedisBackendAdapter(target) as redis:
        redis.state_store().save("s4", b"newer data on the target", expected_version=None)
    before = redis_snapshot(target)
    preview = invoke("sessions", "import", str(archive), "--uri", target)
    assert preview.exit_code == 1 and "'s4'" in error_line(preview)
    refused = invoke("sessions", "import", str(archive), "--uri", target, "--apply", "--yes")
    assert refused.exit_code == 1
    assert "nothing was written" in error_line(refused)
    assert redis_snapshot(target) == before
    skipped = invoke("sessions", "import", str(archive), "--uri", target, "--apply", "--yes",
                     "--on-conflict", "skip")
    assert skipped.exit_code == 0, skipped.output
    assert "wrote 5 session(s)" in skipped.stderr and "1 skipped" in skipped.stderr
    with RedisBackendAdapter(target) as redis:
        assert redis.state_store().load("s4")[0] == b"newer data on the target"


def test_target_without_restore_imports_at_version_1_and_says_so(archive):
    transfer_doubles.MEMORY["current"] = MemoryBackendAdapter()
    refused = invoke("sessions", "import", str(archive), "--adapter",
                     "tests.support.transfer_doubles:norestore_shared", "--apply", "--yes", "--keep-versions")
    assert refused.exit_code == 3 and "--keep-versions" in error_line(refused)
    assert list(transfer_doubles.MEMORY["current"].iter_sessions()) == []
    result = invoke("sessions", "import", str(archive), "--adapter",
                    "tests.support.transfer_doubles:norestore_shared", "--apply", "--yes")
    assert result.exit_code == 0, result.output
    assert "cannot restore versions" in result.stderr and "created at version 1" in result.stderr
    assert {s.version for s in transfer_doubles.MEMORY["current"].iter_sessions()} == {1}


def test_missing_archive_is_a_usage_error(target, tmp_path):
    result = invoke("sessions", "import", str(tmp_path / "nope.jsonl"), "--uri", target)
    assert result.exit_code == 2 and "no such archive file" in error_line(result)


# -- import: damaged and unsupported archives write nothing -------------------------------------


def _lines(path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])


def _reorder(path):
    ls = _lines(path)
    ls[2], ls[3] = ls[3], ls[2]
    path.write_bytes(b"".join(ls))


def _tamper_blob(path):
    ls = _lines(path)
    record = json.loads(ls[4])
    blob = bytearray(base64.b64decode(record["blob"]))
    blob[7] ^= 0x40
    record["blob"] = base64.b64encode(bytes(blob)).decode()
    body = {k: v for k, v in record.items() if k != "line_sha256"}
    record["line_sha256"] = sha256_hex(canonical(body))  # even re-signed, the blob sha fails
    ls[4] = canonical(record) + b"\n"
    path.write_bytes(b"".join(ls))


def _wrong_version(path):
    ls = _lines(path)
    header = json.loads(ls[0])
    header["format_version"] = 7
    ls[0] = canonical(header) + b"\n"
    path.write_bytes(b"".join(ls))


def _wrong_format(path):
    ls = _lines(path)
    header = json.loads(ls[0])
    header["format"] = "redis-rdb-dump"
    ls[0] = canonical(header) + b"\n"
    path.write_bytes(b"".join(ls))


def _duplicate(path):
    ls = _lines(path)
    # a well-formed archive (fresh checksums, chain, trailer) that holds s2 twice
    from backends.archive import ArchiveReader, ArchiveWriter

    with ArchiveReader(path) as reader:
        recs = list(reader.sessions())
        header = reader.header
    with open(path, "wb") as out:
        writer = ArchiveWriter(out, header)
        for r in recs + [recs[2]]:
            writer.add(r)
        writer.finish()
    assert len(ls) == 8


DAMAGE = {
    "truncated": (_truncate, 1, "truncated"),
    "reordered": (_reorder, 1, "reordered"),
    "tampered": (_tamper_blob, 1, "does not match its sha256"),
    "duplicated": (_duplicate, 1, "appears more than once"),
    "wrong-version": (_wrong_version, 3, "upgrade semvecctl"),
    "wrong-format": (_wrong_format, 3, "unsupported archive format"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_damaged_archive_is_refused_and_writes_nothing(source, target, tmp_path, damage, gz):
    plain = tmp_path / "a.jsonl"
    assert invoke("sessions", "export", *SRC, "--out", str(plain)).exit_code == 0
    mutate, code, words = DAMAGE[damage]
    mutate(plain)
    path = plain
    if gz:
        path = tmp_path / "a.jsonl.gz"
        path.write_bytes(gzip.compress(plain.read_bytes()))
    before = redis_snapshot(target)
    for extra in ([], ["--on-conflict", "skip"]):
        result = invoke("sessions", "import", str(path), "--uri", target, "--apply", "--yes", *extra)
        assert result.exit_code == code, result.output
        assert words in error_line(result)
        assert redis_snapshot(target) == before


def test_truncated_gzip_stream_is_refused(archive, target, tmp_path):
    path = tmp_path / "cut.jsonl.gz"
    data = gzip.compress(archive.read_bytes())
    path.write_bytes(data[: len(data) - 40])
    before = redis_snapshot(target)
    result = invoke("sessions", "import", str(path), "--uri", target, "--apply", "--yes")
    assert result.exit_code == 1 and "archive check failed" in error_line(result)
    assert redis_snapshot(target) == before


# -- config view -------------------------------------------------------------------------------


CONFIG = """\
current-profile: staging
profiles:
  staging:
    uri: redis://:s3cretpw@cache.internal:6379/0
    options: {ttl_seconds: 86400, api_token: tok-123}
  atlas:
    uri: mongodb+srv://user:pa55word@cluster0.example.net/
    database: semvec
"""


@pytest.fixture
def config_file(tmp_path, monkeypatch):
    for var in ("SEMVECCTL_PROFILE", "SEMVECCTL_CONFIG", "SEMVEC_SESSION_BACKEND", "REDIS_URL",
                "MONGODB_URI", "SEMVEC_PGVECTOR_URL", "SEMVEC_MONGO_DB"):
        monkeypatch.delenv(var, raising=False)
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG)
    return path


def test_config_view_shows_selection_and_redacts_secrets(config_file):
    result = invoke("--config", str(config_file), "config", "view", "-o", "json")
    assert result.exit_code == 0, result.output
    for secret in ("s3cretpw", "pa55word", "tok-123"):
        assert secret not in result.output
    doc = json.loads(result.stdout)
    assert doc["config_file"] == str(config_file) and doc["config_file_from"] == "--config flag"
    assert doc["profile"] == "staging" and doc["profile_from"] == "current-profile in the config file"
    assert doc["connection"] == {"backend": "redis", "uri": "redis://:***@cache.internal:6379/0",
                                 "from": "profile staging", "adapter_factory": None,
                                 "options": {"ttl_seconds": 86400, "api_token": "***"}}
    assert [p["name"] for p in doc["profiles"]] == ["staging", "atlas"]


def test_config_view_profile_flag_env_and_flags_precedence(config_file, monkeypatch):
    result = invoke("config", "view", "-P", "atlas", "--config", str(config_file), "-o", "json")
    doc = json.loads(result.stdout)
    assert doc["profile"] == "atlas" and doc["profile_from"] == "--profile flag"
    assert doc["connection"]["backend"] == "mongo"
    assert doc["connection"]["options"] == {"database": "semvec"}
    monkeypatch.setenv("SEMVECCTL_PROFILE", "atlas")
    monkeypatch.setenv("REDIS_URL", "redis://:envsecret@env-host:6379/0")
    result = invoke("--config", str(config_file), "config", "view", "--backend", "redis", "-o", "json")
    doc = json.loads(result.stdout)
    assert doc["profile_from"] == "$SEMVECCTL_PROFILE"
    assert doc["connection"]["uri"] == "redis://:***@env-host:6379/0" and doc["connection"]["from"] == "flag"
    assert doc["environment"]["REDIS_URL"] == "redis://:***@env-host:6379/0"
    assert "envsecret" not in result.output


def test_config_view_table_and_missing_file(config_file, tmp_path, monkeypatch):
    table = invoke("--config", str(config_file), "config", "view")
    assert table.exit_code == 0 and "* staging" in table.stdout and "s3cretpw" not in table.stdout
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "nowhere"))
    empty = invoke("config", "view", "-o", "json")
    doc = json.loads(empty.stdout)
    assert doc["config_file_exists"] is False and doc["profile"] is None
    assert doc["connection"]["backend"] == "memory"
    unknown = invoke("--config", str(config_file), "config", "view", "-P", "nope")
    assert unknown.exit_code == 3 and "profile 'nope' not found" in error_line(unknown)
