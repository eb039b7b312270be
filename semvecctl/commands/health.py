"""``semvecctl health``: a live probe usable as a CI or readiness gate.

Exit 0 healthy (and every gate passed), 1 a gate failed, 3 environment error, 4
unreachable or timed out. ``-o json`` is the machine-readable report.
"""


from typing import Any

import typer

from semvecctl.application import current
from semvecctl.commands import help_of
from semvecctl.connection import Connection
from semvecctl.exit_codes import ExitCode, exit_code_of
from semvecctl.metrics import recorder
from semvecctl.options import (MetricsFile, Output, store_command, Timeout, Watch)
from semvecctl.output import Column, OutputFormat

NAME = "health"
HELP = help_of(NAME)


def categorise(exc: BaseException) -> dict[str, Any]:
    """One category, exit code and line for why a backend is unhealthy: the category
    from the library (:func:`backends.ops.health.cause_of`, through the cause chain),
    the exit code from :data:`semvecctl.exit_codes.EXIT_CODES`: refused credentials and
    TLS or configuration problems are the environment (3), a host that does not answer or
    a transient failure is unreachable (4), anything unclassified is 3 as in every other
    command."""
    from backends.ops.health import cause_of

    return _cause(cause_of(exc))


def _cause(cause: Any) -> dict[str, Any]:
    return {"category": cause.label, "exit": int(exit_code_of(cause.kind)),
            "message": cause.message}


def _part_line(part: dict[str, Any]) -> str:
    """One database of a deployment: reachable with its latency, or why not."""
    if not part.get("reachable"):
        return f"UNREACHABLE {part['uri']}: {part.get('error') or 'no answer'}"
    return f"reachable {part.get('latency_ms', '?')} ms {part['uri']}"


def _rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The table of a report: its fields, its gates, then the server's details (a detail
    the report already gives is not repeated) and each database of a deployment."""
    gates, details = report["gates"], report["details"]
    rows = [{"field": k, "value": v} for k, v in report.items()
            if k not in ("gates", "details") and v not in (None, "")]
    rows += [{"field": f"gate {g['gate']}",
              "value": "passed" if g["passed"] else f"FAILED: {g['reason']}"} for g in gates]
    shown = {r["field"] for r in rows}
    rows += [{"field": k if k not in shown else f"server {k}", "value": v}
             for k, v in details.items()
             if k != "databases" and not (k in shown and v == report.get(k))]
    rows += [{"field": f"database {part['database']}", "value": _part_line(part)}
             for part in details.get("databases") or ()]
    return rows


def _watch(adapter_obj: Any, spec: Any, timeout: float, every: float) -> None:
    """Probe every ``every`` seconds until Ctrl-C: a line per probe on a pipe."""
    from backends.ops.health import probe
    from semvecctl.watch import stamp, watch

    def line(report: dict[str, Any]) -> str:
        text = (f"{stamp()} {report['backend']} {report['status']} "
                f"{report['latency_ms']:g} ms")
        if report.get("cause_detail"):
            text += f": {report['cause_detail']}"
        return text

    watch(lambda: probe(adapter_obj, spec.display_uri, timeout)[0], line, every=every)


@store_command()
def app(*,
    conn: Connection,
    timeout: Timeout = 5.0,
    require_persistent: bool = typer.Option(False, "--require-persistent", help="Exit 1 unless the backend keeps state across restarts."),
    require_durable: bool = typer.Option(False, "--require-durable", help="Exit 1 unless the server is configured not to lose writes (e.g. Redis AOF on, no eviction)."),
    require_replicated: bool = typer.Option(False, "--require-replicated", help="Exit 1 unless an acknowledged write is on a second server before it is acknowledged (PostgreSQL with a synchronous standby; never the engine's Redis, which does not wait for replicas)."),
    require_bounded_loss: float = typer.Option(None, "--require-bounded-loss", metavar="SECONDS", min=0, max=86400.0, help="Exit 1 unless a failover can lose at most SECONDS of acknowledged writes (Redis: min-replicas-to-write >= 1 with min-replicas-max-lag <= SECONDS; PostgreSQL: a synchronous standby)."),
    output: Output = OutputFormat.table,
    metrics_file: MetricsFile = None,
    watch: Watch = None,
) -> None:
    """Probe a backend (check_health, bounded by a timeout); exit 0/1/3/4 for CI gates."""
    from backends.ops.health import probe

    out = current().output
    metrics = recorder(metrics_file, NAME)
    spec = conn.spec
    with conn.open() as adapter_obj:
        if watch is not None:
            _watch(adapter_obj, spec, timeout, watch)
        report, cause = probe(adapter_obj, spec.display_uri, timeout,
                              require_persistent=require_persistent,
                              require_durable=require_durable,
                              require_replicated=require_replicated,
                              require_bounded_loss=require_bounded_loss)
        metrics.track(report)
    out.emit(report, output, columns=[Column("CHECK", "field", style="bold"),
                                      Column("RESULT", "value")], rows=_rows(report))
    if cause is not None:
        current().abort(f"backend {report['backend']!r} at {spec.display_uri} is unhealthy "
                        f"({report['status']}): {cause.message} (timeout {timeout:g}s)",
                        exit_code_of(cause.kind))
    failed = [f"gate {g['gate']} failed: {g['reason']}" for g in report["gates"]
              if not g["passed"]]
    for line in failed[:-1]:
        out.error(line)
    if failed:
        current().abort(failed[-1], ExitCode.CHECK_FAILED)
