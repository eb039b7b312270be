"""age-encrypted archives (``--encrypt-to`` / ``--identity``) on the command line.

The source is a memory store loaded through ``--adapter``; the target is the suite's
real Redis. Every refusal is checked for its exit code, one error line, and a target
left exactly as it was (0 writes).
"""

from __future__ import annotations

import base64
import builtins
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from backends.memory import MemoryBackendAdapter
from semvecctl.app import app
from tests.support import transfer_doubles

pyrage = pytest.importorskip("pyrage")

runner = CliRunner()
SRC = ("--adapter", "tests.support.transfer_doubles:memory_shared")
#: content of one session, looked for in the ciphertext
MARKER = b"known-session-content-7f3a"
#: 300 sessions of 1 KiB: over 128 KiB of plaintext, so the payload has 3+ age chunks
SESSIONS = 300


def invoke(*args: str, **kwargs):
    return runner.invoke(app, list(args), **kwargs)


def error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    return lines[0]


@pytest.fixture
def source():
    adapter = MemoryBackendAdapter()
    store = adapter.state_store()
    for i in range(SESSIONS):
        blob = MARKER + os.urandom(500).hex().encode()[: 1000 - len(MARKER)]
        store.save(f"s{i:04d}", blob, expected_version=None,
                   owner_subject="acme" if i % 2 else None)
    transfer_doubles.MEMORY["current"] = adapter
    return adapter


@pytest.fixture
def keys(tmp_path):
    """Two X25519 identities in files, and their recipients."""
    found = []
    for name in ("alice", "bob"):
        identity = pyrage.x25519.Identity.generate()
        path = tmp_path / f"{name}.key"
        path.write_text(f"# {name}\n{identity}\n")
        path.chmod(0o600)  # as age-keygen -o writes it: a secret key is its owner's only
        found.append((path, str(identity.to_public())))
    return found


def redis_snapshot(url: str) -> dict:
    import redis as redis_py

    client = redis_py.Redis.from_url(url)
    try:
        return {k: client.dump(k) for k in sorted(client.scan_iter("*"))}
    finally:
        client.close()


def flush(url: str) -> None:
    import redis as redis_py

    client = redis_py.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()


def export(path, *extra: str):
    result = invoke("sessions", "export", *SRC, "--out", str(path), *extra)
    assert result.exit_code == 0, result.output
    return result


def import_(path, url, *extra: str):
    return invoke("sessions", "import", str(path), "--uri", url, "--apply", "--yes", *extra)


@pytest.fixture
def encrypted(source, keys, tmp_path):
    path = tmp_path / "backup.jsonl.gz.age"
    export(path, "--encrypt-to", keys[0][1])
    return path


def test_round_trip_gives_the_store_a_plain_round_trip_gives(source, keys, tmp_path, redis_url):
    plain = tmp_path / "plain.jsonl.gz"
    export(plain)
    flush(redis_url)
    assert import_(plain, redis_url).exit_code == 0
    expected = redis_snapshot(redis_url)
    sealed = tmp_path / "sealed.jsonl.gz.age"
    export(sealed, "--encrypt-to", keys[0][1])
    assert sealed.read_bytes().startswith(b"age-encryption.org/v1\n")
    flush(redis_url)
    result = import_(sealed, redis_url, "--identity", str(keys[0][0]))
    assert result.exit_code == 0, result.output
    assert redis_snapshot(redis_url) == expected
    assert len(expected) >= SESSIONS


def test_no_plaintext_in_the_encrypted_file(encrypted, tmp_path):
    fragment = base64.b64encode(MARKER[:24])  # how each blob starts in the archive
    data = encrypted.read_bytes()
    assert fragment not in data and b"s0001" not in data and b"acme" not in data
    plain = tmp_path / "plain.jsonl"
    export(plain)
    assert fragment in plain.read_bytes() and b"s0001" in plain.read_bytes()


def test_each_recipient_decrypts(source, keys, tmp_path, redis_url):
    path = tmp_path / "two.jsonl.age"
    recipients_file = tmp_path / "recipients.txt"
    recipients_file.write_text(f"# bob\n\n{keys[1][1]}\n")
    export(path, "--encrypt-to", keys[0][1], "--encrypt-to-file", str(recipients_file))
    for identity, _ in keys:
        flush(redis_url)
        result = import_(path, redis_url, "--identity", str(identity))
        assert result.exit_code == 0, result.output
        assert len(redis_snapshot(redis_url)) >= SESSIONS


def _damaged(encrypted, how: str) -> bytes:
    data = bytearray(encrypted.read_bytes())
    body = data.index(b"\n---") + 1 + data[data.index(b"\n---") + 1:].index(b"\n") + 1
    if how == "truncated":
        return bytes(data[:-200])
    if how == "bit":
        data[body + 70_000] ^= 0x01
        return bytes(data)
    # swap the first two 64 KiB payload chunks (each 64 KiB + a 16-byte tag; 16-byte nonce first)
    start, size = body + 16, 65536 + 16
    first, second = data[start:start + size], data[start + size:start + 2 * size]
    return bytes(data[:start] + second + first + data[start + 2 * size:])


@pytest.mark.parametrize("how", ["truncated", "bit", "swapped"])
def test_damaged_ciphertext_is_refused_with_no_write(encrypted, keys, tmp_path, redis_url, how):
    assert os.path.getsize(encrypted) > 2 * 65536 + 200 or how == "truncated"
    path = tmp_path / f"{how}.age"
    path.write_bytes(_damaged(encrypted, how))
    before = redis_snapshot(redis_url)
    result = import_(path, redis_url, "--identity", str(keys[0][0]))
    assert result.exit_code == 1, result.output
    assert "encrypted archive is damaged" in error_line(result)
    assert redis_snapshot(redis_url) == before


def test_wrong_identity_is_refused_with_no_write(encrypted, keys, redis_url):
    before = redis_snapshot(redis_url)
    result = import_(encrypted, redis_url, "--identity", str(keys[1][0]))
    assert result.exit_code == 1, result.output
    assert "no --identity matches" in error_line(result)
    assert redis_snapshot(redis_url) == before


def test_missing_identity_is_a_usage_error(encrypted, redis_url):
    before = redis_snapshot(redis_url)
    result = import_(encrypted, redis_url)
    assert result.exit_code == 2, result.output
    assert "--identity" in error_line(result)
    assert redis_snapshot(redis_url) == before


def test_bad_recipient_is_a_usage_error_naming_it(source, tmp_path):
    path = tmp_path / "x.jsonl.age"
    result = invoke("sessions", "export", *SRC, "--out", str(path), "--encrypt-to", "age1nonsense")
    assert result.exit_code == 2, result.output
    assert "age1nonsense" in error_line(result)
    assert not path.exists() and not list(tmp_path.iterdir())


def test_unencrypted_export_of_owned_sessions_hints_once(source, tmp_path, keys):
    result = export(tmp_path / "plain.jsonl")
    assert result.stderr.count("--encrypt-to") == 1
    result = export(tmp_path / "sealed.jsonl.age", "--encrypt-to", keys[0][1])
    assert "--encrypt-to" not in result.stderr


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen is not on PATH")
def test_ssh_ed25519_recipient_and_openssh_identity(source, tmp_path, redis_url):
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    public = (tmp_path / "id_ed25519.pub").read_text().strip()
    path = tmp_path / "ssh.jsonl.gz.age"
    export(path, "--encrypt-to", public)
    flush(redis_url)
    result = import_(path, redis_url, "--identity", str(key))
    assert result.exit_code == 0, result.output
    assert len(redis_snapshot(redis_url)) >= SESSIONS


def test_without_pyrage_exit_3_naming_the_extra(source, tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_pyrage(name, *args, **kwargs):
        if name == "pyrage" or name.startswith("pyrage."):
            raise ImportError("No module named 'pyrage'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyrage)
    result = invoke("sessions", "export", *SRC, "--out", str(tmp_path / "x.age"),
                    "--encrypt-to", "age1whatever")
    assert result.exit_code == 3, result.output
    assert "pip install 'semvecctl[age]'" in error_line(result)
    assert not list(tmp_path.iterdir())


@pytest.mark.redis
def test_events_export_encrypts_and_import_decrypts(request, keys, tmp_path):
    from backends.archive import ArchiveReader, UserRecord
    from backends.archive.encryption import load_identities
    from tests.support.maintenance import make_target, seed

    target = make_target(request, "redis")
    s = seed(target.adapter)
    path = tmp_path / "alice.jsonl.gz.age"
    result = runner.invoke(app, ["events", "export", "--user", s.alice, "--out", str(path),
                                 "--encrypt-to", keys[0][1], *target.args], env=target.env)
    assert result.exit_code == 0, result.output
    assert path.read_bytes().startswith(b"age-encryption.org/v1\n")
    assert s.alice.encode() not in path.read_bytes()
    piped = runner.invoke(app, ["events", "export", "--user", s.alice, "--out", "-",
                                "--encrypt-to", keys[0][1], *target.args], env=target.env)
    assert piped.exit_code == 0, piped.stderr
    assert piped.stdout_bytes.startswith(b"age-encryption.org/v1\n")
    assert s.alice.encode() not in piped.stdout_bytes
    with ArchiveReader(path, identities=load_identities([keys[0][0]])) as reader:
        records = list(reader.records())
    assert isinstance(records[0], UserRecord)
    assert sorted(e.event_id for e in records[0].events) == sorted(s.alice_ids)
    target.adapter.event_store().purge_user(s.alice)
    imported = runner.invoke(app, ["sessions", "import", str(path), "--apply", "--yes",
                                   "--allow-loss", "--identity", str(keys[0][0]), *target.args],
                             env=target.env)
    assert imported.exit_code == 0, imported.output


@pytest.mark.redis
def test_prune_archive_is_encrypted_and_holds_what_was_deleted(request, keys, tmp_path, redis_url):
    from backends.redis import RedisBackendAdapter

    with RedisBackendAdapter(redis_url) as adapter:
        store = adapter.state_store()
        for i in range(3):
            store.save(f"idle-{i}", MARKER + b"-%d" % i, expected_version=None,
                       owner_subject="acme")
    import redis as redis_py

    client = redis_py.Redis.from_url(redis_url)
    try:
        keys_before = sorted(client.scan_iter("semvec:state:idle-*"))
        for key in keys_before:  # no idle TTL: the write time is read from --assume-ttl
            client.expire(key, 400_000 - 2 * 86400)
    finally:
        client.close()
    path = tmp_path / "pruned.jsonl.age"
    result = invoke("sessions", "prune", "--idle-for", "1d", "--uri", redis_url,
                    "--assume-ttl", "400000s", "--archive", str(path), "--encrypt-to", keys[0][1],
                    "--apply", "--yes", "-o", "jsonl")
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == 3 and "deleted" in result.stdout
    assert path.read_bytes().startswith(b"age-encryption.org/v1\n")
    assert b"idle-0" not in path.read_bytes()
    back = import_(path, redis_url, "--identity", str(keys[0][0]), "--allow-loss")
    assert back.exit_code == 0, back.output
    with RedisBackendAdapter(redis_url) as adapter:
        assert adapter.state_store().load("idle-1")[0] == MARKER + b"-1"


def test_prune_encryption_without_archive_is_a_usage_error(source):
    result = invoke("sessions", "prune", "--idle-for", "1d", *SRC, "--encrypt-to", "age1x")
    assert result.exit_code == 2, result.output
    assert "--archive" in error_line(result)


def test_an_encrypted_archive_on_stdin_is_decrypted(encrypted, keys, redis_url):
    flush(redis_url)
    result = invoke("sessions", "import", "-", "--uri", redis_url, "--apply", "--yes",
                    "--identity", str(keys[0][0]), input=encrypted.read_bytes())
    assert result.exit_code == 0, result.output
    assert len(redis_snapshot(redis_url)) >= SESSIONS
    refused = invoke("sessions", "import", "-", "--uri", redis_url, input=encrypted.read_bytes())
    assert refused.exit_code == 2 and "--identity" in error_line(refused)


def test_an_interrupted_encrypted_export_leaves_no_file(source, keys, tmp_path, monkeypatch):
    """Ctrl-C half-way (the plaintext is in the pipe, the thread is encrypting): no
    file under the name, no partial file beside it, the thread ended."""
    import threading

    from backends.archive import writer as archive_writer

    real_add, calls = archive_writer.ArchiveWriter.add, []

    def add(self, record):
        calls.append(1)
        if len(calls) == 150:
            raise KeyboardInterrupt
        real_add(self, record)

    monkeypatch.setattr(archive_writer.ArchiveWriter, "add", add)
    path = tmp_path / "out" / "x.jsonl.gz.age"
    path.parent.mkdir()
    result = invoke("sessions", "export", *SRC, "--out", str(path), "--encrypt-to", keys[0][1])
    assert result.exit_code == 130, result.output
    assert list(path.parent.iterdir()) == []
    assert not [t for t in threading.enumerate() if t.name.startswith("age-")]


def test_an_encrypted_export_to_stdout_stages_ciphertext_only(source, keys, tmp_path, redis_url,
                                                              monkeypatch):
    import tempfile

    staged = []
    real = tempfile.TemporaryFile

    def watched(*args, **kwargs):
        staged.append(real(*args, **kwargs))
        return staged[-1]

    monkeypatch.setattr(tempfile, "TemporaryFile", watched)
    result = invoke("sessions", "export", *SRC, "--out", "-", "--encrypt-to", keys[0][1])
    assert result.exit_code == 0, result.stderr
    assert result.stdout_bytes.startswith(b"age-encryption.org/v1\n")
    assert staged and all(f.closed for f in staged)
    monkeypatch.undo()
    path = tmp_path / "piped.age"
    path.write_bytes(result.stdout_bytes)
    assert b"s0001" not in path.read_bytes()
    flush(redis_url)
    assert import_(path, redis_url, "--identity", str(keys[0][0])).exit_code == 0
    assert len(redis_snapshot(redis_url)) >= SESSIONS


def test_duplicates_of_an_encrypted_export_are_settled_by_reading_it_back(source, keys, tmp_path,
                                                                          monkeypatch):
    """The enumeration reports a session twice: the encrypted file is read back (with the
    throw-away key) and rewritten with it once, to the recipients alone."""
    from backends.archive import ArchiveReader
    from backends.archive.encryption import load_identities
    from backends.transfer import export as export_module
    from backends.transfer import export_to_path
    from backends.transfer.export import staged_export

    real_iter = export_module.iter_records

    def twice(*args, **kwargs):
        records = list(real_iter(*args, **kwargs))
        return iter(records + records[:1])

    monkeypatch.setattr(export_module, "iter_records", twice)
    recipient = [pyrage.x25519.Recipient.from_str(keys[0][1])]
    identities = load_identities([keys[0][0]])
    path = tmp_path / "dup.jsonl.age"
    result = export_to_path(source, path, recipients=recipient, source_uri="memory://t")
    assert result.duplicates_dropped == 1 and result.count == SESSIONS
    assert path.read_bytes().count(b"\n-> X25519 ") == 1  # the recipient alone
    with ArchiveReader(path, identities=identities) as reader:
        assert len(list(reader.sessions())) == SESSIONS
    with staged_export(source, recipients=recipient, source_uri="memory://t") as (staged, res):
        assert res.duplicates_dropped == 1
        (tmp_path / "staged.age").write_bytes(staged.read())
    with ArchiveReader(tmp_path / "staged.age", identities=identities) as reader:
        assert len(list(reader.sessions())) == SESSIONS


@pytest.mark.redis
def test_an_interrupted_encrypted_prune_continues_only_with_its_identity(request, keys, tmp_path):
    from backends.archive import ArchiveReader
    from backends.archive.encryption import load_identities
    from tests.cli.prune.test_prune import TTL
    from tests.cli.prune.test_resume import _idle_sessions, _interrupted, run
    from tests.support.maintenance import make_target

    target = make_target(request, "redis", ttl_seconds=TTL)
    names = _idle_sessions(target, 6)
    path = tmp_path / "idle.jsonl.gz.age"
    args = ("sessions", "prune", "--idle-for", "1d", "--archive", str(path), "--apply", "--yes",
            "-o", "jsonl", "--encrypt-to", keys[0][1])
    assert _interrupted(target, 2, *args).exit_code != 0
    store = target.adapter.state_store()
    left = {sid for sid in names if store.load(sid) is not None}
    assert len(left) == 4
    refused = run(target, *args)
    assert refused.exit_code == 2, refused.output
    assert "--identity" in error_line(refused)
    assert {sid for sid in names if store.load(sid) is not None} == left
    second = run(target, *args, "--identity", str(keys[0][0]))
    assert second.exit_code == 0, second.output
    assert all(store.load(sid) is None for sid in names)
    with ArchiveReader(path, identities=load_identities([keys[0][0]])) as reader:
        assert {r.session_id for r in reader.sessions()} == set(names)


def test_a_bad_identity_file_or_recipient_file_is_a_usage_error(encrypted, tmp_path, redis_url,
                                                                source):
    garbage = tmp_path / "garbage.key"
    garbage.write_text("# nothing\nnot a key\n")
    garbage.chmod(0o600)
    result = import_(encrypted, redis_url, "--identity", str(garbage))
    assert result.exit_code == 2, result.output
    assert "garbage.key" in error_line(result)
    listed = tmp_path / "recipients.txt"
    listed.write_text("# ops\nssh-ed25519 AAAAnotakey ops@host\n")
    out = tmp_path / "never.age"
    result = invoke("sessions", "export", *SRC, "--out", str(out), "--encrypt-to-file", str(listed))
    assert result.exit_code == 2, result.output
    assert "ssh-ed25519 AAAAnotakey" in error_line(result)
    assert not out.exists()


def test_a_failing_destination_is_raised_not_a_broken_pipe(keys):
    """The encrypting thread cannot write (a full disk, here a read-only stream): the
    writer sees that failure, not the pipe the thread stopped reading."""
    import io

    from backends.archive.encryption import encrypting, recipients

    class Full(io.RawIOBase):
        def writable(self):
            return True

        def write(self, _data):
            raise OSError(28, "No space left on device")

    with pytest.raises(Exception) as raised:
        with encrypting(Full(), recipients([keys[0][1]])) as sink:
            for _ in range(1000):
                sink.write(b"x" * 65536)
    assert not isinstance(raised.value, BrokenPipeError)
    assert "No space left" in str(raised.value) or "age encryption" in str(raised.value)


def test_an_empty_recipient_file_never_gives_a_plain_archive(source, tmp_path):
    listed = tmp_path / "recipients.txt"
    listed.write_text("# everyone left\n\n")
    out = tmp_path / "x.jsonl.age"
    result = invoke("sessions", "export", *SRC, "--out", str(out), "--encrypt-to-file", str(listed))
    assert result.exit_code == 2, result.output
    assert "lists no recipient" in error_line(result)
    assert not out.exists()


# -- archive verify: the same checks, offline ------------------------------------------------


def test_archive_verify_says_intact_plain_and_encrypted(source, keys, encrypted, tmp_path):
    plain = tmp_path / "plain.jsonl"
    export(plain)
    result = invoke("archive", "verify", str(plain))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"intact: {SESSIONS} session(s)")
    sealed = invoke("archive", "verify", str(encrypted), "--identity", str(keys[0][0]),
                    "-o", "json")
    assert sealed.exit_code == 0, sealed.output
    import json

    facts = json.loads(sealed.stdout)
    assert facts["intact"] is True and facts["encrypted"] is True
    assert facts["sessions"] == SESSIONS


def test_archive_verify_refuses_a_damaged_or_locked_archive(source, keys, encrypted, tmp_path):
    plain = tmp_path / "plain.jsonl"
    export(plain)
    data = bytearray(plain.read_bytes())
    data[len(data) // 2] ^= 0x01
    flipped = tmp_path / "flipped.jsonl"
    flipped.write_bytes(bytes(data))
    damaged = invoke("archive", "verify", str(flipped))
    assert damaged.exit_code == 1, damaged.output
    error_line(damaged)
    truncated = tmp_path / "truncated.jsonl.gz.age"
    truncated.write_bytes(encrypted.read_bytes()[:-100])
    cut = invoke("archive", "verify", str(truncated), "--identity", str(keys[0][0]))
    assert cut.exit_code == 1, cut.output
    locked = invoke("archive", "verify", str(encrypted))
    assert locked.exit_code == 2 and "--identity" in error_line(locked)
    wrong = invoke("archive", "verify", str(encrypted), "--identity", str(keys[1][0]))
    assert wrong.exit_code == 1, wrong.output
    assert invoke("archive", "verify", str(tmp_path / "none")).exit_code == 2


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_an_identity_readable_by_others_is_refused_as_sign_with_refuses_one(encrypted, keys,
                                                                           redis_url, mode):
    """A secret key the group or others can read: exit 2 before it is read, naming the
    permissions and the chmod, nothing written (``--sign-with`` refuses such a key too)."""
    path = keys[0][0]
    path.chmod(mode)
    before = redis_snapshot(redis_url)
    for args in (["archive", "verify", str(encrypted)],
                 ["sessions", "import", str(encrypted), "--uri", redis_url, "--apply", "--yes"]):
        result = invoke(*args, "--identity", str(path))
        assert result.exit_code == 2, result.output
        line = error_line(result)
        assert f"permissions {mode:04o}" in line and f"chmod 600 {path}" in line, line
    assert redis_snapshot(redis_url) == before
    path.chmod(0o600)
    assert invoke("archive", "verify", str(encrypted), "--identity", str(path)).exit_code == 0


def test_verify_with_the_wrong_identity_does_not_speak_of_an_import(encrypted, keys):
    result = invoke("archive", "verify", str(encrypted), "--identity", str(keys[1][0]))
    assert result.exit_code == 1, result.output
    assert "no --identity matches" in error_line(result)
    assert "import" not in result.stderr


def test_a_file_that_is_not_an_archive_exits_3_as_documented(tmp_path, redis_url):
    """docs/sessions.md lists exit 3 for a file that is not a semvecctl archive."""
    other = tmp_path / "notes.txt"
    other.write_text("just some notes\n")
    for args in (["archive", "verify", str(other)],
                 ["sessions", "import", str(other), "--uri", redis_url]):
        result = invoke(*args)
        assert result.exit_code == 3, result.output
        assert "not a semvecctl sessions archive" in error_line(result)
    page = (Path(__file__).resolve().parents[3] / "docs" / "sessions.md").read_text()
    assert "3 for a file that is not a semvecctl archive" in page
