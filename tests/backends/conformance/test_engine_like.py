"""Engine-like behaviour where it matters, in-process (doubles in
tests/support/conformance_doubles.py; no server): an event store that assigns no
sequence and declares nothing (the engine's SQL layout, with our surface and with the
engine's) is certified from what its events read back, not failed for order or sequence;
a turn that leaves an unindexed event behind (the engine's non-atomic commit) is failed
by its case and the run still leaves the store empty."""

from __future__ import annotations

import pytest

from backends.conformance import Level, Status, run_conformance
from tests.support import conformance_doubles as doubles

SEQUENCE_FREE = ("events.delete_older_than_is_strict", "events.tenants_isolated",
                 "events.record_fidelity", "commit_turn.state_and_events_land_together",
                 "durability.fault_after_state", "durability.connection_cut_mid_turn")


@pytest.mark.parametrize("factory", [doubles.SequencelessAdapter,
                                     doubles.EngineSqlStyleAdapter])
def test_store_without_sequences_is_detected_and_not_failed(factory):
    adapter = factory()
    report = run_conformance(adapter)
    assert report.level == Level.FULL, [f"{c.case_id}: {c.message}" for c in report.failures]
    gap = report.case("events.sequence_gap_free")
    assert gap.status == Status.NOT_APPLICABLE
    assert "events read back without a sequence" in gap.message
    assert "sequence 0" in gap.message
    for case_id in SEQUENCE_FREE:
        assert report.case(case_id).status == Status.PASSED, (case_id,
                                                              report.case(case_id).message)
    assert "not compared" in report.case("events.record_fidelity").message
    assert adapter.event_store().is_empty()


def test_engine_surface_without_sequences_passes_without_order_or_counter_checks():
    report = run_conformance(doubles.EngineSqlStyleAdapter, only="events.engine_surface")
    result = report.cases[0]
    assert result.status == Status.PASSED, result.message


class _ReversedListing(doubles.InMemoryEventStore):
    """Assigns sequences but lists them newest first: the order check must still bite."""

    def list_events(self, user_id, **kwargs):
        return list(reversed(super().list_events(user_id, **kwargs)))


class ReversedListingAdapter(doubles.EventfulMemoryAdapter):
    def __init__(self, uri=None):
        super().__init__(uri)
        self._events = _ReversedListing()


def test_a_store_that_assigns_sequences_is_still_held_to_their_order():
    report = run_conformance(ReversedListingAdapter, only="events.sequence_gap_free")
    result = report.cases[0]
    assert result.status == Status.FAILED
    assert "event ids in listed order" in result.message


def test_gappy_sequences_are_still_failed():
    result = run_conformance(doubles.GappyEventsAdapter,
                             only="events.sequence_gap_free").cases[0]
    assert result.status == Status.FAILED


def test_unindexed_event_of_a_failed_turn_is_removed_by_its_id():
    adapter = doubles.UnindexedEventTurnAdapter()
    report = run_conformance(adapter, only="durability.fault_after_state")
    result = report.cases[0]
    assert result.status == Status.FAILED
    assert "cleanup" not in result.message, result.message
    assert adapter.event_store().is_empty(), adapter.event_store()._by_id
    assert adapter.state_store()._rows == {}


def test_an_event_the_store_cannot_delete_by_id_is_reported_not_hidden():
    """Without a delete-by-id call the stray event stays; the run says so (cleanup)."""

    class NoDeleteById(doubles.InMemoryEventStore):
        delete_event = None

    class Adapter(doubles.UnindexedEventTurnAdapter):
        def __init__(self, uri=None):
            super().__init__(uri)
            self._events = NoDeleteById()

    result = run_conformance(Adapter, only="durability.fault_after_state").cases[0]
    assert result.status == Status.FAILED
    assert "cleanup: removing event" in result.message
    assert "deletes no single event by id" in result.message


def test_cleanup_never_deletes_an_event_of_another_user_by_id():
    """An id the run remembers that names someone else's event is left alone."""
    from backends.conformance.cleanup import remove_run
    from backends.contract import MemoryEvent

    adapter = doubles.EventfulMemoryAdapter()
    foreign = adapter.event_store().append(MemoryEvent(
        event_id="6f1c5f43-7a7e-4c41-9d55-7f8f0b1a2c3d", user_id="someone-else",
        content="not the run's"))
    problems = remove_run(adapter, "semvec-conf-00000000-", users=["semvec-conf-00000000-u"],
                          event_ids=[foreign.event_id])
    assert problems == []
    assert adapter.event_store().get_event(foreign.event_id) is not None


def test_naive_created_at_reads_as_utc_whatever_the_local_zone(monkeypatch):
    """The engine's SQL layout reads created_at back naive (UTC wall time): on a machine
    whose local zone is not UTC, record fidelity must still pass."""
    import time
    from dataclasses import replace

    class NaiveTimes(doubles.SequencelessEventStore):
        def list_events(self, user_id, **kwargs):
            return [replace(e, created_at=e.created_at.replace(tzinfo=None))
                    for e in super().list_events(user_id, **kwargs)]

        def get_event(self, event_id, **kwargs):
            found = super().get_event(event_id, **kwargs)
            return None if found is None else replace(
                found, created_at=found.created_at.replace(tzinfo=None))

    class Adapter(doubles.EventfulMemoryAdapter):
        def __init__(self, uri=None):
            super().__init__(uri)
            self._events = NaiveTimes()

    if not hasattr(time, "tzset"):
        pytest.skip("time.tzset is not available on this platform")
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        result = run_conformance(Adapter, only="events.record_fidelity").cases[0]
    finally:
        monkeypatch.undo()
        time.tzset()
    assert result.status == Status.PASSED, result.message
