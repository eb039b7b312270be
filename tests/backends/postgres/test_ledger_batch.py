"""The SQL ledger merges a batch of entries in one statement (a carried ledger of
thousands of entries is one round trip, not one per entry) by the one rule of
``backends.contract.ledger.merged``, and two concurrent merges of one subject keep both
unions. On the suite's real PostgreSQL; statements counted on a counting connection."""

from __future__ import annotations

import contextlib
import threading
from datetime import datetime, timedelta, timezone

import pytest

from backends.contract import LedgerEntry

pytestmark = pytest.mark.postgres

T = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)


class _Counting:
    """A connection that counts the statements sent through it."""

    def __init__(self, conn, seen):
        self._conn, self._seen = conn, seen

    def execute(self, *args, **kwargs):
        self._seen.append(args[0])
        return self._conn.execute(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._conn, name)


def _counting(ledger, seen):
    real = ledger._db.connection

    @contextlib.contextmanager
    def connection(**kwargs):
        with real(**kwargs) as conn:
            yield _Counting(conn, seen)

    ledger._db.connection = connection


def test_a_batch_of_2000_entries_is_one_statement_and_merges_by_the_rule(postgres_adapter_factory):
    ledger = postgres_adapter_factory().erasure_ledger()
    ledger.add_entries([LedgerEntry("k", "held", T, "r-old", ("s2",))])  # tables made
    seen: list[str] = []
    _counting(ledger, seen)
    batch = [LedgerEntry("k", f"d{i:05}", T, f"r{i}", (f"s{i}",)) for i in range(2000)]
    batch.append(LedgerEntry("k", "held", T + timedelta(hours=1), "r-new", ("s1",)))
    batch.append(LedgerEntry("k", "d00007", T - timedelta(days=1), "r-older", ("s0",)))
    ledger.add_entries(batch)
    assert len(seen) == 1, seen
    entries = {e.digest: e for e in ledger.entries()}
    assert len(entries) == 2001
    held = entries["held"]
    assert (held.erased_at, held.receipt, held.sessions) == (T + timedelta(hours=1), "r-new",
                                                            ("s1", "s2"))
    assert held.seq == 1  # a held entry keeps its position
    assert entries["d00007"].sessions == ("s0", "s7") and entries["d00007"].receipt == "r7"
    positions = [e.seq for e in entries.values() if e.digest != "held"]
    assert len(set(positions)) == 2000 and min(positions) > 1
    seen.clear()
    ledger.add_entries([LedgerEntry("k", "held", T, "r-x", ("s1",))])  # nothing new
    assert [e.receipt for e in ledger.entries() if e.digest == "held"] == ["r-new"]


def test_concurrent_merges_of_one_subject_keep_every_session_hash(postgres_adapter_factory):
    ledger = postgres_adapter_factory().erasure_ledger()
    ledger.add_entries([LedgerEntry("k", "subject", T, None, ())])
    start = threading.Barrier(8)

    def erase(i: int) -> None:
        start.wait()
        for j in range(10):
            ledger.add_entries([LedgerEntry("k", "subject", T, None, (f"s{i}-{j}",))])

    threads = [threading.Thread(target=erase, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (entry,) = ledger.entries()
    assert entry.sessions == tuple(sorted(f"s{i}-{j}" for i in range(8) for j in range(10)))
