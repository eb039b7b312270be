"""SIGINT in the middle of `sessions prune --apply` on the suite's real Redis (a real
subprocess): exit 130, the line says how many sessions were deleted, the archive written
first is complete and no partial file is left."""

from __future__ import annotations

import signal

import pytest

from backends.archive import ArchiveReader
from tests.cli.app.test_interrupts import spawn, wait_for

pytestmark = pytest.mark.redis

TTL = 400_000
COUNT = 6000


def test_prune_interrupted_says_how_far_it_got(redis_server, redis_url, tmp_path):
    client = redis_server.client()
    pipe = client.pipeline(transaction=False)
    for n in range(COUNT):  # the engine's layout, last written two days ago
        key = f"semvec:state:idle-{n:05d}"
        pipe.hset(key, mapping={"blob": b"x" * 64, "version": "1", "owner": "",
                                "drift_exempt": "0", "pending": ""})
        pipe.expire(key, TTL - 2 * 86400)
    pipe.execute()
    archive = tmp_path / "idle.jsonl"
    proc = spawn("sessions", "prune", "--uri", redis_url, "--idle-for", "1d", "--archive",
                 str(archive), "--apply", "--yes", "-o", "jsonl", "--assume-ttl", f"{TTL}s")
    try:
        wait_for(lambda: proc.poll() is not None or client.dbsize() < COUNT - 200,
                 timeout=120, what="deletes")
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    deleted = sum(1 for line in out.splitlines() if '"deleted"' in line)
    assert "the prune stopped after deleting" in err and "Traceback" not in err
    left = client.dbsize()
    assert COUNT - left >= deleted > 0
    with ArchiveReader(archive) as reader:
        assert sum(1 for _ in reader.sessions()) == COUNT
    # the journal keeps a rerun from replacing the archive (tests/cli/app/test_maintenance_kills.py)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idle.jsonl", "idle.jsonl.journal"]
