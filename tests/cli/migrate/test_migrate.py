"""``semvecctl migrate`` end to end on real Redis (source) and real PostgreSQL (target),
through the CLI: the preview/confirm vocabulary, refusals, and the kill test: 20 SIGKILLs
of ``migrate run --follow`` (a subprocess) at random moments while a writer thread
commits turns with events to the source; each rerun resumes; then the final cutover is
identical by content, with 0 lost and 0 duplicated events, the target never ahead of the
source, and a session someone else wrote on the target reported and kept.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from backends.contract import MemoryEvent
from semvecctl.app import app

try:  # the Mongo case needs mongomock (a test extra); the others do not
    from tests.support.fixtures.mongo import cli_mongo, db_name, mongo_client  # noqa: F401
    HAS_MONGOMOCK = True
except ImportError:  # pragma: no cover
    HAS_MONGOMOCK = False

ROOT = Path(__file__).resolve().parents[3]
OWNER = "acme"
runner = CliRunner()
pytestmark = pytest.mark.postgres


def _event(user, sid, n):
    return MemoryEvent(event_id=str(uuid.uuid4()), user_id=user, content=f"turn {n} of {sid}",
                       session_id=sid, owner_subject=OWNER, meta={"n": n})


@pytest.fixture
def source(redis_url):
    from backends.redis import RedisBackendAdapter

    adapter = RedisBackendAdapter(redis_url)
    yield adapter
    adapter.close()


@pytest.fixture
def target(pgvector_url):
    from backends.postgres import PostgresAdapter

    adapter = PostgresAdapter(pgvector_url)
    yield adapter
    adapter.close()


def seed(adapter, n):
    acked = []
    for i in range(n):
        e = _event(f"user-{i % 5}", f"chat-{i}", 0)
        adapter.commit_turn(f"chat-{i}", b"x" * 512 + b"%d" % i, expected_version=None,
                            owner_subject=OWNER, events=[e])
        acked.append(e.event_id)
    return {f"chat-{i}": 1 for i in range(n)}, acked


def cli(*args):
    return runner.invoke(app, ["migrate", *args])


def pair(redis_url, pgvector_url):
    return ["--from", redis_url, "--to", pgvector_url]


def test_run_previews_then_applies_and_verify_and_status_read(source, target, redis_url,
                                                              pgvector_url, tmp_path):
    seed(source, 5)
    state = str(tmp_path / "m.state")
    refused = cli("run", *pair(redis_url, pgvector_url), "--state", state)
    assert refused.exit_code == 1 and "--allow-loss" in refused.stderr  # sequences: the SQL layout keeps none
    preview = cli("run", *pair(redis_url, pgvector_url), "--state", state, "--allow-loss")
    assert preview.exit_code == 0 and "preview" in preview.stderr and not os.path.exists(state)
    assert target.state_store().current_version("chat-1") is None
    no_tty = cli("run", *pair(redis_url, pgvector_url), "--state", state, "--allow-loss", "--apply")
    assert no_tty.exit_code == 2 and "--yes" in no_tty.stderr and not os.path.exists(state)
    done = cli("run", *pair(redis_url, pgvector_url), "--state", state, "--allow-loss", "--apply",
               "--yes")
    assert done.exit_code == 0, done.stderr
    assert "bulk pass 1 (version scan): scanned 5, copied 5" in done.stderr
    status = json.loads(cli("status", "--state", state, "-o", "json").stdout)
    assert status["sessions_copied"] == 5 and status["events_copied"] == 5
    assert status["cutover_possible"] is True
    ok = cli("verify", *pair(redis_url, pgvector_url), "--state", state)
    assert ok.exit_code == 0 and "identical: 5 session(s), 5 event(s)" in ok.stderr
    source.commit_turn("chat-2", b"moved", expected_version=1, owner_subject=OWNER)
    moved = cli("verify", *pair(redis_url, pgvector_url), "--state", state, "-o", "json")
    assert moved.exit_code == 1 and json.loads(moved.stdout)["source_moved"] == 1
    other = cli("verify", "--from", redis_url + "?socket_timeout=5", "--to", pgvector_url,
                "--state", state)
    assert other.exit_code == 2 and "another pair" in other.stderr
    missing = cli("status", "--state", str(tmp_path / "nope"))
    assert missing.exit_code == 2 and "no state file" in missing.stderr
    plan = json.loads(cli("plan", *pair(redis_url, pgvector_url), "-o", "json").stdout)
    assert plan["sessions"] == 5 and plan["events"] == 5 and plan["losses"]


def test_abort_previews_then_removes_only_ours(source, target, redis_url, pgvector_url, tmp_path):
    seed(source, 3)
    state = str(tmp_path / "m.state")
    target.state_store().save("theirs", b"keep", expected_version=None)
    assert cli("run", *pair(redis_url, pgvector_url), "--state", state, "--allow-loss",
               "--apply", "--yes").exit_code == 0
    preview = cli("abort", "--to", pgvector_url, "--state", state)
    assert preview.exit_code == 0 and "would remove 3 session(s) and 3 event(s)" in preview.stderr
    assert target.state_store().current_version("chat-0") == 1
    gone = cli("abort", "--to", pgvector_url, "--state", state, "--apply", "--yes")
    assert gone.exit_code == 0, gone.stderr
    assert sorted(s.session_id for s in target.iter_sessions()) == ["theirs"]
    again = cli("run", *pair(redis_url, pgvector_url), "--state", state, "--allow-loss",
                "--apply", "--yes")
    assert again.exit_code == 2 and "aborted" in again.stderr, again.stderr


def test_a_second_run_cutover_or_abort_of_a_migration_in_progress_is_refused(
        source, target, redis_url, pgvector_url, tmp_path):
    """One process at a time writes a migration: while one holds the state file (here
    the test, standing for a ``run --follow`` still working), another ``run``, ``cutover``
    or ``abort`` is refused before it writes anything (exit 3, one line naming the
    holder); previews, ``status`` and ``verify`` only read and still answer."""
    from backends.migrate import MigrationState

    seed(source, 3)
    state = str(tmp_path / "m.state")
    assert cli("run", *pair(redis_url, pgvector_url), "--state", state, "--allow-loss",
               "--apply", "--yes").exit_code == 0
    source.commit_turn("chat-1", b"moved on", expected_version=1, owner_subject=OWNER)
    held = MigrationState.read(state)
    held.claim()
    try:
        for args in (["run", *pair(redis_url, pgvector_url), "--state", state, "--allow-loss",
                      "--apply", "--yes"],
                     ["cutover", *pair(redis_url, pgvector_url), "--state", state,
                      "--quiet-window", "0", "--apply", "--yes"],
                     ["abort", "--to", pgvector_url, "--state", state, "--apply", "--yes"]):
            refused = cli(*args)
            assert refused.exit_code == 3, (args[0], refused.stderr)
            error = refused.stderr.splitlines()[-1]  # after what a plan warns of (abort)
            assert "is in use by 'semvecctl migrate' (pid" in error
            assert "Traceback" not in refused.stderr
        assert target.state_store().load_full("chat-1").version == 1  # nothing was written
        for preview in (["run", *pair(redis_url, pgvector_url), "--state", state, "--allow-loss"],
                        ["cutover", *pair(redis_url, pgvector_url), "--state", state],
                        ["abort", "--to", pgvector_url, "--state", state]):
            assert cli(*preview).exit_code == 0, preview[0]
        assert cli("status", "--state", state).exit_code == 0
        assert cli("verify", *pair(redis_url, pgvector_url), "--state", state).exit_code == 1
    finally:
        held.close()
    done = cli("cutover", *pair(redis_url, pgvector_url), "--state", state,
               "--quiet-window", "0", "--apply", "--yes")
    assert done.exit_code == 0, done.stderr
    assert target.state_store().load_full("chat-1").blob == b"moved on"


class Writer(threading.Thread):
    """Commits turns with an event each to the source until stopped; remembers every
    acknowledged event id and adds a session now and then."""

    def __init__(self, adapter, versions):
        super().__init__(daemon=True)
        self.adapter, self.versions = adapter, dict(versions)
        self.acked: list[str] = []
        self.stop = threading.Event()
        self.error = None
        self.rng = random.Random(11)
        self.turns = 0

    def run(self):
        try:
            while not self.stop.is_set():
                self.turns += 1
                if self.turns % 25 == 0:
                    sid = f"chat-new-{self.turns}"
                    v = None
                else:
                    sid = self.rng.choice(sorted(self.versions))
                    v = self.versions[sid]
                e = _event(f"user-{self.turns % 5}", sid, self.turns)
                self.versions[sid] = self.adapter.commit_turn(
                    sid, b"y" * 512 + b"%d" % self.turns, expected_version=v,
                    owner_subject=OWNER, events=[e])
                self.acked.append(e.event_id)
                self.stop.wait(0.01)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


def _never_ahead(source, target, foreign):
    """Every target session is the source's at that version or an older one; every
    target event exists on the source."""
    for summary in target.iter_sessions():
        if summary.session_id in foreign:
            continue
        have = source.state_store().current_version(summary.session_id)
        assert have is not None and summary.version <= have, summary.session_id


def _known(state) -> int:
    """Sessions the state file records (copied, pending or deleted): rows are never forgotten."""
    if not os.path.exists(state):
        return 0
    status = json.loads(cli("status", "--state", state, "-o", "json").stdout)
    return status["sessions_copied"] + status["sessions_pending"] + status["sessions_deleted"]


def _wait_until_working(proc, state, before, limit=120.0):
    """Until the run has written the state file since ``before`` (its mtime) and the file
    records at least one session: a kill before the first record would test nothing, and
    on a busy machine the interpreter's start alone can take seconds, so the bound is
    generous (only a run that never starts reaches it)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        if (os.path.exists(state) and os.stat(state).st_mtime_ns != before
                and _known(state) > 0):
            return
        time.sleep(0.05)


def test_twenty_sigkills_of_run_follow_then_cutover_is_identical(source, target, redis_url,
                                                                 pgvector_url, tmp_path):
    versions, acked = seed(source, 150)
    state = str(tmp_path / "m.state")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    once = [sys.executable, "-m", "semvecctl", "migrate", "run", "--from", redis_url,
            "--to", pgvector_url, "--state", state, "--allow-loss", "--apply", "--yes"]
    command = once + ["--follow", "--interval", "0.05"]
    writer = Writer(source, versions)
    writer.start()
    rng = random.Random(2026)
    foreign = "written-by-someone-else"
    copied_before = 0
    try:
        for kill in range(20):
            before = os.stat(state).st_mtime_ns if os.path.exists(state) else None
            proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE)
            _wait_until_working(proc, state, before)
            time.sleep(rng.uniform(0.0, 0.8))  # a random moment of the work
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
            if kill == 8:
                target.state_store().save(foreign, b"not ours", expected_version=None)
            _never_ahead(source, target, {foreign})
            if os.path.exists(state):  # each resume continues from what was recorded
                known = _known(state)
                assert known >= copied_before
                copied_before = known
    finally:
        writer.stop.set()
        writer.join(10)
    assert writer.error is None and writer.turns > 20
    assert copied_before > 0  # the kills did let it work between them
    last = subprocess.run(once, env=env, capture_output=True, text=True, timeout=120)
    assert last.returncode == 0, last.stderr[-2000:]
    receipt = tmp_path / "receipt.json"
    cut = cli("cutover", *pair(redis_url, pgvector_url), "--state", state, "--quiet-window", "0.2",
              "--receipt", str(receipt), "--apply", "--yes")
    assert cut.exit_code == 0, cut.stderr
    assert "SEMVEC_SESSION_BACKEND=postgres" in cut.stderr
    data = json.loads(receipt.read_text())
    assert data["ok"] and data["foreign_sessions_kept"] == [foreign]
    assert data["sessions"] == len(writer.versions) and data["sessions_matched"] == data["sessions"]
    # read both stores here: identical by content
    for sid, version in writer.versions.items():
        a, b = source.state_store().load_full(sid), target.state_store().load_full(sid)
        assert (a.blob, a.version, a.owner_subject) == (b.blob, b.version, b.owner_subject) \
            and b.version == version, sid
    assert target.state_store().load_full(foreign).blob == b"not ours"  # kept
    every = acked + writer.acked
    on_target = [e.event_id for u in range(5) for e in target.event_store().list_events(f"user-{u}")]
    assert len(on_target) == len(set(on_target))  # 0 duplicated
    assert set(on_target) == set(every)  # 0 lost (and nothing the source does not hold)
    assert data["events"] == len(every)


def test_cutover_refuses_without_a_receipt_while_the_source_moves_and_abort_after_it(
        source, redis_url, pgvector_url, tmp_path):
    seed(source, 2)
    state = str(tmp_path / "m.state")
    receipt = tmp_path / "r.json"
    assert cli("run", *pair(redis_url, pgvector_url), "--state", state, "--allow-loss",
               "--apply", "--yes").exit_code == 0
    preview = cli("cutover", *pair(redis_url, pgvector_url), "--state", state,
                  "--receipt", str(receipt))
    assert preview.exit_code == 0 and "preview" in preview.stderr and not receipt.exists()
    done = cli("cutover", *pair(redis_url, pgvector_url), "--state", state, "--receipt",
               str(receipt), "--quiet-window", "0", "--apply", "--yes")
    assert done.exit_code == 0 and json.loads(receipt.read_text())["sessions"] == 2
    again = cli("cutover", *pair(redis_url, pgvector_url), "--state", state, "--receipt",
                str(receipt), "--apply", "--yes")
    assert again.exit_code == 2 and "--overwrite" in again.stderr
    refused = cli("abort", "--to", pgvector_url, "--state", state, "--apply", "--yes")
    assert refused.exit_code == 2 and "cut over" in refused.stderr


@pytest.mark.skipif(not HAS_MONGOMOCK, reason="mongomock is not installed")
def test_a_mongo_source_through_the_adapter_hook(cli_mongo, source, redis_url, tmp_path):
    """MongoDB via mongomock (the CLI's --from-adapter hook): no replica set, so state and
    events are written apart here and the migration scans for changes."""
    from tests.support.fixtures.mongo import cli_adapter

    mongo = cli_adapter()
    for i in range(4):
        mongo.state_store().save(f"m-{i}", b"mongo %d" % i, expected_version=None,
                                 owner_subject=OWNER)
        mongo.event_store().append(_event("user-m", f"m-{i}", i))
    hook = "tests.support.fixtures.mongo:cli_adapter"
    state = str(tmp_path / "m.state")
    args = ["--from-adapter", hook, "--to", redis_url, "--state", state]
    done = cli("run", *args, "--apply", "--yes")
    assert done.exit_code == 0, done.stderr
    assert "scanned 4, copied 4" in done.stderr and "events 4" in done.stderr
    mongo.state_store().save("m-1", b"moved", expected_version=1, owner_subject=OWNER)
    behind = cli("verify", *args)
    assert behind.exit_code == 1 and "m-1" in behind.stderr
    cut = cli("cutover", *args, "--quiet-window", "0", "--receipt", str(tmp_path / "r.json"),
              "--apply", "--yes")
    assert cut.exit_code == 0, cut.stderr
    assert source.state_store().load_full("m-1").blob == b"moved"
    assert len(source.event_store().list_events("user-m")) == 4
    mongo.close()


def test_run_writes_its_metrics_file_and_status_watch_follows_the_state(source, target, redis_url,
                                                                        pgvector_url, tmp_path):
    """``--metrics-file`` on ``migrate run`` (parsed by prometheus_client) and ``migrate
    status --watch`` on a pipe: one line per refresh, Ctrl-C exits 130."""
    parser = pytest.importorskip("prometheus_client.parser")
    seed(source, 3)
    state, prom = str(tmp_path / "m.state"), tmp_path / "migrate.prom"
    done = cli("run", *pair(redis_url, pgvector_url), "--state", state, "--allow-loss", "--apply",
               "--yes", "--metrics-file", str(prom))
    assert done.exit_code == 0, done.stderr
    found = {s.name: s.value for f in parser.text_string_to_metric_families(prom.read_text())
             for s in f.samples}
    assert found["semvecctl_sessions_written"] == 3 and found["semvecctl_events_written"] == 3
    assert found["semvecctl_migration_passes"] == 1 and found["semvecctl_run_success"] == 1
    assert "redis://" not in prom.read_text() and "chat-" not in prom.read_text()

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    proc = subprocess.Popen([sys.executable, "-m", "semvecctl", "migrate", "status", "--state",
                             state, "--watch", "0.1"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    lines = [proc.stdout.readline() for _ in range(2)]
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert all("phase " in line and "copied 3" in line for line in lines), lines
