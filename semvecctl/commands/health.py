"""``semvecctl health``: a live probe usable as a CI or readiness gate.

Exit 0 healthy (and every gate passed), 1 a gate failed, 3 environment error, 4
unreachable or timed out. ``-o json`` is the machine-readable report.
"""


import time
from typing import Any

import typer

from semvecctl.application import current
from semvecctl.commands import help_of
from semvecctl.connection import Connection
from semvecctl.exit_codes import ExitCode
from semvecctl.metrics import recorder
from semvecctl.options import AdapterFactory, Backend, MetricsFile, Output, Timeout, Uri, Watch
from semvecctl.output import Column, OutputFormat

NAME = "health"
HELP = help_of(NAME)


#: a session id no one writes: reading it tells why a store is unhealthy
_DIAGNOSIS_ID = "__semvecctl_health_diagnosis__"


def categorise(exc: BaseException) -> dict[str, Any]:
    """One category, exit code and line for why a backend is unhealthy, from the one
    table (``backends.errors.CATEGORIES``, read through the cause chain by
    ``diagnosis_of``): refused credentials and TLS or configuration problems are the
    environment (3), a host that does not answer or a transient failure is unreachable
    (4), anything unclassified is 3 as in every other command."""
    from backends.errors import Category, diagnosis_of

    text = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
    category = diagnosis_of(exc)
    return _cause(category, f"{text}; retry" if category is Category.TRANSIENT else text)


def _cause(category: Any, message: str) -> dict[str, Any]:
    from backends.errors import CATEGORIES

    rule = CATEGORIES[category]
    return {"category": rule.health, "exit": int(rule.exit_code), "message": message}


def diagnose(adapter_obj: Any, error: BaseException | None, budget: float) -> dict[str, Any]:
    """Why the probe failed. ``check_health`` answers only yes/no, so one read of a session
    no one writes (bounded by what is left of the timeout) recovers the categorised
    error the store raises."""
    from backends.errors import Category
    from backends.probe import call_with_timeout

    if error is None:
        got = call_with_timeout(
            lambda: adapter_obj.state_store().current_version(_DIAGNOSIS_ID), budget)
        if got.error is not None:
            error = got.error
        elif got.timed_out:
            return _cause(Category.UNREACHABLE,
                          "the health probe failed and a read got no answer in time")
        else:
            return _cause(Category.UNREACHABLE,
                          "the health probe failed though a read succeeded (flapping?)")
    return categorise(error)


def _part_down(adapter_obj: Any, budget: float) -> dict[str, Any] | None:
    """Which databases of a deployment of several (the engine's SQL shards) did not
    answer, named, or None: one down is the deployment unhealthy, never a smaller green."""
    from backends.contract import Capability, offers
    from backends.errors import Category
    from backends.probe import call_with_timeout

    if not offers(adapter_obj, Capability.HEALTH_DETAILS):
        return None
    got = call_with_timeout(adapter_obj.health_details, budget, budget)
    parts = got.value.get("databases") if isinstance(got.value, dict) else None
    down = [p for p in parts or () if not p.get("reachable")]
    if not down:
        return None
    return _cause(Category.UNREACHABLE, "; ".join(
        f"{p['database']} ({p['uri']}) is unreachable: {p.get('error') or 'no answer'}"
        for p in down))


def probe(adapter_obj: Any, spec: Any, timeout: float, require_persistent: bool = False,
          require_durable: bool = False) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """One probe of an open adapter: the report ``-o json`` prints, and why it is
    unhealthy (None when healthy)."""
    from backends.contract import Capability, offers
    from backends.errors import Category
    from backends.probe import call_with_timeout
    from backends.registry import accepts_keyword

    started = time.monotonic()
    # the timeout is passed to adapters that take one, and bounds the call either way
    takes_timeout = accepts_keyword(adapter_obj.check_health, "timeout")
    if takes_timeout:
        outcome = call_with_timeout(lambda: adapter_obj.check_health(timeout=timeout), timeout)
    else:
        outcome = call_with_timeout(adapter_obj.check_health, timeout)
    latency_ms = round((time.monotonic() - started) * 1000, 1)
    healthy = outcome.value is True
    cause: dict[str, Any] | None = None
    if outcome.timed_out:
        state = "timed out"
        cause = _cause(Category.UNREACHABLE, f"no answer within {timeout:g}s")
    elif not healthy:
        state = "error" if outcome.error is not None else "unreachable"
        remaining = max(timeout - (time.monotonic() - started), 0.1)
        cause = _part_down(adapter_obj, remaining) or diagnose(adapter_obj, outcome.error,
                                                               remaining)
        if cause["category"] != "unreachable":
            state = cause["category"]
    else:
        state = "healthy"
    persistent = bool(getattr(type(adapter_obj), "is_persistent", False))
    details: dict[str, Any] = {}
    if healthy and offers(adapter_obj, Capability.HEALTH_DETAILS):
        remaining = max(timeout - (time.monotonic() - started), 0.05)
        got = call_with_timeout(adapter_obj.health_details, remaining, remaining)
        if isinstance(got.value, dict):
            details = got.value
        elif got.timed_out:
            details = {"error": "health details timed out"}
        elif got.error is not None:
            details = {"error": f"{type(got.error).__name__}: {got.error}"}
    gates = []
    if require_persistent:
        gates.append({"gate": "persistent", "passed": persistent,
                      "reason": "" if persistent else f"backend {adapter_obj.name!r} keeps state only in this process"})
    if require_durable:
        durable = bool(details.get("durable")) and persistent
        reason = "" if durable else (
            details.get("durability_reason") or details.get("reason")
            or ("backend is not persistent" if not persistent else "durability unknown: the backend reports no durability facts")
        )
        gates.append({"gate": "durable", "passed": durable, "reason": reason})
    report = {
        "backend": adapter_obj.name,
        "uri": spec.display_uri,
        "status": state,
        "healthy": healthy,
        "persistent": persistent,
        "latency_ms": latency_ms,
        "timeout_s": timeout,
        "timeout_passed_to_adapter": takes_timeout,
        "gates": gates,
        "details": details,
    }
    if outcome.error is not None:
        report["error"] = f"{type(outcome.error).__name__}: {outcome.error}"
    if cause is not None:
        report["cause"] = cause["category"]
        report["cause_detail"] = cause["message"]
    return report, cause


def _part_line(part: dict[str, Any]) -> str:
    """One database of a deployment: reachable with its latency, or why not."""
    if not part.get("reachable"):
        return f"UNREACHABLE {part['uri']}: {part.get('error') or 'no answer'}"
    return f"reachable {part.get('latency_ms', '?')} ms {part['uri']}"


def _watch(adapter_obj: Any, spec: Any, timeout: float, every: float) -> None:
    """Probe every ``every`` seconds until Ctrl-C: a line per probe on a pipe."""
    from semvecctl.watch import stamp, watch

    def line(report: dict[str, Any]) -> str:
        text = (f"{stamp()} {report['backend']} {report['status']} "
                f"{report['latency_ms']:g} ms")
        if report.get("cause_detail"):
            text += f": {report['cause_detail']}"
        return text

    watch(lambda: probe(adapter_obj, spec, timeout)[0], line, every=every)


def app(
    backend: Backend = None,
    uri: Uri = None,
    adapter: AdapterFactory = None,
    timeout: Timeout = 5.0,
    require_persistent: bool = typer.Option(False, "--require-persistent", help="Exit 1 unless the backend keeps state across restarts."),
    require_durable: bool = typer.Option(False, "--require-durable", help="Exit 1 unless the server is configured not to lose writes (e.g. Redis AOF on, no eviction)."),
    output: Output = OutputFormat.table,
    metrics_file: MetricsFile = None,
    watch: Watch = None,
) -> None:
    """Probe a backend (check_health, bounded by a timeout); exit 0/1/3/4 for CI gates."""
    out = current().output
    metrics = recorder(metrics_file, NAME)
    conn = Connection(backend, uri, adapter, timeout=timeout)
    spec = conn.spec
    with conn.open() as adapter_obj:
        if watch is not None:
            _watch(adapter_obj, spec, timeout, watch)
        report, cause = probe(adapter_obj, spec, timeout, require_persistent, require_durable)
        metrics.track(report)
    healthy, state = report["healthy"], report["status"]
    gates, details = report["gates"], report["details"]

    rows = [{"field": k, "value": v} for k, v in report.items()
            if k not in ("gates", "details") and v not in (None, "")]
    rows += [{"field": f"gate {g['gate']}", "value": "passed" if g["passed"] else f"FAILED: {g['reason']}"} for g in gates]
    shown = {r["field"] for r in rows}  # a detail the report already gives is not repeated
    rows += [{"field": k if k not in shown else f"server {k}", "value": v}
             for k, v in details.items()
             if k != "databases" and not (k in shown and v == report.get(k))]
    rows += [{"field": f"database {part['database']}", "value": _part_line(part)}
             for part in details.get("databases") or ()]
    out.emit(report, output, columns=[Column("CHECK", "field", style="bold"), Column("RESULT", "value")], rows=rows)
    if not healthy:
        assert cause is not None
        current().abort(f"backend {report['backend']!r} at {spec.display_uri} is unhealthy "
                        f"({state}): {cause['message']} (timeout {timeout:g}s)", cause["exit"])
    failed = [f"gate {g['gate']} failed: {g['reason']}" for g in gates if not g["passed"]]
    for line in failed[:-1]:
        out.error(line)
    if failed:
        current().abort(failed[-1], ExitCode.CHECK_FAILED)
