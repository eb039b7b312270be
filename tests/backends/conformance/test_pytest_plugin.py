"""The pytest faces of the suite: the ConformanceSuite mixin, the pytest11 plugin's
``--semvec-conformance`` option and ``semvec_conformance`` fixture, and the plugin's
import cost (it is loaded by every pytest run)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from backends.conformance import select_cases

pytest_plugins = ["pytester"]

N_STATE = len(select_cases("state"))
N_ALL = len(select_cases())


def _memory_not_applicable(only=None) -> int:
    """Cases that cannot apply to the memory backend (no event store, not persistent, no
    fault seam, no retrieval, no indexes), as a direct run reports them."""
    from backends.conformance import Status, run_conformance
    from backends.memory import MemoryBackendAdapter

    report = run_conformance(MemoryBackendAdapter, selected_name="memory", only=only)
    return sum(1 for c in report.cases if c.status == Status.NOT_APPLICABLE)


N_MEMORY_NA = _memory_not_applicable()
# state cases that are not applicable on memory
N_STATE_MEMORY_NA = _memory_not_applicable("state")

BROKEN_ADAPTER = textwrap.dedent('''
    from backends.errors import StateVersionConflict
    from backends.memory import MemoryBackendAdapter, MemoryStateStore

    class OverwritingStore(MemoryStateStore):
        idempotent_retries = False  # it overwrites: it can claim nothing about retries

        def save(self, session_id, blob, *, expected_version, **kw):
            if expected_version is None:
                self._rows.pop(session_id, None)
            return super().save(session_id, blob, expected_version=expected_version, **kw)

    class OverwritingAdapter(MemoryBackendAdapter):
        def __init__(self, uri=None):
            super().__init__(uri)
            self._store = OverwritingStore()
''')


def test_mixin_generates_one_test_per_case_and_passes_memory(pytester):
    pytester.makepyfile(test_mine='''
        import pytest
        from backends.conformance import ConformanceSuite
        from backends.memory import MemoryBackendAdapter

        class TestMemory(ConformanceSuite):
            conformance_name = "memory"

            @pytest.fixture
            def adapter(self):
                return MemoryBackendAdapter()

            @pytest.fixture
            def conformance_factory(self):
                return MemoryBackendAdapter
    ''')
    result = pytester.runpytest("-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=N_ALL - N_MEMORY_NA, skipped=N_MEMORY_NA)
    result.stdout.fnmatch_lines(["*not applicable: event_store() is None*"])


def test_mixin_failure_names_the_case(pytester):
    pytester.makepyfile(broken=BROKEN_ADAPTER)
    pytester.makepyfile(test_broken='''
        import pytest
        from backends.conformance import ConformanceSuite
        from broken import OverwritingAdapter

        class TestBroken(ConformanceSuite):
            conformance_only = "state"

            @pytest.fixture
            def adapter(self):
                return OverwritingAdapter()
    ''')
    result = pytester.runpytest("-p", "no:cacheprovider")
    # one failure; the retry case is not applicable (the store declares no idempotence)
    result.assert_outcomes(failed=1, passed=N_STATE - 2 - N_STATE_MEMORY_NA,
                           skipped=N_STATE_MEMORY_NA + 1)
    result.stdout.fnmatch_lines([
        "*second insert of the same session: expected StateVersionConflict, got returned 1*",
        "FAILED test_broken.py::TestBroken::test_state__insert_never_overwrites*",
    ])


def test_option_adds_items_for_a_backend_name(pytester):
    pytester.makepyfile(test_nothing="def test_other():\n    pass\n")
    result = pytester.runpytest("--semvec-conformance=memory",
                                "--semvec-conformance-only=state,health", "-v",
                                "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1 + N_STATE - N_STATE_MEMORY_NA + 2,
                           skipped=N_STATE_MEMORY_NA)
    result.stdout.fnmatch_lines(["*semvec-conformance::state.insert_never_overwrites PASSED*"])


def test_option_accepts_module_factory_and_reports_failures(pytester):
    pytester.makepyfile(broken=BROKEN_ADAPTER)
    pytester.syspathinsert()
    result = pytester.runpytest("--semvec-conformance=broken:OverwritingAdapter",
                                "--semvec-conformance-only=state.insert_never_overwrites",
                                "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*expected StateVersionConflict, got returned 1*"])


def test_option_marker_selects_conformance_items(pytester):
    pytester.makepyfile(test_nothing="def test_other():\n    pass\n")
    result = pytester.runpytest("--semvec-conformance=memory://", "-m", "semvec_conformance",
                                "--semvec-conformance-only=contract", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=7, deselected=1)


def test_fixture_check_passes_and_fails(pytester):
    pytester.makepyfile(broken=BROKEN_ADAPTER)
    pytester.makepyfile(test_fixture='''
        from broken import OverwritingAdapter
        from backends.memory import MemoryBackendAdapter

        def test_memory(semvec_conformance):
            report = semvec_conformance.check("memory")
            assert report.level == "FULL"

        def test_broken(semvec_conformance):
            semvec_conformance.check(OverwritingAdapter, only="state")
    ''')
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*conformance level FAILED*",
                                 "*state.insert_never_overwrites ?failed?*"])


def test_unknown_backend_name_is_not_certified_as_memory(pytester):
    pytester.makepyfile(test_nothing="def test_other():\n    pass\n")
    result = pytester.runpytest("--semvec-conformance=no-such-backend",
                                "--semvec-conformance-only=contract.members",
                                "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*does not certify 'memory' in its place*"])


def test_plugin_import_is_light():
    code = textwrap.dedent('''
        import sys
        import backends.conformance.pytest_plugin
        import backends.conformance
        heavy = [m for m in ("numpy", "redis", "pymongo", "psycopg",
                             "backends.conformance.runner", "backends.conformance.cases",
                             "backends.registry") if m in sys.modules]
        print(",".join(heavy))
    ''')
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ""


def test_option_never_prints_uri_credentials(pytester):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    pytester.makepyfile(test_nothing="def test_other():\n    pass\n")
    result = pytester.runpytest(f"--semvec-conformance=redis://u:hunter2-secret@127.0.0.1:{port}/0",
                                "--semvec-conformance-only=health", "-p", "no:cacheprovider")
    assert "hunter2-secret" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=2, failed=1)  # test_other, the prompt bool, reports_up
