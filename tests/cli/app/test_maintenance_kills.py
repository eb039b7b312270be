"""The kill test for `sessions prune --archive --apply` and `erase --apply` (#23): SIGINT,
SIGTERM and SIGKILL at a few points of a real subprocess (`python -m semvecctl`) on the
suite's real Redis and PostgreSQL, then a rerun of the same command. After the rerun the
archive (prune) holds every session the whole operation removed, the receipt (erase)
names every event and session the whole operation removed, no journal and no partial
file is left, and the store holds nothing of what was removed.

Bounded: a few thousand rows per case, one signal per case, each wait capped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from backends.archive import ArchiveReader
from tests.cli.app.test_interrupts import ROOT, spawn, wait_for

TTL = 400_000
EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGKILL: -signal.SIGKILL}
SIGNALS = [pytest.param(signal.SIGINT, id="SIGINT"), pytest.param(signal.SIGTERM, id="SIGTERM"),
           pytest.param(signal.SIGKILL, id="SIGKILL")]
BACKENDS = [pytest.param("redis", marks=pytest.mark.redis),
            pytest.param("postgres", marks=pytest.mark.postgres)]


def _rerun(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SEMVEC_SESSION_BACKEND": "", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "semvecctl", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def _stop(proc: subprocess.Popen, signum: int) -> tuple[str, str]:
    try:
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == EXIT[signum], err
    if signum != signal.SIGKILL:
        assert "Traceback" not in err and "run the same command again" in err
    return out, err


class _Store:
    """Seeding and counting on one real store, in its own rows."""

    def __init__(self, name: str, request) -> None:
        self.name = name
        if name == "redis":
            import redis

            self.url = request.getfixturevalue("redis_url")
            self.client = redis.Redis.from_url(self.url)
            request.addfinalizer(self.client.close)
            self.args = ["--uri", self.url]
        else:
            self.url = request.getfixturevalue("pgvector_url")
            self.args = ["--uri", self.url, "--backend", "postgres"]

    def adapter(self):
        if self.name == "redis":
            from backends.redis import RedisBackendAdapter

            return RedisBackendAdapter(self.url)
        from backends.postgres import PostgresAdapter

        return PostgresAdapter(self.url)

    def idle_sessions(self, tag: str, n: int) -> list[str]:
        names = [f"{tag}-{i:05d}" for i in range(n)]
        if self.name == "redis":
            pipe = self.client.pipeline(transaction=False)
            for sid in names:
                key = f"semvec:state:{sid}"
                pipe.hset(key, mapping={"blob": f"blob {sid}".encode(), "version": "1",
                                        "owner": "", "drift_exempt": "0", "pending": ""})
                pipe.expire(key, TTL - 2 * 86400)
            pipe.execute()
        else:
            import psycopg

            adapter = self.adapter()
            adapter.ensure_schema()
            adapter.close()
            with psycopg.connect(self.url) as conn:
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO semvec_session_state (session_id, state_blob, version,"
                        " drift_exempt, owner_subject, pending_message, updated_at) VALUES"
                        " (%s, %s, 1, false, NULL, NULL, now() - interval '2 days')",
                        [(sid, f"blob {sid}".encode()) for sid in names])
        return names

    def sessions_left(self, tag: str) -> int:
        if self.name == "redis":
            return sum(1 for _ in self.client.scan_iter(match=f"semvec:state:{tag}-*", count=1000))
        import psycopg

        with psycopg.connect(self.url) as conn:
            return conn.execute("SELECT count(*) FROM semvec_session_state WHERE session_id"
                                " LIKE %s", (f"{tag}-%",)).fetchone()[0]

    def events_left(self, user: str) -> int:
        adapter = self.adapter()
        try:
            return adapter.event_store().count_for_user(user)
        finally:
            adapter.close()


# -- prune -----------------------------------------------------------------------------------

PRUNE_N = 4000


#: (point, signal): every signal while deleting; while archiving (nothing deleted yet)
#: SIGKILL, the one case that leaves a partial file and a journal behind
PRUNE_POINTS = [pytest.param("deleting", s.values[0], id=f"deleting-{s.id}") for s in SIGNALS] + [
    pytest.param("archiving", signal.SIGKILL, id="archiving-SIGKILL")]


@pytest.mark.parametrize("point,signum", PRUNE_POINTS)
@pytest.mark.parametrize("name", BACKENDS)
def test_prune_killed_then_rerun_archives_every_session_it_removed(request, tmp_path, name,
                                                                   signum, point):
    store = _Store(name, request)
    tag = uuid.uuid4().hex[:8]
    names = store.idle_sessions(tag, PRUNE_N)
    archive = tmp_path / "idle.jsonl.gz"
    args = ["sessions", "prune", *store.args, "--idle-for", "1d", "--match", f"{tag}-*",
            "--archive", str(archive), "--apply", "--yes", "-o", "jsonl"]
    if name == "redis":
        args += ["--assume-ttl", f"{TTL}s"]
    proc = spawn(*args)
    if point == "archiving":
        wait_for(lambda: proc.poll() is not None or any(tmp_path.glob(".idle.jsonl.gz.*.partial")),
                 timeout=60, what="the archive being written")
    else:
        wait_for(lambda: proc.poll() is not None or store.sessions_left(tag) < PRUNE_N - 100,
                 timeout=120, what="deletes")
    assert proc.poll() is None, proc.communicate()
    _stop(proc, signum)
    left_after_kill = store.sessions_left(tag)
    rerun = _rerun(*args)
    assert rerun.returncode == 0, rerun.stderr
    assert store.sessions_left(tag) == 0
    with ArchiveReader(archive) as reader:
        archived = {r.session_id: r.blob for r in reader.sessions()}
    assert set(archived) == set(names)  # every session removed, by either run
    assert archived[names[0]] == f"blob {names[0]}".encode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idle.jsonl.gz"]
    if left_after_kill < PRUNE_N:
        assert "continuing the interrupted prune" in rerun.stderr


# -- erase -----------------------------------------------------------------------------------

ERASE_SESSIONS, ERASE_EVENTS = 40, 4000


def _seed_subject(store: _Store, tag: str) -> tuple[str, list[str], list[str]]:
    from backends.contract import MemoryEvent

    user = f"{tag}-alice"
    sessions = [f"{tag}-s{i:03d}" for i in range(ERASE_SESSIONS)]
    adapter = store.adapter()
    try:
        if name_is_sql(store):
            adapter.ensure_schema()
        for sid in sessions:
            adapter.state_store().save(sid, b"state " + sid.encode(), expected_version=None,
                                       owner_subject="acme")
        base = datetime.now(timezone.utc) - timedelta(hours=2)
        ids = []
        events = adapter.event_store()
        for n in range(ERASE_EVENTS):
            event = MemoryEvent(event_id=str(uuid.uuid4()), user_id=user, content=f"secret {n}",
                                created_at=base + timedelta(milliseconds=n), embedding=[0.5, 0.25],
                                owner_subject="acme", session_id=sessions[n % ERASE_SESSIONS])
            events.append(event)
            ids.append(event.event_id)
    finally:
        adapter.close()
    return user, sessions, ids


def name_is_sql(store: _Store) -> bool:
    return store.name != "redis"


@pytest.mark.parametrize("signum", SIGNALS)
@pytest.mark.parametrize("name", BACKENDS)
def test_erase_killed_then_rerun_writes_a_receipt_for_everything_removed(request, tmp_path,
                                                                         name, signum):
    store = _Store(name, request)
    tag = uuid.uuid4().hex[:8]
    user, sessions, ids = _seed_subject(store, tag)
    receipt = tmp_path / "receipt.json"
    args = ["erase", *store.args, "--user", user, "--owner", "acme", "--apply", "--yes",
            "--receipt", str(receipt)]
    proc = spawn(*args)
    wait_for(lambda: proc.poll() is not None or store.events_left(user) < ERASE_EVENTS - 50,
             timeout=120, what="event deletes")
    assert proc.poll() is None, proc.communicate()
    _stop(proc, signum)
    assert not receipt.exists()
    assert store.events_left(user) > 0, "the erase finished before the signal"
    rerun = _rerun(*args)
    assert rerun.returncode == 0, rerun.stderr
    data = json.loads(receipt.read_text())
    assert sorted(data["event_ids"]) == sorted(ids)
    assert data["events_deleted"] == ERASE_EVENTS
    assert sorted(data["sessions"]) == sorted(sessions)
    assert data["states_deleted"] == ERASE_SESSIONS
    assert data["verification"]["ok"] is True and data["runs"] >= 1
    assert store.events_left(user) == 0 and store.sessions_left(tag) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["receipt.json"]
