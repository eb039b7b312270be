"""The write-behind of a live migration's passes (``backends.migrate.writebehind``):
a batch is recorded on the caller's thread, in order, before the next batch is written;
a write's error reaches the caller; a caller that fails lets the running write end and
records nothing of it."""

from __future__ import annotations

import threading
import time

import pytest

from backends.migrate.writebehind import WriteBehind


def test_each_batch_is_recorded_on_the_callers_thread_before_the_next_is_written():
    log: list[str] = []
    caller = threading.get_ident()

    def write(n: int):
        def run() -> int:
            log.append(f"write {n}")
            time.sleep(0.01)
            return n
        return run

    def done(n: int) -> None:
        assert threading.get_ident() == caller
        log.append(f"record {n}")

    with WriteBehind() as behind:
        for n in range(3):
            log.append(f"announce {n}")
            behind.push([f"s{n}"], write(n), done)
    # an announcement may overlap the write before it; a write never precedes the
    # record of the batch before it
    assert [e for e in log if not e.startswith("announce")] == [
        "write 0", "record 0", "write 1", "record 1", "write 2", "record 2"]
    assert log.index("announce 1") < log.index("write 1")


def test_touches_names_the_running_writes_sessions_only():
    release = threading.Event()
    behind: WriteBehind[None] = WriteBehind()
    with behind:
        behind.push(["a", "b"], release.wait, lambda _: None)
        assert behind.touches(["b", "c"]) and not behind.touches(["c"])
        release.set()
        behind.settle()
        assert not behind.touches(["a"])


def test_a_failed_write_is_raised_at_the_next_settle_and_never_recorded():
    recorded = []

    def fails() -> None:
        raise RuntimeError("server gone")

    with pytest.raises(RuntimeError, match="server gone"):
        with WriteBehind() as behind:
            behind.push(["a"], fails, recorded.append)
            behind.push(["b"], lambda: None, recorded.append)  # settles "a" first: raises
    assert recorded == []


def test_a_failing_caller_waits_for_the_running_write_and_records_nothing():
    ended, recorded = threading.Event(), []

    def slow() -> None:
        time.sleep(0.05)
        ended.set()

    with pytest.raises(KeyError):
        with WriteBehind() as behind:
            behind.push(["a"], slow, recorded.append)
            raise KeyError("announcing the next batch failed")
    assert ended.is_set() and recorded == []
