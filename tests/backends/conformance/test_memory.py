"""The suite against correct adapters: the shipped ``memory`` backend and the in-memory
adapter with an event store from tests/support/conformance_doubles.py; plus the runner's
selection, applicability, level and callback behaviour."""

from __future__ import annotations

import pytest

from backends.conformance import (
    GROUP_ORDER,
    ConformanceOptions,
    Level,
    Status,
    plan,
    run_conformance,
    select_cases,
)
from backends.memory import MemoryBackendAdapter
from tests.support.conformance_doubles import EventfulMemoryAdapter
from tests.support.bounds import bounded_by


def test_memory_backend_is_full_with_events_not_applicable():
    report = run_conformance(MemoryBackendAdapter, selected_name="memory")
    assert report.level == Level.FULL, [c.message for c in report.failures]
    statuses = {g.name: g.status for g in report.groups}
    assert statuses == {
        "contract": Status.PASSED,
        "state": Status.PASSED,
        "commit_turn": Status.PASSED,
        "durability": Status.NOT_APPLICABLE,
        "events": Status.NOT_APPLICABLE,
        "concurrency": Status.PASSED,
        "faults": Status.NOT_APPLICABLE,
        "isolation": Status.PASSED,
        "health": Status.PASSED,
        "retrieval": Status.NOT_APPLICABLE,
        "indexes": Status.NOT_APPLICABLE,
        "failover": Status.NOT_APPLICABLE,
    }
    assert "keeps no event log" in report.group("events").reason
    # issue 25: the process, kill and connection cases are not applicable to memory, with
    # the reason (not persistent), even when a child could rebuild it
    for case_id in ("concurrency.processes", "durability.sigkill", "faults.connection"):
        case = report.case(case_id)
        assert case.status == Status.NOT_APPLICABLE and "is_persistent" in case.message, case
    assert report.case("commit_turn.refuses_events_without_event_store").status == Status.PASSED
    # a case that needs an event store is not applicable, never passed
    assert report.case("commit_turn.state_and_events_land_together").status == \
        Status.NOT_APPLICABLE
    # not persistent, no fault seam: the durability cases are not applicable, with reasons
    reopen = report.case("durability.survives_reopen")
    assert reopen.status == Status.NOT_APPLICABLE and "is_persistent is False" in reopen.message
    for case_id in ("durability.fault_after_state", "durability.connection_cut_mid_turn"):
        assert report.case(case_id).status == Status.NOT_APPLICABLE
    assert report.case("state.delete_checks_version").status == Status.PASSED


def test_memory_run_leaves_the_store_empty():
    adapter = MemoryBackendAdapter()
    adapter.state_store().save("someone-else", b"keep", expected_version=None)
    report = run_conformance(adapter)
    assert report.ok
    assert list(adapter.state_store()._rows) == ["someone-else"]
    assert adapter.state_store().load("someone-else")[0] == b"keep"


def test_adapter_with_event_store_passes_every_group_but_retrieval_and_indexes():
    adapter = EventfulMemoryAdapter()
    report = run_conformance(adapter, selected_name="Eventful_Memory")
    assert report.level == Level.FULL, [c.message for c in report.failures]
    assert report.group("events").status == Status.PASSED
    assert report.group("commit_turn").status == Status.PASSED
    assert report.case("commit_turn.refuses_events_without_event_store").status == \
        Status.NOT_APPLICABLE
    for case_id in ("durability.fault_after_state", "durability.connection_cut_mid_turn"):
        assert report.case(case_id).status == Status.PASSED, report.case(case_id).message
    assert adapter.state_store()._rows == {}
    assert adapter.event_store().is_empty()


def test_name_mismatch_fails_contract():
    report = run_conformance(MemoryBackendAdapter, selected_name="redis",
                             only="contract.name_matches_selection")
    result = report.cases[0]
    assert result.status == Status.FAILED
    assert result.expected == "'redis' (folded)" and result.actual == "'memory'"
    assert report.level == Level.FAILED


@pytest.mark.parametrize("selected", ["memory", "MEMORY", " Mem-Ory ", "mem_o.ry"])
def test_name_comparison_is_folded(selected):
    report = run_conformance(MemoryBackendAdapter, selected_name=selected,
                             only="contract.name_matches_selection")
    assert report.cases[0].status == Status.PASSED


def test_without_selected_name_the_name_case_is_not_applicable():
    report = run_conformance(MemoryBackendAdapter, only="contract.name_matches_selection")
    assert report.cases[0].status == Status.NOT_APPLICABLE


def test_instance_instead_of_factory_makes_close_case_not_applicable():
    report = run_conformance(MemoryBackendAdapter(), only="contract.close_is_idempotent")
    assert report.cases[0].status == Status.NOT_APPLICABLE


def test_only_selects_groups_and_cases_and_callback_sees_each():
    seen = []
    report = run_conformance(MemoryBackendAdapter, only="health,state.insert_creates_version_1",
                             on_result=seen.append)
    assert [c.case_id for c in report.cases] == [
        "state.insert_creates_version_1", "health.answers_bool_promptly", "health.reports_up"]
    assert [c.case_id for c in seen] == [c.case_id for c in report.cases]
    assert report.selection == ("health", "state.insert_creates_version_1")
    assert "subset" in report.summary()


def test_unknown_only_is_refused():
    with pytest.raises(ValueError, match="unknown conformance group or case: nope"):
        run_conformance(MemoryBackendAdapter, only="nope")


def test_plan_lists_every_group_in_order():
    groups = [c.group for c in plan()]
    assert list(dict.fromkeys(groups)) == list(GROUP_ORDER)
    assert len({c.case_id for c in select_cases()}) == len(select_cases())


def test_factory_that_raises_errors_every_case():
    def factory():
        raise RuntimeError("cannot connect")

    report = run_conformance(factory, selected_name="x", only="contract")
    assert all(c.status == Status.ERROR for c in report.cases)
    assert "building the adapter raised RuntimeError: cannot connect" in report.cases[0].message
    assert report.level == Level.FAILED


def test_a_raising_step_fails_the_case_naming_the_step():
    class Exploding(MemoryBackendAdapter):
        def state_store(self):
            raise KeyError("boom")

    report = run_conformance(Exploding, only="state.insert_creates_version_1")
    result = report.cases[0]
    assert result.status == Status.FAILED
    assert result.message.startswith("insert: expected success, got raised KeyError: 'boom'")
    assert "cleanup: state_store(): KeyError" in result.message


def test_unexpected_exception_in_case_code_is_an_error_with_location():
    class WrongShape(MemoryBackendAdapter):
        def __init__(self):
            super().__init__()
            self._store.load_full = lambda session_id, **kw: "not a LoadedState"

    report = run_conformance(WrongShape, only="state.load_full_agrees")
    result = report.cases[0]
    assert result.status == Status.ERROR
    assert "AttributeError" in result.message and "load_full_agrees" in result.message


def test_hanging_health_check_fails_within_the_bound():
    import threading

    release = threading.Event()

    class Hanging(MemoryBackendAdapter):
        def check_health(self):
            release.wait(600)
            return True

    try:
        report = run_conformance(Hanging, only="health.answers_bool_promptly",
                                 options=ConformanceOptions(health_timeout=0.2))
    finally:
        release.set()
    result = report.cases[0]
    assert result.status == Status.FAILED
    assert result.expected == "an answer within 0.2s"
    assert result.duration < bounded_by(0.2)  # unbounded: 600 s


def test_ids_carry_the_run_prefix():
    class Recording(MemoryBackendAdapter):
        pass

    adapter = Recording()
    seen: list[str] = []
    store = adapter.state_store()
    original = store.save

    def save(session_id, *args, **kwargs):
        seen.append(session_id)
        return original(session_id, *args, **kwargs)

    store.save = save
    report = run_conformance(adapter, only="state", prefix="semvec-conf-test0000-")
    assert report.ok
    assert seen and all(s.startswith("semvec-conf-test0000-") for s in seen)


def test_a_hung_case_is_abandoned_as_an_error_and_the_run_goes_on():
    import threading

    release = threading.Event()

    class HangsOnInsert(MemoryBackendAdapter):
        def commit_turn(self, *args, **kwargs):
            release.wait(10)
            return super().commit_turn(*args, **kwargs)

    try:
        report = run_conformance(HangsOnInsert, only="commit_turn.insert_and_update,health",
                                 options=ConformanceOptions(case_timeout=0.3))
    finally:
        release.set()
    hung = report.case("commit_turn.insert_and_update")
    assert hung.status == Status.ERROR
    assert "did not finish within 0.3s" in hung.message
    assert report.group("health").status == Status.PASSED


def test_report_carries_the_capability_report():
    report = run_conformance(EventfulMemoryAdapter, only="health")
    caps = report.capabilities
    assert caps["is_persistent"] is False
    assert caps["event_store"] == "InMemoryEventStore"
    assert caps["retrieval_backend"] is None
    assert "SessionEnumerator" in caps["seams"] and "IndexManager" not in caps["seams"]
    assert caps["cleanup_hooks"] == ["purge_user"]
    assert caps["owner_convention"] == "owner_subject" and caps["event_surface"] == "ours"
    assert caps["fault_points"] == ["turn.after_state", "turn.cut_connection"]
    assert caps["idempotent_retries"] is True and caps["assigns_sequences"] is True
    assert report.to_dict()["capabilities"] == caps


def test_sequence_case_not_applicable_when_the_store_assigns_none():
    """A store that declares assigns_sequences = False (the engine's SQL layout) is not
    failed for sequences it never promised; the reason is given."""
    from tests.support.conformance_doubles import InMemoryEventStore

    class NoSequences(InMemoryEventStore):
        assigns_sequences = False

    class Adapter(EventfulMemoryAdapter):
        def __init__(self):
            super().__init__()
            self._events = NoSequences()

    result = run_conformance(Adapter, only="events.sequence_gap_free").cases[0]
    assert result.status == Status.NOT_APPLICABLE
    assert "assigns_sequences = False" in result.message


def test_scope_only_store_skips_unowned_only_reads_instead_of_failing():
    """An adapter that speaks only scope= is asked for no 'unowned rows only' read; the
    skipped steps are named in the (passing) case's message."""
    from backends.memory import MemoryStateStore

    class ScopeOnlyStore:
        def __init__(self):
            self._inner = MemoryStateStore()

        def save(self, session_id, blob, *, expected_version, pending_message=None, scope=None):
            return self._inner.save(session_id, blob, expected_version=expected_version,
                                    pending_message=pending_message, scope=scope)

        def _read(name):
            def read(self, session_id, *, scope=None):
                return getattr(self._inner, name)(session_id, scope=scope)
            read.__name__ = name
            return read

        load, load_full, delete = _read("load"), _read("load_full"), _read("delete")

        def load_owner(self, session_id):
            return self._inner.load_owner(session_id)

        def current_version(self, session_id):
            return self._inner.current_version(session_id)

    class ScopeOnly(MemoryBackendAdapter):
        def __init__(self):
            super().__init__()
            self._store = ScopeOnlyStore()

        def state_store(self):
            return self._store

        def commit_turn(self, session_id, blob, *, expected_version, pending_message=None,
                        events=None, scope=None):
            if events:
                raise ValueError("no event log")
            return self._store.save(session_id, blob, expected_version=expected_version,
                                    pending_message=pending_message, scope=scope)

    report = run_conformance(ScopeOnly, only="state,commit_turn")
    assert report.level == Level.FULL, [c.message for c in report.failures]
    reads = report.case("state.owner_filter_reads")
    assert reads.status == Status.PASSED
    assert "no 'unowned rows only' read" in reads.message
    assert report.capabilities["owner_convention"] == "scope"


def test_an_interrupted_case_still_removes_what_it_created():
    """Ctrl-C or SIGTERM reach the main thread while it waits on a case: the case's
    cleanup runs before the interruption goes on (nothing of the run is left behind)."""
    import signal
    import threading

    from backends.conformance.catalogue import Case
    from backends.conformance.context import ConformanceOptions
    from backends.conformance.runner import run_case

    adapter = MemoryBackendAdapter()
    written = threading.Event()
    release = threading.Event()

    def slow_case(ctx):
        sid = ctx.session()
        ctx.store.save(sid, b"x", expected_version=None)
        written.set()
        release.wait(10)

    def interrupt(_signum, _frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGUSR1, interrupt)
    timer = threading.Thread(target=lambda: written.wait(10) and signal.pthread_kill(
        threading.main_thread().ident, signal.SIGUSR1))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_case(adapter, Case("state", "slow", slow_case, "a case that blocks"),
                     prefix="semvec-conf-intr-", options=ConformanceOptions())
    finally:
        release.set()
        timer.join()
        signal.signal(signal.SIGUSR1, previous)
    assert list(adapter.iter_sessions()) == []
