"""One live probe of an open adapter (``semvecctl health``): healthy or not, why not, and
the gates a CI job asks for.

``check_health`` answers only yes or no, bounded by a timeout; when it says no, the
probe recovers the categorised error (one read of a session no one writes, or the
databases of a sharded deployment that did not answer) so that the caller can say why.
The cause carries its :class:`~backends.errors.Category`; what that means to a process
(an exit code) is the caller's to decide.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from backends.errors import CATEGORIES, Category

#: a session id no one writes: reading it tells why a store is unhealthy
DIAGNOSIS_ID = "__semvecctl_health_diagnosis__"


@dataclass(frozen=True)
class Cause:
    """Why a backend is unhealthy: its category, the label the report shows, one line."""

    kind: Category
    message: str

    @property
    def label(self) -> str:
        return CATEGORIES[self.kind].health


def cause_of(exc: BaseException) -> Cause:
    """The cause an exception explains, read through its cause chain
    (:func:`backends.errors.diagnosis_of`: refused credentials, TLS and configuration
    problems anywhere in it explain it first)."""
    from backends.errors import diagnosis_of

    text = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
    kind = diagnosis_of(exc)
    return Cause(kind, f"{text}; retry" if kind is Category.TRANSIENT else text)


def diagnose(adapter: Any, error: BaseException | None, budget: float) -> Cause:
    """Why the probe failed: ``error`` when the probe raised one, else the categorised
    error one read of a session no one writes raises (bounded by ``budget``)."""
    from backends.probe import call_with_timeout

    if error is None:
        got = call_with_timeout(lambda: adapter.state_store().current_version(DIAGNOSIS_ID),
                                budget)
        if got.error is not None:
            error = got.error
        elif got.timed_out:
            return Cause(Category.UNREACHABLE,
                         "the health probe failed and a read got no answer in time")
        else:
            return Cause(Category.UNREACHABLE,
                         "the health probe failed though a read succeeded (flapping?)")
    return cause_of(error)


def part_down(adapter: Any, budget: float) -> Cause | None:
    """Which databases of a deployment of several (the engine's SQL shards) did not
    answer, named, or None: one down is the deployment unhealthy, never a smaller green."""
    from backends.contract import Capability, offers
    from backends.probe import call_with_timeout

    if not offers(adapter, Capability.HEALTH_DETAILS):
        return None
    got = call_with_timeout(adapter.health_details, budget, budget)
    parts = got.value.get("databases") if isinstance(got.value, dict) else None
    down = [p for p in parts or () if not p.get("reachable")]
    if not down:
        return None
    return Cause(Category.UNREACHABLE, "; ".join(
        f"{p['database']} ({p['uri']}) is unreachable: {p.get('error') or 'no answer'}"
        for p in down))


def _check(adapter: Any, timeout: float) -> tuple[Any, bool]:
    """``check_health`` bounded by ``timeout``, which is passed to an adapter that takes
    one; and whether it did."""
    from backends.probe import call_with_timeout
    from backends.registry import accepts_keyword

    takes_timeout = accepts_keyword(adapter.check_health, "timeout")
    if takes_timeout:
        return call_with_timeout(lambda: adapter.check_health(timeout=timeout), timeout), True
    return call_with_timeout(adapter.check_health, timeout), False


def _details(adapter: Any, budget: float) -> dict[str, Any]:
    """The adapter's health details, bounded by ``budget`` ({} when it offers none)."""
    from backends.contract import Capability, offers
    from backends.probe import call_with_timeout

    if not offers(adapter, Capability.HEALTH_DETAILS):
        return {}
    got = call_with_timeout(adapter.health_details, budget, budget)
    if isinstance(got.value, dict):
        return got.value
    if got.timed_out:
        return {"error": "health details timed out"}
    if got.error is not None:
        return {"error": f"{type(got.error).__name__}: {got.error}"}
    return {}


def gates(name: str, persistent: bool, details: dict[str, Any], *,
          require_persistent: bool, require_durable: bool,
          require_replicated: bool = False,
          require_bounded_loss: float | None = None) -> list[dict[str, Any]]:
    """The gates asked for, each passed or with the reason it failed."""
    found = []
    if require_bounded_loss is not None:
        found.append(bounded_loss_gate(persistent, details, require_bounded_loss))
    if require_persistent:
        found.append({"gate": "persistent", "passed": persistent, "reason": "" if persistent
                      else f"backend {name!r} keeps state only in this process"})
    if require_durable:
        durable = bool(details.get("durable")) and persistent
        reason = "" if durable else (
            details.get("durability_reason") or details.get("reason")
            or ("backend is not persistent" if not persistent
                else "durability unknown: the backend reports no durability facts"))
        found.append({"gate": "durable", "passed": durable, "reason": reason})
    if require_replicated:
        replicated = bool(details.get("replicated")) and persistent
        found.append({"gate": "replicated", "passed": replicated, "reason": "" if replicated
                      else _unreplicated_reason(persistent, details)})
    return found


def bounded_loss_gate(persistent: bool, details: dict[str, Any], seconds: float
                      ) -> dict[str, Any]:
    """Passed when a failover can lose at most ``seconds`` of acknowledged writes: the
    backend's ``loss_bound_s`` (Redis: min-replicas-max-lag under min-replicas-to-write),
    or 0 where replication is synchronous."""
    bound = 0 if details.get("replicated") is True else details.get("loss_bound_s")
    passed = persistent and bound is not None and bound <= seconds
    if passed:
        reason = ""
    elif not persistent:
        reason = "backend is not persistent"
    elif bound is not None:
        reason = f"a failover can lose up to {bound:g} s, more than {seconds:g} s: " + \
            str(details.get("loss_bound", ""))
    elif details.get("loss_bound"):
        reason = str(details["loss_bound"])
    elif "replicated" in details:  # a store that says only whether commits wait
        reason = "no bound: " + _unreplicated_reason(persistent, details)
    else:
        reason = "the backend reports no loss bound"
    return {"gate": "bounded-loss", "passed": passed, "reason": reason}


def _unreplicated_reason(persistent: bool, details: dict[str, Any]) -> str:
    """Why an acknowledged write is not sure to be on a second server."""
    if not persistent:
        return "backend is not persistent"
    if details.get("read_only_replica") or details.get("writable") is False:
        return str(details.get("durability_reason") or details.get("reason"))
    if details.get("replication_reason"):
        return str(details["replication_reason"])
    if "replicated" not in details:
        return "replication unknown: the backend reports no replication facts"
    return ("no synchronous standby: " + str(details.get("replication") or "no standby")
            + "; set synchronous_standby_names and synchronous_commit on the primary")


def probe(adapter: Any, display_uri: str, timeout: float, *, require_persistent: bool = False,
          require_durable: bool = False, require_replicated: bool = False,
          require_bounded_loss: float | None = None) -> tuple[dict[str, Any], Cause | None]:
    """One probe: the report (what ``-o json`` prints) and why the backend is unhealthy
    (None when healthy)."""
    started = time.monotonic()
    outcome, takes_timeout = _check(adapter, timeout)
    latency_ms = round((time.monotonic() - started) * 1000, 1)
    healthy = outcome.value is True
    cause: Cause | None = None
    state = "healthy"
    if outcome.timed_out:
        state, cause = "timed out", Cause(Category.UNREACHABLE, f"no answer within {timeout:g}s")
    elif not healthy:
        state = "error" if outcome.error is not None else "unreachable"
        remaining = max(timeout - (time.monotonic() - started), 0.1)
        cause = part_down(adapter, remaining) or diagnose(adapter, outcome.error, remaining)
        if cause.label != "unreachable":
            state = cause.label
    persistent = bool(getattr(type(adapter), "is_persistent", False))
    details = _details(adapter, max(timeout - (time.monotonic() - started), 0.05)) \
        if healthy else {}
    report = {
        "backend": adapter.name, "uri": display_uri, "status": state, "healthy": healthy,
        "persistent": persistent, "latency_ms": latency_ms, "timeout_s": timeout,
        "timeout_passed_to_adapter": takes_timeout,
        "gates": gates(adapter.name, persistent, details, require_persistent=require_persistent,
                       require_durable=require_durable, require_replicated=require_replicated,
                       require_bounded_loss=require_bounded_loss),
        "details": details,
    }
    if outcome.error is not None:
        report["error"] = f"{type(outcome.error).__name__}: {outcome.error}"
    if cause is not None:
        report["cause"] = cause.label
        report["cause_detail"] = cause.message
    return report, cause
