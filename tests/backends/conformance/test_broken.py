"""Each deliberately broken adapter must fail the suite, with the case that names its bug.

The doubles live in tests/support/conformance_doubles.py; each breaks exactly one rule.
"""

from __future__ import annotations

import pytest

from backends.conformance import Level, Status, run_conformance
from tests.support import conformance_doubles as doubles


def _failed(report) -> dict[str, object]:
    return {c.case_id: c for c in report.cases if c.status in (Status.FAILED, Status.ERROR)}


# (adapter, the case that must fail, a fragment of what it must report, level)
BROKEN = [
    pytest.param(doubles.StaleReturnsAdapter, "state.stale_version_conflicts",
                 "expected StateVersionConflict, got returned 2", Level.FAILED,
                 id="returns-on-stale-version"),
    pytest.param(doubles.OverwritingInsertAdapter, "state.insert_never_overwrites",
                 "second insert of the same session: expected StateVersionConflict, got returned 1",
                 Level.FAILED, id="overwrites-on-insert"),
    pytest.param(doubles.DroppingEventsAdapter, "commit_turn.state_and_events_land_together",
                 "events listed after the turn", Level.FAILED, id="drops-events"),
    pytest.param(doubles.SilentMemoryAdapter, "commit_turn.refuses_events_without_event_store",
                 "expected an exception (nothing written), got returned 2", Level.FAILED,
                 id="drops-events-without-event-store"),
    pytest.param(doubles.NoOwnerCheckAdapter, "commit_turn.owner_check",
                 "commit_turn naming another owner on the right version: expected "
                 "StateVersionConflict, got returned 2", Level.FAILED,
                 id="commit-turn-skips-owner-check"),
    pytest.param(doubles.StateFirstAdapter, "commit_turn.malformed_event_changes_nothing",
                 "state after the refused turn", Level.FAILED, id="state-before-event-failure"),
    pytest.param(doubles.RefusesAfterWritingAdapter,
                 "commit_turn.state_and_events_land_together",
                 "state after the deployment refused the turn", Level.FAILED,
                 id="refuses-event-turn-after-writing-state"),
    pytest.param(doubles.AnonymousAsNoneAdapter, "state.anonymous_owner_is_an_owner",
                 "stored owner of a row saved by '__anonymous__'", Level.FAILED,
                 id="anonymous-stored-as-no-owner"),
    pytest.param(doubles.RacyAdapter, "concurrency.racing_saves",
                 "acknowledged to several writers", Level.FAILED, id="racy-compare-and-set"),
    pytest.param(doubles.FreshStoreAdapter, "contract.state_store_same_instance",
                 "expected the same instance", Level.FAILED, id="fresh-store-per-call"),
    pytest.param(doubles.PropertyPersistenceAdapter, "contract.is_persistent_class_bool",
                 "expected a bool, got property", Level.FAILED, id="is-persistent-property"),
    pytest.param(doubles.RaisingHealthAdapter, "health.answers_bool_promptly",
                 "expected no exception, got raised ConnectionError: store down", Level.FAILED,
                 id="health-raises"),
    pytest.param(doubles.TruthyHealthAdapter, "health.answers_bool_promptly",
                 "expected a bool, got int 1", Level.FAILED, id="health-returns-int"),
    pytest.param(doubles.BoolVersionAdapter, "contract.commit_turn_returns_int",
                 "expected int 1, got bool True", Level.FAILED, id="commit-turn-returns-bool"),
    pytest.param(doubles.StickyDeleteAdapter, "state.owner_filter_deletes",
                 "owned row after its owner deleted it", Level.FAILED, id="delete-deletes-nothing"),
    pytest.param(doubles.IgnoresOwnerFilterAdapter, "state.owner_filter_reads",
                 "load_full on the owned row with the owner filter None", Level.FAILED,
                 id="load-full-ignores-owner-filter"),
    pytest.param(doubles.GappyEventsAdapter, "events.sequence_gap_free",
                 "sequence returned by append after three events", Level.PARTIAL,
                 id="sequence-gap-after-refused-turn"),
    pytest.param(doubles.InclusiveDeleteAdapter, "events.delete_older_than_is_strict",
                 "count deleted by a cutoff equal to the second event's time", Level.PARTIAL,
                 id="inclusive-delete-older-than"),
    pytest.param(doubles.LosesStateOnReopenAdapter, "durability.survives_reopen",
                 "after close and reopen: expected", Level.FAILED, id="loses-state-on-reopen"),
    pytest.param(doubles.HalfWritingTurnAdapter, "durability.fault_after_state",
                 "state after the faulted turn", Level.FAILED, id="half-writes-a-turn"),
    pytest.param(doubles.ClaimsIdempotenceAdapter, "state.identical_retry_is_idempotent",
                 "retried identical insert", Level.FAILED, id="claims-idempotent-retries"),
    pytest.param(doubles.IgnoresDeleteVersionAdapter, "state.delete_checks_version",
                 "delete naming the stale version 1: expected StateVersionConflict",
                 Level.FAILED, id="delete-ignores-expected-version"),
    pytest.param(doubles.LimitBeforeFilterAdapter, "events.limit_after_owner_filter",
                 "tenant a's first two events among tenant b's", Level.PARTIAL,
                 id="limit-before-owner-filter"),
]


@pytest.mark.parametrize("adapter_cls, case_id, fragment, level", BROKEN)
def test_broken_adapter_fails_the_named_case(adapter_cls, case_id, fragment, level):
    report = run_conformance(adapter_cls)
    failed = _failed(report)
    assert case_id in failed, f"{case_id} passed; failures: {sorted(failed)}"
    result = failed[case_id]
    assert result.status == Status.FAILED, result.message
    assert fragment in result.message, result.message
    assert result.expected and result.actual is not None
    assert report.level == level
    assert not report.ok


def test_stale_return_names_expected_and_actual():
    result = run_conformance(doubles.StaleReturnsAdapter,
                             only="state.stale_version_conflicts").cases[0]
    assert result.expected == "StateVersionConflict"
    assert result.actual == "returned 2"


def test_state_first_adapter_also_leaks_the_good_event():
    """The adapter that writes before failing is caught on the inserting turn too."""
    report = run_conformance(doubles.StateFirstAdapter,
                             only="commit_turn.malformed_event_changes_nothing")
    assert report.cases[0].status == Status.FAILED
    assert "state after the refused turn" in report.cases[0].message


def test_no_owner_check_passes_save_rules_but_fails_commit_turn():
    """The owner bug is on commit_turn only: the state group's own takeover case passes."""
    report = run_conformance(doubles.NoOwnerCheckAdapter, only=["state", "commit_turn"])
    assert report.case("state.owner_takeover_refused").status == Status.PASSED
    assert report.case("commit_turn.owner_check").status == Status.FAILED
    assert report.group("commit_turn").status == Status.FAILED


def test_broken_adapter_failures_leave_nothing_behind():
    """Even when cases fail mid-way, cleanup removes every session and event they made."""
    adapter = doubles.StateFirstAdapter()
    report = run_conformance(adapter)
    assert not report.ok
    assert adapter.state_store()._rows == {}
    assert adapter.event_store().is_empty()


def test_sticky_delete_turns_cleanup_into_an_error():
    report = run_conformance(doubles.StickyDeleteAdapter, only="state.insert_creates_version_1")
    result = report.cases[0]
    assert result.status == Status.ERROR
    assert "still exists after delete" in result.message


def test_deployment_refusing_event_turns_up_front_is_not_applicable_not_failed():
    """Refusing (UnsupportedOperation, nothing written) is the honest answer of a store
    without transactions: the event-turn cases are not applicable, the rest must pass."""
    report = run_conformance(doubles.RefusesEventTurnsAdapter)
    assert report.level == Level.FULL, [c.message for c in report.failures]
    na = report.case("commit_turn.state_and_events_land_together")
    assert na.status == Status.NOT_APPLICABLE
    assert "refuses turns with events" in na.message
    assert report.case("events.sequence_gap_free").status == Status.NOT_APPLICABLE
    assert report.case("events.delete_older_than_is_strict").status == Status.PASSED
    assert report.case("commit_turn.owner_check").status == Status.PASSED


def test_half_writing_turn_is_also_caught_by_the_connection_cut_case():
    report = run_conformance(doubles.HalfWritingTurnAdapter, only="durability")
    cut = report.case("durability.connection_cut_mid_turn")
    assert cut.status == Status.FAILED
    assert cut.expected == "the whole turn or nothing of it"


def test_a_declared_fault_point_that_never_fires_fails():
    """Declaring the seam is a promise: an armed point that does not fire is a failure,
    so a seam cannot be declared just to make the cases look applied."""
    report = run_conformance(_NeverFires, only="durability.fault_after_state")
    result = report.cases[0]
    assert result.status == Status.FAILED
    assert "a declared fault point that does not fire" in result.actual


class _NeverFires(doubles.EventfulMemoryAdapter):
    def _strike(self):
        self._armed = None


def test_correct_doubles_pass_the_new_cases_that_apply_to_them():
    durable = run_conformance(doubles.DurableMemoryAdapter)
    assert durable.level == Level.FULL, [c.message for c in durable.failures]
    for case_id in ("durability.survives_reopen", "durability.fault_after_state",
                    "durability.connection_cut_mid_turn", "state.delete_checks_version",
                    "events.limit_after_owner_filter", "state.tenants_with_identical_rows"):
        assert durable.case(case_id).status == Status.PASSED, case_id
    retries = run_conformance(doubles.IdempotentRetryAdapter, only="state")
    assert retries.case("state.identical_retry_is_idempotent").status == Status.PASSED
    assert retries.level == Level.FULL


def test_nan_acceptance_is_advisory_and_does_not_lower_the_level():
    report = run_conformance(doubles.AcceptsNanAdapter)
    result = report.case("commit_turn.malformed_event_changes_nothing")
    assert result.status == Status.ADVISORY
    assert result.actual == "accepted (an updating turn, an inserting turn)"
    assert report.level == Level.FULL and report.ok
    assert report.group("commit_turn").status == Status.PASSED


def test_pytest_faces_warn_about_an_advisory_finding_without_failing():
    from backends.conformance.catalogue import select_cases
    from backends.conformance.model import ConformanceAdvisory
    from backends.conformance.suite import check_case

    entry = select_cases("commit_turn.malformed_event_changes_nothing")[0]
    with pytest.warns(ConformanceAdvisory, match="NaN"):
        check_case(doubles.AcceptsNanAdapter(), entry)
