"""The erasure ledger's rules (backends.contract.ledger, used through backends.ops.ledger)
on the memory backend, whose ledger lives as long as the process: the merge every storage
applies, the state an archive names and who holds it (a store rolled back to before the
state does not), the clock margin, the session hashes, the engine certificate's signed
bytes. The same rules on the real stores: tests/cli/erasures and tests/cli/doctor."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from backends.contract import LedgerEntry, MemoryEvent
from backends.contract.ledger import (CLOCK_MARGIN, LedgerState, contains, holds_ledger, merged,
                                      read_clock, session_digest, state_of)
from backends.memory import MemoryBackendAdapter
from backends.ops import ledger as ops_ledger
from backends.transfer.withhold import subject_digest

T = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)


def test_merge_keeps_the_later_time_the_union_of_sessions_and_the_position():
    held = LedgerEntry("k", "d", T, "sha256:a", ("s1",), 4)
    assert merged(held, held._replace(seq=9)) is None  # nothing new: nothing written
    earlier = merged(held, LedgerEntry("k", "d", T - timedelta(days=1), "sha256:b", ("s2",)))
    assert earlier == LedgerEntry("k", "d", T, "sha256:a", ("s1", "s2"), 4)
    later = merged(held, LedgerEntry("k", "d", T + timedelta(days=1), "sha256:c"))
    assert later == LedgerEntry("k", "d", T + timedelta(days=1), "sha256:c", ("s1",), 4)
    assert merged(None, LedgerEntry("k", "d", T, None, ("b", "a", "a"), 7)).seq == 0


def test_a_state_is_held_by_its_store_and_by_no_rolled_back_copy():
    adapter = MemoryBackendAdapter()
    ops_ledger.record_subject(adapter, "u1", "acme", sessions=["s1"], receipt="r1")
    identity = ops_ledger.store_identity(adapter).identity
    state = ops_ledger.ledger_state(adapter)
    assert (state.entries, state.seq) == (1, 1)
    ops_ledger.record_subject(adapter, "u2", "acme", sessions=[], receipt="r2")
    ops_ledger.record_subject(adapter, "u1", "acme", sessions=["s9"], receipt="r3")  # again
    assert holds_ledger(adapter, identity, state)  # later erasures keep it held
    newer = ops_ledger.ledger_state(adapter)
    assert (newer.entries, newer.seq) == (2, 2)
    entries = adapter.erasure_ledger().entries()
    # a copy rolled back to before the newer state: the same identity, one entry fewer
    rolled = [e for e in entries if e.seq <= 1]
    assert contains(rolled, state) and not contains(rolled, newer)
    assert not holds_ledger(adapter, "semvec-store-other", state)
    assert not holds_ledger(MemoryBackendAdapter(), identity, state)
    assert not holds_ledger(adapter, identity, None)
    assert LedgerState.from_dict(newer.as_dict()) == newer
    for bad in ({}, {"entries": -1, "seq": 0, "digest": "0" * 64},
                {"entries": True, "seq": 0, "digest": "0" * 64},
                {"entries": 1, "seq": 1, "digest": "short"}):
        with pytest.raises(ValueError):
            LedgerState.from_dict(bad)
    assert state_of([]) == LedgerState(0, 0, state_of([]).digest)


def test_sessions_are_hashed_apart_from_subjects():
    secret = b"\x01" * 32
    assert session_digest(secret, "s1") != session_digest(secret, "s2")
    assert session_digest(secret, "s1") != session_digest(b"\x02" * 32, "s1")
    assert session_digest(secret, "acme") != subject_digest(secret, "acme", None)


def test_the_margin_counts_an_event_just_after_the_erasure_as_older():
    adapter = MemoryBackendAdapter()
    entry = ops_ledger.record_subject(adapter, "u1", "acme", sessions=[], receipt=None)
    at = entry.erased_at

    def event(after: timedelta) -> MemoryEvent:
        return MemoryEvent(event_id="e", user_id="u1", content="x", created_at=at + after,
                           owner_subject="acme")

    margin = ops_ledger.margin_withholding(adapter)
    assert margin.withholds_event(event(CLOCK_MARGIN - timedelta(seconds=1)))
    assert not margin.withholds_event(event(CLOCK_MARGIN + timedelta(seconds=1)))
    assert CLOCK_MARGIN == timedelta(seconds=5)


def test_the_clock_reading_says_how_far_the_local_clock_is():
    class Ahead:
        def now(self) -> datetime:
            return datetime.now(timezone.utc) + timedelta(seconds=60)

    reading = read_clock(Ahead())
    assert timedelta(seconds=59) < reading.skew < timedelta(seconds=61)
    record = ops_ledger.clock_record(reading)
    assert record["source"] == "store" and "more than the margin" in record["note"]
    assert ops_ledger.clock_record(None)["source"] == "local"


def test_the_certificate_is_signed_over_its_canonical_json_not_ascii_escaped():
    body = {"user_id": "zoë", "event_count": 2, "deleted_at": T.isoformat(),
            "reason": "user_request", "issuer": "acme", "signature_b64": "eA=="}
    assert ops_ledger.certificate_message(body) == (
        '{"deleted_at":"2026-11-01T12:00:00+00:00","event_count":2,"issuer":"acme",'
        '"reason":"user_request","user_id":"zoë"}').encode("utf-8")
