"""Mixin for a backend author's own pytest suite: one pytest test per conformance case.

    from backends.conformance import ConformanceSuite

    class TestMyBackend(ConformanceSuite):
        conformance_name = "pgvector"          # optional: the entry-point key

        @pytest.fixture
        def adapter(self, my_server):
            adapter = MyAdapter(my_server.url)
            yield adapter
            adapter.close()

A failing case fails the test named after it (``test_state__insert_never_overwrites``)
with the expected-vs-actual message; a case the adapter cannot have is skipped as
"not applicable", never passed. An optional ``conformance_factory`` fixture (a
zero-argument callable) enables ``contract.close_is_idempotent``; a
``conformance_recipe`` class attribute (``backends.conformance.children.AdapterRecipe``)
lets the cross-process cases rebuild the adapter in child processes.
"""

from __future__ import annotations

from typing import Any

import pytest

from backends.conformance.catalogue import Case, group_applies, select_cases
from backends.conformance.context import ConformanceOptions, new_run_prefix
from backends.conformance.model import Status
from backends.conformance.runner import run_case

MARKER = "semvec_conformance"


def check_case(adapter: Any, entry: Case, *, selected_name: str | None = None,
               options: ConformanceOptions | None = None, factory: Any = None,
               recipe: Any = None) -> None:
    """Run one case the pytest way: fail with its message, skip when not applicable.
    ``recipe`` (default: the one ``factory`` carries) lets the cross-process cases run."""
    from backends.conformance.children import recipe_of

    reason = group_applies(entry.group, adapter)
    if reason is not None:
        pytest.skip(f"not applicable: {reason}")
    result = run_case(adapter, entry, prefix=new_run_prefix(),
                      options=options or ConformanceOptions(),
                      selected_name=selected_name, factory=factory,
                      recipe=recipe if recipe is not None else recipe_of(factory))
    if result.status == Status.NOT_APPLICABLE:
        pytest.skip(f"not applicable: {result.message}")
    if result.status == Status.FAILED:
        pytest.fail(f"{entry.case_id}: {result.message}", pytrace=False)
    if result.status == Status.ERROR:
        pytest.fail(f"{entry.case_id} errored: {result.message}", pytrace=False)
    if result.status == Status.ADVISORY:
        import warnings

        from backends.conformance.model import ConformanceAdvisory

        warnings.warn(ConformanceAdvisory(f"{entry.case_id}: {result.message}"), stacklevel=2)


def _make_test(entry: Case):
    def test(self, adapter, request):  # noqa: ANN001 - pytest signature
        try:
            factory = request.getfixturevalue("conformance_factory")
        except pytest.FixtureLookupError:
            factory = None
        check_case(adapter, entry, selected_name=getattr(self, "conformance_name", None),
                   options=getattr(self, "conformance_options", None), factory=factory,
                   recipe=getattr(self, "conformance_recipe", None))

    test.__name__ = f"test_{entry.group}__{entry.name}"
    test.__doc__ = entry.doc
    return pytest.mark.semvec_conformance(test)


class ConformanceSuite:
    """Subclass as ``Test...`` and provide an ``adapter`` fixture."""

    #: The name the adapter is selected by (checked, folded); None skips that case.
    conformance_name: str | None = None
    #: Restrict to groups / ``group.case`` ids (same syntax as ``--only``).
    conformance_only: Any = None
    #: How child processes rebuild the adapter (None: the cross-process cases are not
    #: applicable, unless the factory carries a recipe).
    conformance_recipe: Any = None
    #: Knobs (writers, health timeout, provisioning ...).
    conformance_options: ConformanceOptions | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Cases outside ``conformance_only`` are not collected at all (not skipped)."""
        super().__init_subclass__(**kwargs)
        only = getattr(cls, "conformance_only", None)
        if only is None:
            return
        selected = {c.case_id for c in select_cases(only)}  # unknown names raise here
        for entry in select_cases():
            if entry.case_id not in selected:
                setattr(cls, f"test_{entry.group}__{entry.name}", None)

    @pytest.fixture
    def adapter(self):  # pragma: no cover - the subclass overrides it
        pytest.fail("define an `adapter` fixture on your ConformanceSuite subclass",
                    pytrace=False)


for _entry in select_cases():
    setattr(ConformanceSuite, f"test_{_entry.group}__{_entry.name}", _make_test(_entry))
del _entry
