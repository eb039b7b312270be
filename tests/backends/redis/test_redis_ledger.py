"""The Redis ledger merges each entry inside one script on the entries hash: concurrent
erasures of one subject keep the whole union of their session hashes, and the merge
follows the one rule (``backends.contract.ledger.merged``). On the suite's real Redis."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest

from backends.contract import LedgerEntry

pytestmark = pytest.mark.redis

T = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)


def _ledger(url: str):
    from backends.redis.adapter import RedisBackendAdapter

    return RedisBackendAdapter(url).erasure_ledger()


def test_concurrent_merges_of_one_subject_keep_every_session_hash(redis_url):
    ledger = _ledger(redis_url)
    ledger.add_entries([LedgerEntry("k", "subject", T, None, ())])
    start = threading.Barrier(8)

    def erase(i: int) -> None:
        mine = _ledger(redis_url)  # a client (an erasing process) of its own
        start.wait()
        for j in range(25):
            mine.add_entries([LedgerEntry("k", "subject", T, None, (f"s{i}-{j}",))])

    threads = [threading.Thread(target=erase, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (entry,) = ledger.entries()
    assert entry.sessions == tuple(sorted(f"s{i}-{j}" for i in range(8) for j in range(25)))
    assert entry.seq == 1


def test_the_merge_rule_holds_in_the_script(redis_url):
    ledger = _ledger(redis_url)
    ledger.add_entries([LedgerEntry("k", "a", T, "r1", ("s2",)),
                        LedgerEntry("k", "b", T.replace(microsecond=500), None, ())])
    ledger.add_entries([LedgerEntry("k", "a", T + timedelta(microseconds=1), "r2", ("s1",)),
                        LedgerEntry("k", "b", T, "rb", ("s9",)),  # earlier: time kept
                        LedgerEntry("k", "c", T, None, ("x", "x"))])
    found = {e.digest: e for e in ledger.entries()}
    assert found["a"] == LedgerEntry("k", "a", T + timedelta(microseconds=1), "r2",
                                     ("s1", "s2"), found["a"].seq)
    assert (found["b"].erased_at, found["b"].receipt, found["b"].sessions) == (
        T.replace(microsecond=500), None, ("s9",))
    assert found["c"].sessions == ("x",)
    assert len({e.seq for e in found.values()}) == 3 and found["a"].seq < found["c"].seq
