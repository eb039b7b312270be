"""#23: interruption counts are exact. A signal that lands while a delete waits for the
server's reply used to end the command with the delete done and not counted, so "the
prune stopped after deleting N" said one less than was deleted. Signals are now taken
between units of work (:func:`semvecctl.interrupts.steps`)."""

from __future__ import annotations

import os
import re
import signal

import pytest

from semvecctl.interrupts import Interrupted, deferred, signals_raise, steps
from tests.cli.app.test_interrupts import interrupted_import, spawn, wait_for


def _units(done: list[int], n: int, signal_at: int, signum: int = signal.SIGINT):
    """Each unit: the 'server' does the work (the signal arrives meanwhile), then the
    count is kept, then the unit is yielded."""
    for i in range(n):
        if i == signal_at:
            os.kill(os.getpid(), signum)  # delivered while the unit is in flight
        done.append(i)
        yield i


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_steps_take_the_signal_after_the_unit_in_flight(signum):
    done: list[int] = []
    seen: list[int] = []
    with pytest.raises(Interrupted) as stopped, signals_raise():
        for item in steps(_units(done, 10, 3, signum)):
            seen.append(item)
    assert stopped.value.signum == signum
    assert done == [0, 1, 2, 3] and seen == [0, 1, 2, 3]  # unit 3 done, counted and shown


def test_without_steps_the_unit_in_flight_is_lost_from_the_count():
    """What the old loop did (the reason for steps): the count misses the unit."""
    done: list[int] = []
    with pytest.raises(Interrupted), signals_raise():
        for _ in _units(done, 10, 3):
            pass
    assert done == [0, 1, 2]


def test_a_second_signal_inside_a_deferred_block_raises_at_once():
    reached = []
    with pytest.raises(Interrupted), signals_raise():
        with deferred():
            os.kill(os.getpid(), signal.SIGINT)
            reached.append("held")
            os.kill(os.getpid(), signal.SIGINT)
            reached.append("not reached")
    assert reached == ["held"]


def test_deferred_outside_signals_raise_changes_nothing():
    with deferred():
        pass
    assert list(steps(iter([1, 2]))) == [1, 2]


TTL = 400_000
COUNT = 4000


@pytest.mark.redis
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("attempt", range(3))
def test_prune_count_after_a_signal_is_exact(redis_server, redis_url, tmp_path, signum, attempt):
    client = redis_server.client()
    pipe = client.pipeline(transaction=False)
    for n in range(COUNT):  # the engine's layout, last written two days ago
        key = f"semvec:state:cnt-{n:05d}"
        pipe.hset(key, mapping={"blob": b"x" * 64, "version": "1", "owner": "",
                                "drift_exempt": "0", "pending": ""})
        pipe.expire(key, TTL - 2 * 86400)
    pipe.execute()
    proc = spawn("sessions", "prune", "--uri", redis_url, "--idle-for", "1d", "--apply",
                 "--assume-ttl", f"{TTL}s", "--yes", "-o", "jsonl")
    try:
        wait_for(lambda: proc.poll() is not None or client.dbsize() < COUNT - 100,
                 timeout=120, what="deletes")
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143}[signum], err
    said = re.search(r"the prune stopped after deleting (\d+) session\(s\)", err)
    assert said, err
    rows = sum(1 for line in out.splitlines() if '"deleted"' in line)
    gone = COUNT - client.dbsize()
    assert int(said.group(1)) == gone, (said.group(0), gone, rows)
    assert rows == gone


@pytest.mark.redis
@pytest.mark.parametrize("attempt", range(3))
def test_import_count_after_a_signal_is_exact(redis_server, redis_url, tmp_path, attempt):
    code, err, client = interrupted_import(redis_server, redis_url, tmp_path, COUNT, 100)
    assert code == 130, err
    said = re.search(r"the import stopped after (\d+) session\(s\) were written", err)
    assert said, err
    assert int(said.group(1)) == client.dbsize()


def test_an_interrupted_export_says_how_far_it_got(redis_url, tmp_path):
    """SIGINT during ``sessions export``: besides "interrupted", how many sessions of how
    many were read, and that nothing was left at --out (as ``import`` says its count)."""
    import time

    from tests.cli.app.test_interrupts import _seed

    _seed(redis_url, 6000)
    target = tmp_path / "out.jsonl"
    proc = spawn("sessions", "export", "--uri", redis_url, "--out", str(target),
                 "--batch-size", "1")
    try:
        wait_for(lambda: any(p.name.endswith(".partial") for p in tmp_path.iterdir())
                 or proc.poll() is not None, what="the .partial file")
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    said = re.search(r"SIGINT: the export stopped after reading (\d+) of 6000 session\(s\); "
                     r"nothing was written to (\S+)\.", err)
    assert said, err
    assert 0 < int(said.group(1)) < 6000 and said.group(2) == str(target)
    assert not target.exists() and "Traceback" not in err


def test_an_interrupted_events_export_says_how_far_it_got(capsys):
    """``events export`` shares the export's report: the events its progress counted, of
    how many, and that nothing was left (its stdout is staged: nothing was sent either)."""
    from semvecctl.application import current, start
    from semvecctl.commands.sessions_transfer import said_export_interrupted

    start()
    out = current().output
    with pytest.raises(Interrupted), signals_raise():
        with said_export_interrupted(40, "stdout", label="exporting events", what="event(s)",
                                     staged=True):
            for _ in out.progress(range(40), total=40, label="exporting events"):
                if out.progress_tasks["exporting events"].count == 17:
                    os.kill(os.getpid(), signal.SIGINT)
    err = capsys.readouterr().err
    assert "SIGINT: the export stopped after reading 17 of 40 event(s); nothing was written " \
           "to stdout. Rerun it to export" in err, err
