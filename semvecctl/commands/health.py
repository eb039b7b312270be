"""``semvecctl health``: a live probe usable as a CI or readiness gate.

Exit 0 healthy (and every gate passed), 1 a gate failed, 3 environment error, 4
unreachable or timed out. ``-o json`` is the machine-readable report.
"""


import time
from typing import Any

import typer

from semvecctl.application import current
from semvecctl.connection import open_adapter, resolve_connection
from semvecctl.exit_codes import ExitCode
from semvecctl.options import AdapterFactory, Backend, Output, Timeout, Uri
from semvecctl.output import Column, OutputFormat

NAME = "health"
HELP = "Probe a backend (check_health, bounded by a timeout); exit 0/1/3/4 for CI gates."


def app(
    backend: Backend = None,
    uri: Uri = None,
    adapter: AdapterFactory = None,
    timeout: Timeout = 5.0,
    require_persistent: bool = typer.Option(False, "--require-persistent", help="Exit 1 unless the backend keeps state across restarts."),
    require_durable: bool = typer.Option(False, "--require-durable", help="Exit 1 unless the server is configured not to lose writes (e.g. Redis AOF on, no eviction)."),
    output: Output = OutputFormat.table,
) -> None:
    """Probe a backend (check_health, bounded by a timeout); exit 0/1/3/4 for CI gates."""
    from backends.contract import HealthDetails
    from backends.probe import call_with_timeout

    out = current().output
    spec = resolve_connection(backend, uri, adapter)
    with open_adapter(spec) as adapter_obj:
        started = time.monotonic()
        outcome = call_with_timeout(adapter_obj.check_health, timeout)
        latency_ms = round((time.monotonic() - started) * 1000, 1)
        healthy = outcome.value is True
        if outcome.timed_out:
            state = "timed out"
        elif outcome.error is not None:
            state = "error"
        else:
            state = "healthy" if healthy else "unreachable"
        persistent = bool(getattr(type(adapter_obj), "is_persistent", False))
        details: dict[str, Any] = {}
        if healthy and isinstance(adapter_obj, HealthDetails):
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
            "gates": gates,
            "details": details,
        }
        if outcome.error is not None:
            report["error"] = f"{type(outcome.error).__name__}: {outcome.error}"

    rows = [{"field": k, "value": v} for k, v in report.items()
            if k not in ("gates", "details") and v not in (None, "")]
    rows += [{"field": f"gate {g['gate']}", "value": "passed" if g["passed"] else f"FAILED: {g['reason']}"} for g in gates]
    rows += [{"field": k, "value": v} for k, v in details.items()]
    out.emit(report, output, columns=[Column("CHECK", "field", style="bold"), Column("RESULT", "value")], rows=rows)
    if not healthy:
        out.error(f"backend {report['backend']!r} at {spec.display_uri} is {state} (timeout {timeout:g}s)")
        raise typer.Exit(ExitCode.UNREACHABLE)
    if any(not g["passed"] for g in gates):
        for gate in gates:
            if not gate["passed"]:
                out.error(f"gate {gate['gate']} failed: {gate['reason']}")
        raise typer.Exit(ExitCode.CHECK_FAILED)
