"""``semvecctl conformance``: certify a backend against the contract.

What authors run before they ship and operators run before they trust a live store. The
cases themselves live in ``backends.conformance``; this module picks the adapter, shows
progress (a live table, on a TTY only), renders the report and sets the exit status
(1 when any case failed or errored).
"""


import sys
from pathlib import Path
from typing import Any, Optional

import typer

from semvecctl.application import current
from semvecctl.commands import help_of
from semvecctl.connection import Connection
from semvecctl.exit_codes import ExitCode
from semvecctl.metrics import recorder
from semvecctl.options import (KnownFailures, MetricsFile, NamedBackend, Output, Overwrite, store_command)
from semvecctl.output import Column, OutputFormat
from semvecctl.report import ReportFile

NAME = "conformance"
HELP = help_of(NAME)
app = typer.Typer(no_args_is_help=True, help=HELP)

_MARKS = {"passed": "ok", "failed": "FAIL", "error": "ERROR", "not-applicable": "n/a",
          "skipped": "skip", "advisory": "advisory", "expected-failure": "known"}


def _split_only(only: Optional[list[str]]) -> Optional[list[str]]:
    if not only:
        return None
    parts = [p.strip() for item in only for p in item.split(",") if p.strip()]
    return parts or None


def _selected_name(spec: Any, backend_flag: Optional[str]) -> Optional[str]:
    """The name the adapter must answer to: the one it was selected by."""
    if spec.adapter_factory:
        return backend_flag  # only when the author also named it
    return spec.backend


def _refuse_fallback(spec: Any) -> None:
    """An unknown name would silently certify ``memory``: refuse instead."""
    if spec.adapter_factory:
        return
    from backends.registry import Registry

    resolution = Registry().resolve(spec.backend)
    if resolution.fell_back:
        hint = (f"; did you mean {', '.join(repr(c) for c in resolution.close_matches)}?"
                if resolution.close_matches else "")
        current().abort(f"unknown backend {spec.backend!r}: conformance does not certify "
                        f"'memory' in its place{hint}", ExitCode.USAGE)


def _factory_for(spec: Any):
    """Build adapters for the run. ``--adapter`` targets are called directly (no
    registry contract check) so that a missing member is reported by the contract
    group, case by case, instead of aborting the run."""
    from semvecctl.connection import adapter_factory, build_adapter

    if spec.adapter_factory:
        return adapter_factory(spec)
    return lambda: build_adapter(spec)


def _recipe_for(spec: Any) -> Any:
    """How child processes rebuild the adapter (the cross-process cases): the same
    registry name and URI, or the same ``--adapter`` target with the same arguments."""
    from backends.conformance.children import registry_recipe, target_recipe

    if spec.adapter_factory:
        from semvecctl.connection import adapter_factory_kwargs

        return target_recipe(spec.adapter_factory, adapter_factory_kwargs(spec))
    return registry_recipe(spec.backend, spec.uri, dict(spec.options))


def _known_failures(path: Optional[str]) -> Any:
    if path is None:
        return None
    from backends.conformance.known import KnownFailuresError, load_known_failures

    try:
        return load_known_failures(path)
    except KnownFailuresError as exc:
        current().abort(f"--known-failures: {exc}", ExitCode.USAGE, cause=None)


def _preflight(adapter: Any, spec: Any, timeout: float) -> None:
    """Exit 4 when the store cannot be reached: nothing would be certified."""
    from backends.probe import call_with_timeout

    check = getattr(adapter, "check_health", None)
    if not callable(check):
        return  # the contract group reports it
    outcome = call_with_timeout(check, timeout)
    if outcome.timed_out or (outcome.error is None and outcome.value is False):
        what = "did not answer" if outcome.timed_out else "answered False"
        current().abort(
             f"backend {getattr(adapter, 'name', spec.backend)!r} at {spec.display_uri} is "
             f"unreachable (check_health {what}); nothing was certified", ExitCode.UNREACHABLE)


class _LiveTable:
    """A table on stderr redrawn as each case finishes (TTY only)."""

    def __init__(self, out: Any, cases: list[Any]) -> None:
        from rich.live import Live

        self._rows = {c.case_id: (c.group, c.name, "…", "") for c in cases}
        self._live = Live(self._render(), console=out.console(sys.stderr), transient=True,
                          auto_refresh=False)

    def _render(self):
        from rich.table import Table

        table = Table(box=None, pad_edge=False, show_edge=False)
        for header in ("GROUP", "CASE", "STATUS", "TIME"):
            table.add_column(header)
        for group, name, status, seconds in self._rows.values():
            style = {"FAIL": "bold red", "ERROR": "bold red", "ok": "green"}.get(status, "dim")
            table.add_row(group, name, f"[{style}]{status}[/]", seconds)
        return table

    def __enter__(self) -> "_LiveTable":
        self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._live.__exit__(*exc)

    def update(self, result: Any) -> None:
        self._rows[result.case_id] = (result.group, result.case, _MARKS[result.status],
                                      f"{result.duration:.2f}s")
        self._live.update(self._render(), refresh=True)


def _stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _render_table(out: Any, report: Any) -> None:
    out.table(
        [Column("GROUP", "group"), Column("CASE", "case"),
         Column("STATUS", lambda r: _MARKS[r.status]),
         Column("TIME", lambda r: f"{r.duration:.2f}s", justify="right"),
         Column("DETAIL", lambda r: r.message)],
        report.cases,
        title=f"conformance of backend {report.backend!r}"
              + (f" at {report.target}" if report.target else ""),
    )
    out.write("")
    out.table([Column("GROUP", "name"), Column("STATUS", "status"),
               Column("CASES", lambda g: len(g.cases)), Column("NOTE", "reason")],
              report.groups)
    failures = report.failures
    if failures:
        out.write("")
        lines = ["failures:"]
        for case in failures:
            lines.append(f"  {case.case_id} [{case.status}]")
            if case.expected is not None:
                check = case.message.split(": expected ", 1)[0]
                lines += [f"    check:    {check}", f"    expected: {case.expected}",
                          f"    actual:   {case.actual}"]
            else:
                lines.append(f"    {case.message}")
        out.write("\n".join(lines))
    caps = report.capabilities
    if caps:
        out.write("")
        out.write(f"capabilities: persistent={caps.get('is_persistent')} "
                  f"event_store={caps.get('event_store') or 'none'} "
                  f"retrieval_backend={caps.get('retrieval_backend') or 'none (in-process)'} "
                  f"seams={', '.join(caps.get('seams') or []) or 'none'}")
    out.write("")
    if report.known_failures is not None:
        out.write(f"level: {report.level} with known divergences accepted "
                  f"(strict level: {report.strict_level})")
    else:
        out.write(f"level: {report.level}")


def _planned(only: Optional[list[str]]) -> list[Any]:
    """The cases ``--only`` selects (every case without it); exit 2 naming an id that is
    no group or case, before any store is touched."""
    from backends.conformance import plan

    try:
        return plan(only)
    except ValueError as exc:
        current().abort(str(exc), ExitCode.USAGE, cause=None)


def _topology(path: Optional[Path], spec: Any) -> Any:
    """The --failover file's deployment (exit 2 naming what is wrong in it), or None."""
    if path is None:
        return None
    from backends.conformance.failover import TopologyError, load_topology

    try:
        return load_topology(str(path), backend=spec.backend, run_uri=spec.uri)
    except TopologyError as exc:
        current().abort(f"--failover {path}: {exc}", ExitCode.USAGE, cause=None)


def _options(spec: Any, topology: Any, *, writers: int, health_timeout: float,
             allow_provisioning: bool, dimensions: Optional[int], history: Optional[Path],
             seed: Optional[int]) -> Any:
    from backends.conformance import ConformanceOptions
    from backends.conformance.context import redis_url_of

    if history is not None:
        history.mkdir(parents=True, exist_ok=True)
    return ConformanceOptions(writers=writers, health_timeout=health_timeout,
                              redis_url=redis_url_of(spec.uri),
                              allow_provisioning=allow_provisioning,
                              retrieval_dimensions=dimensions, index_dimensions=dimensions,
                              failover=topology, failover_seed=seed,
                              failover_history=None if history is None else str(history))


def _adapters(spec: Any, health_timeout: float) -> Any:
    """What the run calls for each adapter it needs: the first one built and probed now
    (a driver missing or a bad URI exits 3, an unreachable store 4), then new ones."""
    factory = _factory_for(spec)
    first = factory()
    _preflight(first, spec, health_timeout)
    pending = [first]

    def adapters() -> Any:
        return pending.pop() if pending else factory()

    return adapters


def _write_report(out: Any, report: Any, output: OutputFormat, junit: Optional[Path],
                  report_file: Any) -> None:
    """The report in every form asked for: the JUnit XML and --report files, then the
    table or the document on stdout."""
    from backends.conformance import write_junit_xml

    from semvecctl.report import write_report

    if junit is not None:
        write_junit_xml(report, junit)
    write_report(report_file, "conformance", report.to_dict())
    if output == OutputFormat.table:
        _render_table(out, report)
    else:
        out.emit(report.to_dict(), output)
    if junit is not None:
        out.info(f"JUnit XML written to {junit}")


@app.command("run")
@store_command(backend=NamedBackend)
def run(*,
    conn: Connection,
    only: Optional[list[str]] = typer.Option(
        None, "--only", help="Run only these groups or group.case ids (repeat or comma-separate).",
        show_default=False),
    junit: Optional[Path] = typer.Option(
        None, "--junit", help="Also write JUnit XML here (one testsuite per group).",
        show_default=False, dir_okay=False),
    writers: int = typer.Option(8, "--writers", min=2,
                                help="Threads racing in the concurrency cases."),
    health_timeout: float = typer.Option(5.0, "--health-timeout", min=0.01,
                                         help="Seconds check_health may take."),
    allow_provisioning: bool = typer.Option(
        False, "--allow-provisioning",
        help="Let the indexes group create missing indexes (changes the store for everyone)."),
    dimensions: Optional[int] = typer.Option(
        None, "--dimensions", min=2, show_default=False,
        help="Embedding width for the retrieval and indexes groups (default: the backend's)."),
    report_file: ReportFile = None,
    overwrite: Overwrite = False,
    known_failures: KnownFailures = None,
    output: Output = OutputFormat.table,
    metrics_file: MetricsFile = None,
    failover: Optional[Path] = typer.Option(
        None, "--failover", show_default=False, dir_okay=False,
        help="Run the failover group on the deployment this YAML file describes (replica:, "
             "fail:, promote:, after:, synchronous:): it FAILS THE PRIMARY."),
    failover_history: Optional[Path] = typer.Option(
        None, "--failover-history", show_default=False, file_okay=False,
        help="Keep the failover writers' histories in this directory (one file each)."),
    failover_seed: Optional[int] = typer.Option(
        None, "--failover-seed", show_default=False,
        help="Seed of the failure moment (the report gives the one it used)."),
) -> None:
    """Run the conformance cases against one backend; exit 1 if any case fails or none applies.

    With --known-failures, listed cases that fail are expected failures (exit 0 if nothing
    else fails) and listed cases that pass fail the run."""
    from backends.conformance import run_conformance

    out = current().output
    current().may_replace(junit, overwrite=overwrite, option="--junit")
    current().may_replace(report_file, overwrite=overwrite, option="--report")
    metrics = recorder(metrics_file, "conformance run")
    only_list = _split_only(only)
    cases = _planned(only_list)
    known = _known_failures(known_failures)
    spec = conn.spec
    if spec.origin == "default":
        current().abort("name the backend to certify: --backend NAME, --uri URI or "
                        "--adapter module:factory", ExitCode.USAGE)
    _refuse_fallback(spec)
    topology = _topology(failover, spec)
    adapters = _adapters(spec, health_timeout)
    options = _options(spec, topology, writers=writers, health_timeout=health_timeout,
                       allow_provisioning=allow_provisioning, dimensions=dimensions,
                       history=failover_history, seed=failover_seed)
    kwargs = dict(selected_name=_selected_name(spec, conn.backend), only=only_list,
                  options=options, target=spec.display_uri if spec.uri else "",
                  recipe=_recipe_for(spec), known_failures=known)
    if _stderr_is_tty() and output == OutputFormat.table:
        with _LiveTable(out, cases) as live:
            report = run_conformance(adapters, on_result=live.update, **kwargs)
    else:
        report = run_conformance(adapters, **kwargs)
    metrics.track(report)
    _write_report(out, report, output, junit, report_file)
    if report.ok:
        out.success(report.summary())
    else:
        current().abort(report.summary(), ExitCode.CHECK_FAILED)


@app.command("list")
def list_cases(
    only: Optional[list[str]] = typer.Option(None, "--only", show_default=False,
                                             help="Groups or group.case ids."),
    output: Output = OutputFormat.table,
) -> None:
    """List the groups and cases (what --only accepts) without touching any store."""
    from backends.conformance import GROUP_DOCS

    cases = _planned(_split_only(only))
    rows = [{"group": c.group, "case": c.name, "id": c.case_id, "checks": c.doc} for c in cases]
    if output == OutputFormat.table:
        current().output.table([Column("ID", "id"), Column("CHECKS", "checks")], rows)
    else:
        current().output.emit({"groups": GROUP_DOCS, "cases": rows}, output)
