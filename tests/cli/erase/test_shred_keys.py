"""Crypto-shredding end to end, through the CLI, on the suite's real Redis and PostgreSQL and
on MongoDB through mongomock (the suite's double: no real MongoDB runs here).

A store is seeded (tests/support/maintenance.py: alice-of-acme "S" in s1, shared with bob
"T"; alice-unowned in s2; here also bob alone in s3). Archive A is ``sessions export
--with-events --encrypt-to`` (age) ``--shred-keys``; archive B a ``sessions prune
--archive --shred-keys`` of the idle s1 and s3 (state only, no events). Then ``erase
--apply --shred-keys`` of S destroys S's key and s1's. Afterwards:

- A decrypted with pyrage alone (the archive's age identity) holds none of S's plaintext
  (her user id, event ids, contents, s1's blob), and the keyring opens everything else;
- ``sessions import`` of A into a fresh store restores every other subject byte for byte
  (states, and events compared by content) and withholds S, counted; B withholds s1 and
  restores s3; without the keyring the import is refused (exit 2, nothing written);
- ``archive verify`` checks A without the keyring and counts what is shredded with it.
"""

from __future__ import annotations

import json
import os
import stat
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from typer.testing import CliRunner

from backends.contract import MemoryEvent
from semvecctl.app import app
from tests.cli.prune.test_prune import TTL, age
from tests.cli.sessions.test_erasure_ledger import _fresh
from tests.support.fixtures.mongo import cli_mongo, db_name, mongo_client  # noqa: F401
from tests.support.maintenance import make_target, seed

KINDS = [pytest.param("redis", marks=pytest.mark.redis),
         pytest.param("postgres", marks=pytest.mark.postgres), "mongo"]


def run(target, *args: str):
    extra = (["--assume-ttl", f"{TTL}s"] if target.name == "redis"
             and args[:2] == ("sessions", "prune") else [])
    return CliRunner().invoke(app, [*args, *extra], env=target.env)


@pytest.fixture(params=KINDS)
def target(request):
    options = {"ttl_seconds": TTL} if request.param == "redis" else {}
    return make_target(request, request.param, **options)


def _age_key(tmp_path):
    import pyrage

    identity = pyrage.x25519.Identity.generate()
    path = tmp_path / "age.key"
    path.write_text(str(identity) + "\n")
    path.chmod(0o600)
    return identity, path, str(identity.to_public())


def _events(adapter, user, owner=None):
    return sorted((json.dumps(e.to_dict(), sort_keys=True)
                   for e in adapter.event_store().list_events(user)
                   if owner is None or e.owner_subject == owner))


def _state(adapter, sid):
    loaded = adapter.state_store().load_full(sid)
    return None if loaded is None else (bytes(loaded.blob), loaded.owner_subject,
                                        loaded.pending_message)


def test_an_erased_subject_is_shredded_from_every_archive_and_the_rest_restores(
        target, request, tmp_path):
    adapter = target.adapter
    s = seed(adapter)
    s3 = f"{s.tag}-s3"
    adapter.state_store().save(s3, b"blob-three", expected_version=None, owner_subject="acme")
    adapter.event_store().append(MemoryEvent(
        event_id=str(uuid.uuid4()), user_id=s.bob, content="bob alone",
        created_at=datetime.now(timezone.utc) - timedelta(minutes=30), embedding=[0.3] * 8,
        owner_subject="acme", session_id=s3))
    identity, identity_file, recipient = _age_key(tmp_path)
    keys = tmp_path / "keys"
    a, b = tmp_path / "a.jsonl.age", tmp_path / "b.jsonl"
    exported = run(target, "sessions", "export", *target.args, "--with-events", "--out", str(a),
                   "--encrypt-to", recipient, "--shred-keys", str(keys))
    assert exported.exit_code == 0, exported.output
    assert stat.S_IMODE(os.stat(keys).st_mode) == 0o700
    assert all(stat.S_IMODE(os.stat(keys / f).st_mode) == 0o600
               for f in os.listdir(keys) if f.startswith("keys-"))
    for sid in (s.s1, s3):
        age(target, sid, 2 * 86400)
    pruned = run(target, "sessions", "prune", *target.args, "--idle-for", "1d", "--archive",
                 str(b), "--shred-keys", str(keys))
    assert pruned.exit_code == 0, pruned.output
    before = {sid: _state(adapter, sid) for sid in (s.s2, s3)}
    events_before = {s.bob: _events(adapter, s.bob), s.alice: _events(adapter, s.alice, "")}

    erased = run(target, "erase", *target.args, "--user", s.alice, "--owner", "acme",
                 "--apply", "--yes", "--receipt", str(tmp_path / "r.json"),
                 "--shred-keys", str(keys))
    assert erased.exit_code == 0, erased.output
    assert "destroyed 2 shred key(s)" in erased.stderr

    # pyrage alone, with the archive's age identity: none of S's plaintext
    import pyrage

    plain = pyrage.decrypt(a.read_bytes(), [identity])
    for secret in (s.alice, "alice said 0", "alice said 2", *s.alice_ids[:3], "blob-one"):
        assert secret.encode() not in plain
    assert b"bob said" not in plain  # T's records are sealed too: opened by the keyring

    # the keyring opens the rest: T's events of the shared session are there
    from backends.archive import ArchiveReader
    from backends.archive.shred import Keyring

    with Keyring(keys) as ring, ArchiveReader(a, identities=[identity], keyring=ring) as reader:
        records = list(reader.sessions())
        assert reader.shredded_sessions == 1 and reader.shredded_events == 3
    shared = [r for r in records if r.shredded]
    assert [e.user_id for r in shared for e in r.events] == [s.bob, s.bob]
    assert {r.session_id for r in records if not r.shredded} >= {s.s2, s3}

    fresh = _fresh(request, target.name, 1)
    refused = run(target, "sessions", "import", str(a), "--identity", str(identity_file),
                  "--apply", "--yes", *fresh.target_args())
    assert refused.exit_code == 2 and "--shred-keys" in refused.stderr
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.output
    assert fresh.adapter.state_store().load(s3) is None

    imported = run(target, "sessions", "import", str(a), "--identity", str(identity_file),
                   "--shred-keys", str(keys), "--apply", "--yes", "-o", "json",
                   *fresh.target_args())
    assert imported.exit_code == 0, imported.output
    report = json.loads(imported.stdout)
    assert report["shredded"] == {"sessions": 1, "events": 3}
    assert fresh.adapter.state_store().load(s.s1) is None
    for sid, was in before.items():  # every other subject, byte for byte
        assert _state(fresh.adapter, sid) == was
    assert _events(fresh.adapter, s.bob) == events_before[s.bob]  # s1's and s3's
    assert _events(fresh.adapter, s.alice) == events_before[s.alice]  # alice-unowned's only

    other = _fresh(request, target.name, 2)
    from_b = run(target, "sessions", "import", str(b), "--shred-keys", str(keys), "--apply",
                 "--yes", "--allow-loss", "-o", "json", *other.target_args())
    assert from_b.exit_code == 0, from_b.output
    assert json.loads(from_b.stdout)["shredded"]["sessions"] == 1
    assert other.adapter.state_store().load(s.s1) is None
    assert _state(other.adapter, s3) == before[s3]

    unopened = run(target, "archive", "verify", str(a), "--identity", str(identity_file),
                   "-o", "json")
    assert unopened.exit_code == 0, unopened.output
    facts = json.loads(unopened.stdout)
    assert facts["sealed"] and facts["sealed_unopened"] == facts["sessions"] == 3
    counted = run(target, "archive", "verify", str(a), "--identity", str(identity_file),
                  "--shred-keys", str(keys), "-o", "json")
    assert counted.exit_code == 0, counted.output
    assert json.loads(counted.stdout)["shredded"] == {"subjects": 1, "sessions": 1,
                                                       "session_records": 1, "events": 3}


@pytest.mark.parametrize("mode,what", [(0o750, "dir"), (0o644, "file")])
def test_a_keyring_others_can_read_is_refused(mode, what, tmp_path):
    keys = tmp_path / "keys"
    keys.mkdir(mode=0o700)
    (keys / "keys-a").write_text("x.k.a " + "00" * 32 + "\n")
    (keys / "keys-a").chmod(0o600)
    (keys if what == "dir" else keys / "keys-a").chmod(mode)
    archive = tmp_path / "a.jsonl"
    exported = CliRunner().invoke(app, ["sessions", "export", "--uri", "memory://", "--out",
                                        str(archive), "--shred-keys", str(keys)])
    assert exported.exit_code == 2, exported.output
    assert not archive.exists()
    assert "too open" in exported.stderr and "00" * 32 not in exported.output
    assert exported.stderr.strip().count("\n") == 0 and "Traceback" not in exported.output


def test_an_erasure_never_makes_a_keyring(tmp_path):
    missing = tmp_path / "nowhere"
    result = CliRunner().invoke(app, ["erase", "--uri", "memory://", "--user", "u", "--unowned",
                                      "--apply", "--yes", "--receipt", str(tmp_path / "r.json"),
                                      "--shred-keys", str(missing)])
    assert result.exit_code == 2 and "no such shred keyring" in result.stderr
    assert not missing.exists() and not (tmp_path / "r.json").exists()
