"""check_health: a live probe that answers a bool within its bound and never raises."""

from __future__ import annotations

import threading
import time
from typing import Any

from backends.conformance.catalogue import case
from backends.conformance.context import CaseContext, describe_exception

_PROBES = 3


def _probe(ctx: CaseContext) -> tuple[object, BaseException | None, float, bool]:
    """Call check_health in a daemon thread so a hanging probe cannot hang the run."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = ctx.adapter.check_health()
        except BaseException as exc:  # noqa: BLE001 - SystemExit etc. count as raising too
            outcome["error"] = exc

    started = time.perf_counter()
    thread = threading.Thread(target=run, daemon=True, name="semvec-conformance-health")
    thread.start()
    thread.join(ctx.options.health_timeout)
    elapsed = time.perf_counter() - started
    return outcome.get("value"), outcome.get("error"), elapsed, thread.is_alive()


@case("health")
def answers_bool_promptly(ctx: CaseContext) -> None:
    """check_health returns a real bool within the bound, every time it is asked."""
    bound = ctx.options.health_timeout
    for attempt in range(1, _PROBES + 1):
        value, error, elapsed, hung = _probe(ctx)
        check = f"check_health() call {attempt}"
        ctx.expect(not hung, check, f"an answer within {bound:g}s", "no answer (still running)")
        ctx.expect(error is None, check, "no exception",
                   f"raised {describe_exception(error)}" if error else "")
        ctx.expect(type(value) is bool, check, "a bool",  # noqa: E721 - bool subclasses too
                   f"{type(value).__name__} {value!r}")
        ctx.expect(elapsed <= bound, check, f"within {bound:g}s", f"{elapsed:.2f}s")


@case("health")
def reports_up(ctx: CaseContext) -> None:
    """Against the reachable store under test, check_health answers True."""
    value, error, _elapsed, hung = _probe(ctx)
    if hung or error is not None or type(value) is not bool:  # noqa: E721
        ctx.fail("check_health() on a reachable store", "True",
                 "see health.answers_bool_promptly")
    ctx.expect_equal(value, True, "check_health() on the store the suite is writing to")
