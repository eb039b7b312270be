"""Issue 25: the cases that see what a single cooperating process cannot show -- processes
racing, a SIGKILL mid-turn, a connection cut under the adapter, owners that are almost
right -- each catching its broken double and nothing else, while the older cases certify
that double FULL.

The shared-file doubles need no server (tests/support/process_doubles.py); the blind
retry double is the shipped Redis adapter with one change and runs against the private
AOF Redis of tests/backends/conformance/conftest.py.
"""

from __future__ import annotations

import pytest

from backends.conformance import Level, Status, run_conformance, select_cases
from tests.support import process_doubles as doubles

NEW_CASES = ("concurrency.processes", "durability.sigkill", "faults.connection",
             "isolation.empty_values", "isolation.owner_variants",
             "isolation.retrieval_owner_variants")
OLD_CASES = [c.case_id for c in select_cases() if c.case_id not in NEW_CASES]
#: The new cases a store without server-side retrieval can have.
STORE_CASES = [c for c in NEW_CASES if c != "isolation.retrieval_owner_variants"]
#: ... and one without a URI (faults needs one).
FILE_CASES = [c for c in STORE_CASES if c != "faults.connection"]


def _failed(report) -> dict[str, str]:
    return {c.case_id: c.message for c in report.cases if c.status in Status.BAD}


def _file_run(cls, tmp_path, **kw):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = str(tmp_path / "store.pickle")
    return run_conformance(lambda: cls(path=path), recipe=doubles.recipe_for(cls, path), **kw)


def test_the_correct_shared_file_adapter_passes_every_new_case(tmp_path):
    report = _file_run(doubles.SharedFileAdapter, tmp_path)
    assert report.level == Level.FULL, _failed(report)
    for case_id in FILE_CASES:
        assert report.case(case_id).status == Status.PASSED, report.case(case_id)
    kill = report.case("durability.sigkill")
    assert "20 kills" in kill.message, kill.message
    faults = report.case("faults.connection")
    assert faults.status == Status.NOT_APPLICABLE and "URI" in faults.message


@pytest.mark.parametrize("cls, case_id, fragment", [
    pytest.param(doubles.ProcessLockAdapter, "concurrency.processes",
                 "acknowledged to several writers", id="process-local-lock"),
    pytest.param(doubles.TwoCallsAdapter, "durability.sigkill",
                 "every event of the child's turns", id="state-and-events-in-two-calls"),
    pytest.param(doubles.TwoStatementsAdapter, "durability.sigkill",
                 "(the one written with it)", id="blob-and-version-in-two-statements"),
])
def test_a_cross_process_double_is_caught_by_exactly_its_case(tmp_path, cls, case_id,
                                                             fragment):
    report = _file_run(cls, tmp_path)
    failed = _failed(report)
    assert set(failed) == {case_id}, failed
    assert fragment in failed[case_id], failed[case_id]
    assert report.level == Level.FAILED and not report.ok
    old = _file_run(cls, tmp_path / "old", only=OLD_CASES)
    assert old.level == Level.FULL, _failed(old)  # what the suite certified before


@pytest.mark.parametrize("cls, case_id, fragment", [
    pytest.param(doubles.EmptyOwnerUnfilteredAdapter, "isolation.empty_values",
                 "with owner ''", id="empty-owner-is-no-filter"),
    pytest.param(doubles.CaseFoldedOwnerAdapter, "isolation.owner_variants",
                 "(case-folded)", id="owners-compared-case-insensitively"),
])
def test_an_isolation_double_is_caught_by_exactly_its_case(cls, case_id, fragment):
    report = run_conformance(cls)
    failed = _failed(report)
    assert set(failed) == {case_id}, failed
    assert fragment in failed[case_id], failed[case_id]
    old = run_conformance(cls, only=OLD_CASES)
    assert old.level == Level.FULL, _failed(old)


def test_an_empty_user_id_listing_everyone_is_caught():
    """The ADK bug: list_events("") answering every user's events."""
    report = run_conformance(doubles.EmptyOwnerUnfilteredAdapter, only="isolation.empty_values")
    message = report.case("isolation.empty_values").message
    assert report.case("isolation.empty_values").status == Status.FAILED
    # the owner "" read is the first leak the case meets; the user listing is asked too
    assert "owner ''" in message or "user id ''" in message


def test_without_a_recipe_the_cross_process_cases_are_not_applicable_with_the_reason(tmp_path):
    path = str(tmp_path / "store.pickle")
    report = run_conformance(lambda: doubles.SharedFileAdapter(path=path),
                             only=("concurrency.processes", "durability.sigkill"))
    for case_id in ("concurrency.processes", "durability.sigkill"):
        case = report.case(case_id)
        assert case.status == Status.NOT_APPLICABLE, case
        assert "cannot rebuild this adapter in a child process" in case.message


def test_a_recipe_a_child_cannot_build_is_not_applicable(tmp_path):
    from backends.conformance.children import AdapterRecipe

    path = str(tmp_path / "store.pickle")
    report = run_conformance(lambda: doubles.SharedFileAdapter(path=path),
                             recipe=AdapterRecipe("tests.support.process_doubles:Missing"),
                             only="durability.sigkill")
    case = report.case("durability.sigkill")
    assert case.status == Status.NOT_APPLICABLE
    assert "a child process cannot rebuild the adapter" in case.message


@pytest.mark.redis
def test_a_blind_retry_after_a_lost_reply_is_caught_by_faults_connection(durable_redis_url):
    from backends.conformance.children import target_recipe

    target = "tests.support.process_doubles:BlindRetryRedisAdapter"
    report = run_conformance(lambda: doubles.BlindRetryRedisAdapter(durable_redis_url),
                             selected_name="redis",
                             recipe=target_recipe(target, {"uri": durable_redis_url}))
    failed = _failed(report)
    assert set(failed) == {"faults.connection"}, failed
    assert "request 1" in failed["faults.connection"], failed["faults.connection"]
    old = run_conformance(lambda: doubles.BlindRetryRedisAdapter(durable_redis_url),
                          selected_name="redis", only=OLD_CASES)
    assert old.level == Level.FULL, _failed(old)


@pytest.mark.redis
def test_cli_rebuilds_children_from_the_uri_and_leaves_no_key(redis_url):
    """``conformance run --uri``: the children and the proxied adapter are built from the
    URI the operator gave; nothing of the run is left on the server."""
    import json

    import redis
    from typer.testing import CliRunner

    from semvecctl.app import app

    client = redis.Redis.from_url(redis_url)
    before = set(client.scan_iter(count=1000))
    result = CliRunner().invoke(app, [
        "conformance", "run", "--uri", redis_url, "-o", "json", "--only",
        "concurrency.processes,durability.sigkill,faults.connection,isolation"])
    data = json.loads(result.stdout)
    statuses = {f"{c['group']}.{c['case']}": c for g in data["groups"] for c in g["cases"]}
    assert result.exit_code == 0, {k: v["message"] for k, v in statuses.items()}
    for case_id in STORE_CASES:
        assert statuses[case_id]["status"] == "passed", statuses[case_id]
    retrieval = statuses["isolation.retrieval_owner_variants"]
    assert retrieval["status"] == "not-applicable" and "in-process" in retrieval["message"]
    assert "20 kills" in statuses["durability.sigkill"]["message"]
    try:
        left = set(client.scan_iter(count=1000)) - before  # event hashes are keyed by UUID
        assert left == set(), sorted(left)[:10]
    finally:
        client.close()


# -- a pooled connection held before the fork (issue 42) --------------------------------------------


@pytest.fixture
def listener():
    """A TCP listener a double's "pool" connects to (the kernel completes the handshake)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def test_a_connection_held_before_the_fork_is_named_and_nothing_is_left(tmp_path, listener):
    """The factory opens a pooled connection the zygote would hand to every fork (the
    engine's module-level SQLAlchemy engine does): both cross-process cases say so at once,
    instead of hanging until the workers' deadline, and leave no row behind."""
    import pickle

    from backends.conformance.children import AdapterRecipe
    from tests.support.bounds import bounded_by

    path = str(tmp_path / "store.pickle")
    cls = doubles.PooledAtFactoryAdapter
    report = run_conformance(lambda: cls(path=path, pool=listener),
                             only="concurrency.processes,durability.sigkill",
                             recipe=AdapterRecipe(f"{cls.__module__}:{cls.__qualname__}",
                                                  {"path": path, "pool": listener}))
    assert len(report.cases) == 2
    for result in report.cases:
        assert result.status == Status.NOT_APPLICABLE, (result.case_id, result.message)
        assert "holds 1 open connection(s) before the suite forks" in result.message
        assert listener in result.message and "connection pool" in result.message
        assert "engine.dispose(close=False)" in result.message
        assert result.duration < bounded_by(1.0)  # a hang lasted the workers' 120 s deadline
    with open(path, "rb") as handle:
        rows, by_user, _counters, by_id = pickle.load(handle)
    assert not [sid for sid in rows if sid.startswith(report.prefix)]
    assert not [user for user, events in by_user.items()
                if user.startswith(report.prefix) and events]
    assert not [e for e in by_id.values() if str(getattr(e, "user_id", "")).startswith(report.prefix)]


def test_a_case_that_ran_children_cleans_up_through_a_fresh_adapter(tmp_path):
    """What the children wrote is removed through an adapter built in the parent after the
    case, not through the run's own (which may share a pool with what they left)."""
    from backends.conformance import ConformanceOptions

    cls = doubles.RecordingCleanupAdapter
    path = str(tmp_path / "store.pickle")
    built: list = []

    def factory():
        built.append(cls(path=path))
        return built[-1]

    doubles.DELETED_BY.clear()
    report = run_conformance(factory, only="durability.sigkill",
                             options=ConformanceOptions(kills=2),
                             recipe=doubles.recipe_for(cls, path))
    (result,) = report.cases
    assert result.status == Status.PASSED, result.message
    run_adapter = id(built[0])
    assert doubles.DELETED_BY and run_adapter not in doubles.DELETED_BY
    assert set(doubles.DELETED_BY) <= {id(a) for a in built[1:]}
    assert cls(path=path).state_store().load(f"{report.prefix}killed") is None
