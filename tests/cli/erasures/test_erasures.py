"""``semvecctl erasures list|check`` on the memory backend (through an adapter factory:
its ledger lives as long as the process) and on the suite's real Redis, and
``sessions prune``, which never removes the ledger."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone

import pytest
from typer.testing import CliRunner

from semvecctl.app import app
from tests.support.maintenance import make_target, seed

runner = CliRunner()
ERASED_AT = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)


def memory_with_one_erasure(**_options):
    """A memory store whose ledger holds ``u-17`` of ``acme``."""
    from backends.memory import MemoryBackendAdapter
    from backends.transfer.withhold import record_erasure

    adapter = MemoryBackendAdapter()
    record_erasure(adapter, "u-17", "acme", erased_at=ERASED_AT, receipt="sha256:abc")
    return adapter


MEMORY = ["--adapter", f"{__name__}:memory_with_one_erasure"]


def test_memory_lists_hashes_and_checks_a_subject():
    listed = runner.invoke(app, ["erasures", "list", *MEMORY, "-o", "json"])
    assert listed.exit_code == 0, listed.output
    [entry] = json.loads(listed.stdout)
    assert entry["erased_at"] == ERASED_AT.isoformat() and entry["receipt"] == "sha256:abc"
    assert len(entry["subject"]) == 12 and "u-17" not in listed.stdout + listed.stderr
    table = runner.invoke(app, ["erasures", "list", *MEMORY])
    # (each factory call makes a new store, with a secret of its own: other hashes)
    assert table.exit_code == 0 and "SUBJECT" in table.stdout and "sha256:abc" in table.stdout
    yes = runner.invoke(app, ["erasures", "check", *MEMORY, "--user", "u-17", "--owner", "acme"])
    assert yes.exit_code == 0 and "erased at 2026-11-01T12:00:00+00:00" in yes.stdout
    # another owner's u-17, and the unowned u-17, are other subjects
    for other in (["--owner", "other"], []):
        no = runner.invoke(app, ["erasures", "check", *MEMORY, "--user", "u-17", *other])
        assert no.exit_code == 1 and "not erased" in no.stdout and "Traceback" not in no.output
    empty = runner.invoke(app, ["erasures", "check", *MEMORY, "--user", " "])
    assert empty.exit_code == 2 and "Traceback" not in empty.output
    fresh = runner.invoke(app, ["erasures", "list", "--uri", "memory://", "-o", "json"])
    assert fresh.exit_code == 0 and json.loads(fresh.stdout) == []


@pytest.mark.redis
def test_redis_check_after_erase_and_prune_keeps_the_ledger(request, redis_url, tmp_path):
    import redis

    target = make_target(request, "redis")
    s = seed(target.adapter)
    not_yet = runner.invoke(app, ["erasures", "check", *target.args, "--user", s.alice,
                                  "--owner", "acme", "-o", "json"])
    assert not_yet.exit_code == 1 and json.loads(not_yet.stdout)["erased"] is False
    erased = runner.invoke(app, ["erase", *target.args, "--user", s.alice, "--owner", "acme",
                                 "--apply", "--yes", "--receipt", str(tmp_path / "r.json")])
    assert erased.exit_code == 0, erased.output
    digest = json.loads((tmp_path / "r.json").read_text())["digest"]["value"]
    check = runner.invoke(app, ["erasures", "check", *target.args, "--user", s.alice,
                                "--owner", "acme", "-o", "json"])
    assert check.exit_code == 0, check.output
    assert json.loads(check.stdout)["receipt"] == f"sha256:{digest}"
    listed = runner.invoke(app, ["erasures", "list", *target.args, "-o", "json"])
    before = json.loads(listed.stdout)
    assert len(before) == 1 and s.alice not in listed.stdout
    # prune every idle session: the ledger stays, entry for entry
    client = redis.Redis.from_url(redis_url)
    ttl = 400_000
    for n in range(3):
        key = f"semvec:state:{uuid.uuid4().hex}-old-{n}"
        client.hset(key, mapping={"blob": b"x", "version": 1, "owner": "", "pending": ""})
        client.expire(key, ttl - 2 * 86400)
    ledger_keys = sorted(client.scan_iter(match="semvec:ctl:ledger:*"))
    pruned = runner.invoke(app, ["sessions", "prune", *target.args, "--idle-for", "1d",
                                 "--assume-ttl", f"{ttl}s", "--apply", "--yes"])
    assert pruned.exit_code == 0, pruned.output
    assert not list(client.scan_iter(match="semvec:state:*-old-*"))
    assert sorted(client.scan_iter(match="semvec:ctl:ledger:*")) == ledger_keys
    client.close()
    after = runner.invoke(app, ["erasures", "list", *target.args, "-o", "json"])
    assert json.loads(after.stdout) == before
