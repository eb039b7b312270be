"""Run the catalogue against one adapter and collect a :class:`ConformanceReport`.

Groups run in catalogue order. A group whose capability the adapter lacks is reported
not applicable with the reason; every case cleans up what it created, and a cleanup
problem turns a pass into an error (an operator must know when a run left rows behind).
"""

from __future__ import annotations

import inspect
import time
import traceback
from datetime import datetime, timezone
from typing import Any, Callable, Iterable

from backends.conformance.catalogue import GROUP_ORDER, Case, group_applies, select_cases
from backends.conformance.context import (
    CaseContext,
    ConformanceOptions,
    describe_exception,
    new_run_prefix,
)
from backends.contract import close_quietly
from backends.conformance.model import (
    AdvisoryFinding,
    CaseFailure,
    CaseResult,
    ConformanceReport,
    GroupResult,
    NotApplicable,
    Status,
    group_status,
)
from backends.probe import call_with_timeout

OnResult = Callable[[CaseResult], None]


def _is_adapter(obj: Any) -> bool:
    return not inspect.isclass(obj) and callable(getattr(obj, "state_store", None))


def _where(exc: BaseException) -> str:
    """The innermost frame, so an error in an adapter points at the adapter's line."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f" (at {last.filename}:{last.lineno} in {last.name})"


def run_case(adapter: Any, entry: Case, *, prefix: str, options: ConformanceOptions,
             selected_name: str | None = None,
             factory: Callable[[], Any] | None = None, recipe: Any = None) -> CaseResult:
    """Run one case and its cleanup; never raises (the outcome is in the result)."""
    ctx = CaseContext(adapter=adapter, prefix=prefix, case_slug=entry.name.replace("_", "-"),
                      options=options, selected_name=selected_name, factory=factory,
                      recipe=recipe)
    result = CaseResult(entry.group, entry.name, Status.PASSED, doc=entry.doc)
    started = time.perf_counter()
    try:
        outcome = call_with_timeout(entry.func, options.case_timeout, ctx)
    except BaseException:
        # Interrupted while the case ran (Ctrl-C, SIGTERM reach the main thread here):
        # remove what the case created before the interruption goes on.
        call_with_timeout(ctx.cleanup, options.case_timeout)
        ctx.close_opened()
        raise
    error = outcome.error
    if outcome.timed_out:
        result.status = Status.ERROR
        result.message = (f"did not finish within {options.case_timeout:g}s "
                          "(a hung adapter call?); abandoned")
    elif isinstance(error, AdvisoryFinding):
        result.status = Status.ADVISORY
        result.message = f"advisory (beyond the published contract): {error}"
        result.expected, result.actual = error.expected, error.actual
    elif isinstance(error, CaseFailure):
        refusal = _unsupported(error)
        if refusal is not None and entry.refusal_is_na:
            result.status = Status.NOT_APPLICABLE
            result.message = f"the deployment refuses it ({error.check}): {refusal}"
        else:
            result.status = Status.FAILED
            result.message = str(error)
            result.expected, result.actual = error.expected, error.actual
    elif isinstance(error, NotApplicable):
        result.status = Status.NOT_APPLICABLE
        result.message = error.reason
    elif error is not None:
        if not isinstance(error, Exception):  # KeyboardInterrupt, SystemExit: not ours
            raise error
        result.status = Status.ERROR
        result.message = f"unexpected {describe_exception(error)}{_where(error)}"
    if ctx.notes and result.status in (Status.PASSED, Status.ADVISORY, Status.FAILED):
        skipped = "; ".join(ctx.notes[:6])
        result.message = f"{result.message} [{skipped}]" if result.message else skipped
    result.figures = dict(ctx.figures)
    tidy = call_with_timeout(lambda: ctx.cleanup() + _leftovers(ctx), options.case_timeout)
    ctx.close_opened()
    if tidy.timed_out:
        problems = [f"did not finish within {options.case_timeout:g}s"]
    elif tidy.error is not None:
        problems = [describe_exception(tidy.error)]
    else:
        problems = tidy.value
    if problems:
        note = "cleanup: " + "; ".join(problems[:5])
        if result.status in (Status.PASSED, Status.NOT_APPLICABLE):
            result.status = Status.ERROR
            result.message = note
        else:
            result.message = f"{result.message} [{note}]"
    result.duration = time.perf_counter() - started
    return result


def _unsupported(failure: CaseFailure) -> str | None:
    """The adapter's UnsupportedOperation behind a failed step, if that is what it was."""
    from backends.errors import UnsupportedOperation

    cause = failure.__cause__
    if isinstance(cause, UnsupportedOperation):
        return describe_exception(cause)
    return None


def _leftovers(ctx: CaseContext) -> list[str]:
    """Sessions of the case that still exist after cleanup deleted them."""
    if not ctx.sessions:
        return []
    try:
        store = ctx.adapter.state_store()
        left = [sid for sid in ctx.sessions if store.load_full(sid) is not None]
    except Exception as exc:  # noqa: BLE001
        return [f"checking cleanup: {describe_exception(exc)}"]
    return [f"session {sid} still exists after delete" for sid in left]


def plan(only: Any = None) -> list[Case]:
    """The cases a run with ``only`` would execute, in order (for live displays)."""
    return select_cases(only)


def run_conformance(
    adapter_factory: Any,
    *,
    selected_name: str | None = None,
    only: str | Iterable[str] | None = None,
    on_result: OnResult | None = None,
    options: ConformanceOptions | None = None,
    prefix: str | None = None,
    target: str = "",
    recipe: Any = None,
    known_failures: Any = None,
) -> ConformanceReport:
    """Certify an adapter.

    ``adapter_factory`` is a zero-argument callable (an adapter class, a function) or an
    adapter instance (then ``contract.close_is_idempotent`` is not applicable and the
    adapter is not closed). ``selected_name`` is the name it was selected by (checked by
    ``contract.name_matches_selection``); ``only`` restricts the run to groups or
    ``group.case`` ids; ``on_result`` is called after each case. ``recipe`` (a
    ``children.AdapterRecipe``; default: the one the factory carries) is how child
    processes rebuild the adapter for the cross-process cases, which are not applicable
    without one. ``known_failures`` (``known.KnownFailures``) lists the published
    divergences: a listed case that fails is an expected failure, one that passes fails.
    """
    from backends.conformance.children import recipe_of

    recipe = recipe if recipe is not None else recipe_of(adapter_factory)
    options = options or ConformanceOptions()
    cases = select_cases(only)
    prefix = prefix or new_run_prefix()
    started_at = datetime.now(timezone.utc)
    started = time.perf_counter()
    selection = None
    if only is not None:
        items = [only] if isinstance(only, str) else list(only)
        selection = tuple(dict.fromkeys(
            p.strip() for item in items for p in str(item).split(",") if p.strip()))

    factory: Callable[[], Any] | None
    if _is_adapter(adapter_factory):
        adapter, factory, owned = adapter_factory, None, False
    else:
        factory, owned = adapter_factory, True
        try:
            adapter = factory()
        except Exception as exc:  # noqa: BLE001
            message = f"building the adapter raised {describe_exception(exc)}"
            failed = [CaseResult(c.group, c.name, Status.ERROR, message=message, doc=c.doc)
                      for c in cases]
            for r in failed:
                if on_result:
                    on_result(r)
            return ConformanceReport(
                backend=selected_name or getattr(factory, "name", "") or repr(factory),
                prefix=prefix, started_at=started_at, duration=time.perf_counter() - started,
                groups=_groups(failed, {}), selection=selection, target=target)

    capabilities = describe_capabilities(adapter)
    backend = getattr(adapter, "name", None)
    backend = backend if isinstance(backend, str) and backend else (selected_name or "?")
    results: list[CaseResult] = []
    reasons: dict[str, str] = {}
    try:
        for group in GROUP_ORDER:
            group_cases = [c for c in cases if c.group == group]
            if not group_cases:
                continue
            try:
                reason = group_applies(group, adapter)
                probe_error = None
            except Exception as exc:  # noqa: BLE001
                reason, probe_error = None, f"probing the group raised {describe_exception(exc)}"
            for entry in group_cases:
                if probe_error is not None:
                    result = CaseResult(group, entry.name, Status.ERROR, message=probe_error,
                                        doc=entry.doc)
                elif reason is not None:
                    reasons[group] = reason
                    result = CaseResult(group, entry.name, Status.NOT_APPLICABLE,
                                        message=reason, doc=entry.doc)
                else:
                    result = run_case(adapter, entry, prefix=prefix, options=options,
                                      selected_name=selected_name, factory=factory,
                                      recipe=recipe)
                if known_failures is not None:
                    result = known_failures.judge(result)
                results.append(result)
                if on_result is not None:
                    on_result(result)
    finally:
        if owned:  # a close failure is the contract group's business, not the run's
            close_quietly(adapter)
    return ConformanceReport(
        backend=backend,
        prefix=prefix,
        started_at=started_at,
        duration=time.perf_counter() - started,
        groups=_groups(results, reasons),
        selection=selection,
        target=target,
        capabilities=capabilities,
        known_failures=None if known_failures is None else known_failures.source,
    )


def describe_capabilities(adapter: Any) -> dict[str, Any]:
    """The capability report: what the adapter declares and which seams it offers, all
    read through :func:`backends.contract.capabilities_of`. Never raises (a member that
    raises is reported as the error)."""
    from backends.contract import CAPABILITIES, Capability, capabilities_of, fault_points_of

    caps: dict[str, Any] = {}
    declared = inspect.getattr_static(type(adapter), "is_persistent", None)
    caps["is_persistent"] = declared if isinstance(declared, bool) else repr(declared)
    for member in ("event_store", "retrieval_backend"):
        try:
            value = getattr(adapter, member)()
            caps[member] = None if value is None else type(value).__name__
        except Exception as exc:  # noqa: BLE001
            caps[member] = f"error: {describe_exception(exc)}"
    offered = capabilities_of(adapter)
    caps["seams"] = [CAPABILITIES[c].protocol.__name__ for c in offered if CAPABILITIES[c].seam]
    caps["cleanup_hooks"] = [CAPABILITIES[c].methods[0] for c in
                             (Capability.PURGE_ITEMS, Capability.PURGE_USER) if c in offered]
    caps.update(_conventions(adapter, _events_or_none(adapter)))
    caps["fault_points"] = sorted(fault_points_of(adapter))
    return caps


def _conventions(adapter: Any, events: Any) -> dict[str, Any]:
    """How the suite drives this adapter (detected from signatures and declarations)."""
    from backends.conformance.drive import event_surface, owner_convention
    from backends.contract import event_defaults, state_defaults

    found: dict[str, Any] = {}
    try:
        store = adapter.state_store()
        found["owner_convention"] = owner_convention(store.save)
        found["idempotent_retries"] = state_defaults(store).idempotent_retries
    except Exception as exc:  # noqa: BLE001
        found["owner_convention"] = f"error: {describe_exception(exc)}"
    if events is not None:
        found["event_surface"] = event_surface(events) or "incomplete"
        found["assigns_sequences"] = event_defaults(events).assigns_sequences
    return found


def _events_or_none(adapter: Any) -> Any:
    try:
        return adapter.event_store()
    except Exception:  # noqa: BLE001
        return None


def _groups(results: list[CaseResult], reasons: dict[str, str]) -> list[GroupResult]:
    groups: list[GroupResult] = []
    for name in GROUP_ORDER:
        cases = [r for r in results if r.group == name]
        if not cases:
            continue
        status = group_status(cases)
        reason = reasons.get(name, "")
        if not reason and status == Status.NOT_APPLICABLE:
            reason = "; ".join(sorted({c.message for c in cases if c.message}))
        groups.append(GroupResult(name, status, reason, cases))
    return groups
