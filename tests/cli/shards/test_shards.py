"""``semvecctl shards`` end to end on the suite's real PostgreSQL, one database per shard:
plan's ``moves`` in JSON, a grow through run and cutover (the switch value printed
redacted), a SIGKILL of ``shards run`` mid-way and a resume that ends the same, writers
on the old list during ``run --follow`` (cutover refuses with exit 1 while they write,
passes once they stop), and bad input (one line, the right exit code, no traceback)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from backends.postgres.placement import shard_index
from semvecctl.app import app
from tests.backends.postgres.test_reshard import _event, _rows, deployment, seed, snapshot

ROOT = Path(__file__).resolve().parents[3]
OWNER = "acme"
runner = CliRunner()
pytestmark = pytest.mark.postgres


def cli(primary, old, *args):
    return runner.invoke(app, ["--shards", ",".join(old), "shards", *args, "--uri", primary])


def _secret(url):
    """The same database with a password in its DSN (the suite's server trusts local
    connections, so it is never checked, only never to be printed)."""
    return url.replace("postgres@", "postgres:s3cret-pw@", 1)


@pytest.fixture
def grow(sharded_sql):
    """A 3-shard deployment with 200 sessions and a 4th database to grow onto."""
    four = sharded_sql.make(4)
    old, new = four.shards[:3], four.shards
    writer = deployment("postgres", four.primary, old)
    sids = seed(writer, 200)
    yield four.primary, old, new, sids, writer
    writer.close()


def _moved(sids, old_count=3, new_count=4):
    return [s for s in sids if shard_index(s, old_count) != shard_index(s, new_count)]


def test_plan_json_names_the_moves_and_reads_nothing_else(grow):
    primary, old, new, sids, _ = grow
    new = [_secret(u) for u in new[:3]] + [new[3].replace("postgresql://", "postgresql+psycopg://")]
    result = cli(primary, old, "plan", "--to-shards", ",".join(new), "-o", "json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["moves"] == len(_moved(sids))
    assert [r["sessions"] for r in report["after"]] == [
        sum(shard_index(s, 4) == i for s in sids) for i in range(4)]
    assert "s3cret" not in result.stdout + result.stderr
    table = cli(primary, old, "plan", "--to-shards", ",".join(new))
    assert table.exit_code == 0 and "moves" in table.stdout
    # the engine's own variables name the deployment (and its old list) just as well
    engine = runner.invoke(app, ["shards", "plan", "--to-shards", ",".join(new), "-o", "json"],
                           env={"SEMVEC_SESSION_BACKEND": "postgres", "DATABASE_URL": primary,
                                "SEMVEC_STATE_DB_SHARDS": ",".join(old)})
    assert engine.exit_code == 0, engine.stderr
    assert json.loads(engine.stdout)["moves"] == report["moves"]


def test_grow_through_run_and_cutover_prints_the_switch_redacted(grow, tmp_path):
    primary, old, new, sids, writer = grow
    before = snapshot(writer, sids)
    new = [_secret(u) for u in new]
    state = str(tmp_path / "grow.state")
    preview = cli(primary, old, "run", "--to-shards", ",".join(new), "--state", state)
    assert preview.exit_code == 0 and "preview" in preview.stderr and not os.path.exists(state)
    run = cli(primary, old, "run", "--to-shards", ",".join(new), "--state", state, "--apply",
              "--yes", "--batch-size", "9", "--metrics-file", str(tmp_path / "m.prom"))
    assert run.exit_code == 0, run.stderr
    status = json.loads(runner.invoke(app, ["shards", "status", "--state", state, "-o", "json"]).stdout)
    assert status["sessions_copied"] == len(_moved(sids)) and status["cutover_possible"]
    verify = cli(primary, old, "verify", "--to-shards", ",".join(new), "--state", state)
    assert verify.exit_code == 0, verify.stderr
    receipt = tmp_path / "r.json"
    cut = cli(primary, old, "cutover", "--to-shards", ",".join(new), "--state", state,
              "--quiet-window", "0", "--receipt", str(receipt), "--apply", "--yes")
    assert cut.exit_code == 0, cut.stderr
    assert "SEMVEC_STATE_DB_SHARDS=" in cut.stderr and "doctor --fix --apply" in cut.stderr
    everything = cut.stdout + cut.stderr + run.stderr + receipt.read_text()
    assert "s3cret" not in everything and "s3cret" not in (tmp_path / "m.prom").read_text()
    data = json.loads(receipt.read_text())
    assert data["ok"] and data["moves"] == len(_moved(sids)) and data["kind"] == "reshard"
    after = deployment("postgres", primary, new)
    try:
        assert snapshot(after, sids) == before
    finally:
        after.close()
    again = cli(primary, old, "abort", "--to-shards", ",".join(new), "--state", state)
    assert again.exit_code == 2 and "cut over" in again.stderr
    # once the engine runs on the new list, doctor removes the old copies
    fixed = runner.invoke(app, ["--shards", ",".join(new), "doctor", "--uri", primary, "--fix",
                                "--apply", "--yes"])
    assert fixed.exit_code in (0, 1), fixed.output
    for i, url in enumerate(new[:3]):
        assert sorted(_rows(url)) == sorted(s for s in sids if shard_index(s, 4) == i)
        assert set(_rows(url, "semvec_memory_events", "session_id")) <= {
            s for s in sids if shard_index(s, 4) == i}
    after = deployment("postgres", primary, new)
    try:
        assert snapshot(after, sids) == before
    finally:
        after.close()
    clean = runner.invoke(app, ["--shards", ",".join(new), "doctor", "--uri", primary])
    assert clean.exit_code == 0, clean.output


def _count_copied(state):
    from backends.migrate import MigrationState

    if not os.path.exists(state):
        return 0
    try:
        st = MigrationState.read(state, fold=False)
    except Exception:  # noqa: BLE001 - the file is being created
        return 0
    try:
        return st.count("copied")
    finally:
        st.close()


def test_sigkill_mid_run_then_resume_ends_the_same(sharded_sql, tmp_path):
    four = sharded_sql.make(4)
    old, new = four.shards[:3], four.shards
    writer = deployment("postgres", four.primary, old)
    sids = seed(writer, 600)
    before = snapshot(writer, sids)
    writer.close()
    moved = _moved(sids)
    state = str(tmp_path / "kill.state")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "semvecctl", "--shards", ",".join(old), "shards", "run",
               "--uri", four.primary, "--to-shards", ",".join(new), "--state", state,
               "--batch-size", "2", "--apply", "--yes"]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while _count_copied(state) < 10 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    at_kill = _count_copied(state)
    assert 0 < at_kill < len(moved)  # killed mid-way
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert _count_copied(state) == len(moved)
    cut = subprocess.run([*command[:6], "cutover", *command[7:13], "--quiet-window", "0",
                          "--apply", "--yes"], env=env, capture_output=True, text=True, timeout=300)
    assert cut.returncode == 0, cut.stderr[-2000:]
    after = deployment("postgres", four.primary, new)
    try:
        assert snapshot(after, sids) == before  # nothing lost, no event twice
    finally:
        after.close()


class Writer(threading.Thread):
    """Turns with events through the OLD-list adapter, on moving sessions, until stopped."""

    def __init__(self, adapter, sids):
        super().__init__(daemon=True)
        self.adapter, self.sids = adapter, sids
        self.stop, self.turns, self.error = threading.Event(), 0, None

    def run(self):
        store = self.adapter.state_store()
        try:
            n = 0
            while not self.stop.is_set():
                sid = self.sids[n % len(self.sids)]
                version = store.current_version(sid)
                self.adapter.commit_turn(sid, b"live-%d" % n, expected_version=version,
                                         owner_subject=OWNER,
                                         events=[_event("u-live", sid, 10_000 + n)])
                self.turns += 1
                n += 1
                time.sleep(0.01)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


def test_writers_during_follow_then_cutover_refuses_until_they_stop(grow, tmp_path):
    primary, old, new, sids, writer_adapter = grow
    moved = _moved(sids)
    state = str(tmp_path / "follow.state")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writer = Writer(writer_adapter, moved[:10])
    writer.start()
    try:
        follow = subprocess.run(
            [sys.executable, "-m", "semvecctl", "--shards", ",".join(old), "shards", "run",
             "--uri", primary, "--to-shards", ",".join(new), "--state", state, "--follow",
             "--interval", "0.2", "--max-passes", "4", "--apply", "--yes"],
            env=env, capture_output=True, text=True, timeout=300)
        assert follow.returncode == 0, follow.stderr[-2000:]
        assert follow.stderr.count("catch-up pass") == 3
        busy = cli(primary, old, "cutover", "--to-shards", ",".join(new), "--state", state,
                   "--quiet-window", "0.5", "--apply", "--yes")
        assert busy.exit_code == 1, busy.stderr
        assert "writers are still active" in busy.stderr
        assert not os.path.exists(state + ".receipt.json")
    finally:
        writer.stop.set()
        writer.join(10)
    assert writer.error is None and writer.turns > 10
    before = snapshot(writer_adapter, sids)
    done = cli(primary, old, "cutover", "--to-shards", ",".join(new), "--state", state,
               "--quiet-window", "0.2", "--apply", "--yes")
    assert done.exit_code == 0, done.stderr
    after = deployment("postgres", primary, new)
    try:
        assert snapshot(after, sids)[:2] == before[:2]
        live = [e for e in after.event_store().list_events("u-live")]
        assert len(live) == writer.turns == len({e.event_id for e in live})
    finally:
        after.close()


def test_bad_input_is_one_line_with_the_right_exit_code(grow, tmp_path, redis_url):
    primary, old, new, _, _ = grow
    state = str(tmp_path / "x.state")
    cases = [
        (cli(primary, old, "plan", "--to-shards", "redis://cache:6379/0,postgresql://a/b"), 2,
         "not a PostgreSQL URL"),
        (runner.invoke(app, ["shards", "plan", "--uri", redis_url, "--to-shards", new[0]]), 2,
         "has none"),
        (cli(primary, old, "verify", "--to-shards", ",".join(new), "--state", state), 2,
         "no state file"),
        (cli(primary, old, "run", "--to-shards", ",".join(new), "--state",
             str(tmp_path / "nowhere" / "x.state")), 2, "does not exist"),
        (cli(primary, old, "run", "--to-shards", ",".join(new), "--state", state, "--yes"), 2,
         "--yes"),
        (cli(primary, old, "plan"), 2, "--to-shards"),
    ]
    for result, code, words in cases:
        assert result.exit_code == code, (words, result.stderr)
        assert words in result.stderr and "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) <= 2, result.stderr
    # a state file of another reshard (another new list) is refused, naming it
    assert cli(primary, old, "run", "--to-shards", ",".join(new), "--state", state, "--apply",
               "--yes").exit_code == 0
    other = cli(primary, old, "verify", "--to-shards", ",".join(new[:3][::-1]), "--state", state)
    assert other.exit_code == 2 and "another pair" in other.stderr
    aborted = cli(primary, old, "abort", "--to-shards", ",".join(new), "--state", state,
                  "--apply", "--yes")
    assert aborted.exit_code == 0 and "removed" in aborted.stderr


def test_run_withholds_an_erased_subjects_older_sessions_and_events(sharded_sql, tmp_path):
    """u-1 of acme is in the ledger (on the primary, which both shard lists share): the
    sessions and events of u-1 that a grow would move stay where they are, named in the
    pass; everyone else's move."""
    from datetime import datetime, timezone

    from backends.transfer.withhold import record_erasure

    four = sharded_sql.make(4)
    old, new = four.shards[:3], four.shards
    writer = deployment("postgres", four.primary, old)
    try:
        sids = seed(writer, 40)
        record_erasure(writer, "u-1", OWNER, erased_at=datetime.now(timezone.utc), receipt=None)
        erased = {s for i, s in enumerate(sids) if i % 5 == 1}
        run = cli(four.primary, old, "run", "--to-shards", ",".join(new), "--state",
                  str(tmp_path / "s.state"), "--apply", "--yes", "-o", "json")
        assert run.exit_code == 0, run.stderr
        passes = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
        withheld = {s for p in passes for s in p["withheld"]}
        moving = set(_moved(sids))
        assert withheld == erased & moving and withheld
        assert sum(p["copied"] for p in passes) == len(moving - erased)
        held_events = {e for p in passes for e in p["withheld_events"]}
        assert len(held_events) >= len(withheld)
    finally:
        writer.close()


@pytest.mark.parametrize("events", [True, False])
def test_sigkill_inside_a_batch_write_then_resume_ends_the_same(sharded_sql, tmp_path, events):
    """Killed right after a batch (of sessions, or of events) landed on the new shards and
    before it was recorded (tests/backends/transfer/killer.py): the resume writes nothing
    twice and loses nothing, events included."""
    four = sharded_sql.make(4)
    old, new = four.shards[:3], four.shards
    writer = deployment("postgres", four.primary, old)
    if events:
        sids = seed(writer, 300)
    else:
        sids = [f"q-{i:04d}" for i in range(300)]
        for i, sid in enumerate(sids):
            writer.commit_turn(sid, b"plain-%d" % i, expected_version=None, owner_subject=OWNER)
    before = snapshot(writer, sids)
    writer.close()
    state = str(tmp_path / "kill.state")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = ["--shards", ",".join(old), "shards", "run", "--uri", four.primary, "--to-shards",
            ",".join(new), "--state", state, "--batch-size", "40", "--apply", "--yes"]
    killed = subprocess.run([sys.executable, "-c",
                             "from tests.backends.transfer.killer import main; main()",
                             "events" if events else "sessions", "1", *args], env=env,
                            capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    again = subprocess.run([sys.executable, "-m", "semvecctl", *args], env=env,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert _count_copied(state) == len(_moved(sids))
    cut = subprocess.run([sys.executable, "-m", "semvecctl", *args[:3], "cutover", *args[4:10],
                          "--quiet-window", "0", "--apply", "--yes"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert cut.returncode == 0, cut.stderr[-2000:]
    after = deployment("postgres", four.primary, new)
    try:
        assert snapshot(after, sids) == before  # every session and event once, none lost
    finally:
        after.close()
