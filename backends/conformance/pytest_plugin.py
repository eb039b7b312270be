"""pytest11 plugin: the conformance suite inside any pytest run.

* ``pytest --semvec-conformance=SPEC`` (a backend name, a URI such as
  ``redis://localhost:6379/0``, or ``module:factory``) adds one test item per case,
  named ``semvec-conformance::<group>.<case>`` and marked ``semvec_conformance``;
  ``--semvec-conformance-only=GROUPS`` narrows them.
* the ``semvec_conformance`` fixture runs the suite from a test:
  ``semvec_conformance.check(MyAdapter)`` fails the test listing every failed case;
  ``semvec_conformance.run(...)`` returns the report.
* ``ConformanceSuite`` (``backends.conformance``) is the mixin alternative.

Every pytest run in an environment with semvecctl installed imports this module, so it
imports nothing beyond pytest at module level.
"""

from __future__ import annotations

from typing import Any

import pytest

_OPTION = "--semvec-conformance"
_ONLY = "--semvec-conformance-only"
_STATE_KEY = "_semvec_conformance_state"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("semvec-conformance", "semvec session-backend conformance")
    group.addoption(_OPTION, action="store", default=None, metavar="SPEC",
                    help="run the conformance suite against a backend name, a URI or "
                         "module:factory")
    group.addoption(_ONLY, action="store", default=None, metavar="GROUPS",
                    help="comma-separated groups or group.case ids to run")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "semvec_conformance: a semvec session-backend conformance case")


class _Target:
    """The adapter under test for --semvec-conformance, built once, closed at the end."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self._adapter: Any = None
        self.factory: Any = None
        self.selected_name: str | None = None

    def adapter(self) -> Any:
        if self._adapter is None:
            from backends.conformance.loader import load_adapter_factory

            self.factory, self.selected_name = load_adapter_factory(self.spec)
            self._adapter = self.factory()
        return self._adapter

    def close(self) -> None:
        from backends.contract import close_quietly

        adapter, self._adapter = self._adapter, None
        close_quietly(adapter)  # teardown must not mask results


class ConformanceItem(pytest.Item):
    """One conformance case as a pytest item."""

    def __init__(self, *, case: Any, target: _Target, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.target = target
        self.add_marker(pytest.mark.semvec_conformance)

    def runtest(self) -> None:
        from backends.conformance.suite import check_case

        try:
            adapter = self.target.adapter()
        except Exception as exc:  # noqa: BLE001 - reported once per case, briefly
            from backends.redaction import redact_uri, scrub

            shown = redact_uri(self.target.spec) if "://" in self.target.spec else self.target.spec
            pytest.fail(scrub(f"building the adapter from {shown!r} failed: "
                              f"{type(exc).__name__}: {exc}", self.target.spec), pytrace=False)
        from backends.conformance.context import ConformanceOptions, redis_url_of

        check_case(adapter, self.case, selected_name=self.target.selected_name,
                   factory=self.target.factory,
                   options=ConformanceOptions(redis_url=redis_url_of(self.target.spec)))

    def reportinfo(self):  # noqa: ANN201 - pytest's signature
        return self.path, None, f"semvec conformance {self.case.case_id}: {self.case.doc}"


@pytest.hookimpl(tryfirst=True)  # before -k / -m deselection sees the item list
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    spec = config.getoption(_OPTION)
    if not spec:
        return
    from backends.conformance.catalogue import select_cases

    target = _Target(spec)
    setattr(config, _STATE_KEY, target)
    for entry in select_cases(config.getoption(_ONLY)):
        items.append(ConformanceItem.from_parent(
            session, name=f"semvec-conformance::{entry.case_id}", case=entry, target=target))


def pytest_unconfigure(config: pytest.Config) -> None:
    target = getattr(config, _STATE_KEY, None)
    if target is not None:
        target.close()


class ConformanceHarness:
    """What the ``semvec_conformance`` fixture returns."""

    def run(self, adapter_or_factory: Any, **kwargs: Any):
        """Run the suite; a string is a backend name, URI or module:factory."""
        from backends.conformance.loader import load_adapter_factory
        from backends.conformance.runner import run_conformance

        if isinstance(adapter_or_factory, str):
            factory, name = load_adapter_factory(adapter_or_factory)
            kwargs.setdefault("selected_name", name)
            adapter_or_factory = factory
        return run_conformance(adapter_or_factory, **kwargs)

    def check(self, adapter_or_factory: Any, **kwargs: Any):
        """Run the suite and fail the calling test unless every case passed."""
        report = self.run(adapter_or_factory, **kwargs)
        if not report.ok:
            lines = [report.summary()] + [
                f"  {c.case_id} [{c.status}]: {c.message}" for c in report.failures]
            pytest.fail("\n".join(lines), pytrace=False)
        return report


@pytest.fixture
def semvec_conformance() -> ConformanceHarness:
    """Run the semvec conformance suite from a test: ``.check(adapter)`` / ``.run(...)``."""
    return ConformanceHarness()
