"""``semvecctl indexes plan|ensure|validate``: explicit index provisioning.

Generic over the ``IndexManager`` seam, so any backend that provisions indexes (mongo,
pgvector, a third-party one) plugs in; a backend without the seam has nothing to
provision, which is a fine answer (exit 0). ``ensure`` is the only command that writes,
and it previews unless told to apply; ``validate`` only reads and exits like
``kubectl diff``: 0 all match, 1 drift, 2+ errors; drift of an index the backend only
recommends (``IndexSpec.required`` False) is a warning unless ``--strict``. ``plan`` and
``ensure`` exit 1 naming what ensure leaves short of the plan (a mismatch it leaves alone,
such as an embedding column of another dimension, which not even --recreate changes).
"""


from typing import Annotated, Any, Optional

import typer

from semvecctl.application import current
from semvecctl.commands import help_of
from semvecctl.connection import Connection
from semvecctl.exit_codes import ExitCode
from semvecctl.options import (Apply, Output, Overwrite, store_command, WaitTimeout, Watch, WatchTimeout, Yes)
from semvecctl.output import Column, OutputFormat
from semvecctl.report import ReportFile

NAME = "indexes"
HELP = help_of(NAME)
app = typer.Typer(no_args_is_help=True, help=HELP)

Dimensions = Annotated[
    Optional[int],
    typer.Option("--dimensions", "-d", min=1, show_default=False,
                 help="Embedding dimension for vector indexes (default: the backend's configuration, "
                      "or inferred from stored items)."),
]

#: ensure outcomes that leave the backend short of what it needs
_UNRESOLVED_ACTIONS = ("mismatch", "unsupported", "skip")


def _nothing_to_provision(adapter: Any, output: OutputFormat, spec: Any, key: str) -> dict[str, Any]:
    """Say so (and emit it for machines); returns what was emitted, for a report."""
    name = getattr(adapter, "name", "?")
    current().output.info(f"nothing to provision for backend {name}")
    data = {"backend": name, "uri": spec.display_uri, "ok": True, key: [],
            "note": f"nothing to provision for backend {name}"}
    if output != OutputFormat.table:
        current().output.emit(data, output)
    return data


def _action_row(action: Any, definitions: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": action.name,
        "target": action.target,
        "kind": action.kind,
        "action": action.action,
        "applied": action.applied,
        "detail": action.detail,
        "definition": definitions.get((action.target, action.name)),
    }


_ACTION_COLUMNS = [
    Column("INDEX", "name", style="bold"),
    Column("TARGET", "target"),
    Column("KIND", "kind"),
    Column("ACTION", "action"),
    Column("DETAIL", "detail"),
]


def _preview(adapter_obj, dimensions, recreate):
    """The manifest's definitions (for display) and what ensure would do, without writing."""
    definitions = {(spec.target, spec.name): spec.definition
                   for spec in adapter_obj.index_plan(dimensions=dimensions)}
    return definitions, adapter_obj.ensure_indexes(dimensions=dimensions, recreate=recreate,
                                                   apply=False)


@app.command("plan")
@store_command()
def plan(*,
    conn: Connection,
    dimensions: Dimensions = None,
    recreate: bool = typer.Option(False, "--recreate", help="Plan as if ensure --recreate were given."),
    output: Output = OutputFormat.table,
) -> None:
    """Show what `indexes ensure` would do. Reads only; never writes."""
    from backends.contract import Capability, offers

    out = current().output
    spec = conn.spec
    with conn.open() as adapter_obj:
        if not offers(adapter_obj, Capability.INDEXES):
            _nothing_to_provision(adapter_obj, output, spec, "indexes")
            return
        definitions, actions = _preview(adapter_obj, dimensions, recreate)
        rows = [_action_row(a, definitions) for a in actions]
        out.emit({"backend": adapter_obj.name, "uri": spec.display_uri, "indexes": rows},
                 output, columns=_ACTION_COLUMNS, rows=rows)
    pending = [r for r in rows if r["action"] in ("create", "update", "recreate")]
    out.info(f"{len(pending)} change(s) would be made; nothing was written"
             if pending else "nothing to change")
    _refuse_unresolved(rows, "ensure would leave")


def _refuse_unresolved(rows: list[dict[str, Any]], what: str) -> None:
    """Exit 1 naming every index ensure cannot bring in line (a mismatch it leaves alone,
    such as an embedding column of another dimension, which not even --recreate changes):
    the preview exits as the apply would."""
    unresolved = [r for r in rows if r["action"] in _UNRESOLVED_ACTIONS]
    for row in unresolved:
        current().output.warn(f"{row['name']} ({row['target']}): {row['action']}: {row['detail']}")
    if unresolved:
        current().abort(f"{what} {len(unresolved)} index(es) short of the plan: "
                        + ", ".join(r["name"] for r in unresolved), ExitCode.CHECK_FAILED)


@app.command("ensure")
@store_command()
def ensure(*,
    conn: Connection,
    dimensions: Dimensions = None,
    recreate: bool = typer.Option(False, "--recreate",
                                  help="Drop and rebuild (or update in place) indexes whose options differ."),
    wait: bool = typer.Option(False, "--wait", help="Wait until every search index is READY and queryable."),
    timeout: WaitTimeout = 600.0,
    poll: float = typer.Option(5.0, "--poll", min=0.01, help="Seconds between --wait status checks."),
    apply: Apply = False,
    yes: Yes = False,
    output: Output = OutputFormat.table,
) -> None:
    """Create missing indexes, update in place what the backend can (a Mongo TTL), report
    mismatches (rebuilt only with --recreate). A preview unless --apply, which asks first."""
    from backends.contract import Capability, offers

    out = current().output
    apply = current().wants_apply(apply=apply, yes=yes)
    spec = conn.spec
    with conn.open() as adapter_obj:
        if not offers(adapter_obj, Capability.INDEXES):
            _nothing_to_provision(adapter_obj, output, spec, "indexes")
            return
        definitions, preview = _preview(adapter_obj, dimensions, recreate)
        changes = [a for a in preview if a.action in ("create", "update", "recreate")]
        if changes and not apply:
            _show_preview(adapter_obj, spec, definitions, preview, len(changes), output)
            return
        applied = bool(changes)
        actions = (_apply_changes(adapter_obj, spec, changes, dimensions, recreate, yes)
                   if changes else preview)
        rows = [_action_row(a, definitions) for a in actions]
        wait_states: dict[str, str] | None = None
        wait_ok = True
        if wait:
            wait_ok, wait_states = _wait(adapter_obj, dimensions, timeout, poll)
        report = {"backend": adapter_obj.name, "uri": spec.display_uri, "applied": applied,
                  "indexes": rows}
        if wait_states is not None:
            report["search_indexes"] = wait_states
        out.emit(report, output, columns=_ACTION_COLUMNS, rows=rows)
    _refuse_unresolved(rows, "ensure left")
    if not wait_ok:
        current().abort(code=ExitCode.CHECK_FAILED)
    if applied:
        out.success(f"{sum(1 for r in rows if r['applied'])} index change(s) applied")
    else:
        out.info("nothing to change")


def _show_preview(adapter_obj: Any, spec: Any, definitions: dict[str, Any], preview: list[Any],
                  changes: int, output: OutputFormat) -> None:
    """What ensure would change, nothing applied; exit 1 as the apply would when it would
    leave an index short of the plan."""
    out = current().output
    rows = [_action_row(a, definitions) for a in preview]
    out.emit({"backend": adapter_obj.name, "uri": spec.display_uri, "applied": False,
              "indexes": rows}, output, columns=_ACTION_COLUMNS, rows=rows)
    out.info(f"preview only: {changes} change(s) not applied, nothing was "
             "changed (pass --apply to apply them)")
    _refuse_unresolved(rows, "ensure would leave")


def _apply_changes(adapter_obj: Any, spec: Any, changes: list[Any], dimensions: int | None,
                   recreate: bool, yes: bool) -> list[Any]:
    """Ask (a rebuild is named as such), then apply; returns what ensure did."""
    verb = "rebuild or change" if any(a.action == "recreate" for a in changes) else "apply"
    current().confirm(f"{verb} {len(changes)} index change(s) on backend {adapter_obj.name} "
                      f"at {spec.display_uri}", yes=yes)
    return adapter_obj.ensure_indexes(dimensions=dimensions, recreate=recreate, apply=True)


def _wait_line(states: dict[str, str]) -> str:
    """A search-index wait as one line: each state change, where nothing is redrawn."""
    return "search indexes: " + ", ".join(f"{n} {s}" for n, s in sorted(states.items()))


def _wait_table(states: dict[str, str], timeout: float) -> Any:
    """A search-index wait as a table redrawn in place on a terminal."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"waiting up to {timeout:g}s for the search indexes")
    table.add_column("INDEX")
    table.add_column("STATE")
    for name, state in sorted(states.items()):
        table.add_row(Text(name), Text(state, style="green" if state == "ready" else "yellow"))
    return table


def _wait(adapter_obj: Any, dimensions: int | None, timeout: float,
          poll: float) -> tuple[bool, dict[str, str]]:
    """``--wait``: until every search index is ready and queryable or ``timeout``; returns
    whether they are and their last states."""
    out = current().output
    from backends.contract import Capability, offers

    if not offers(adapter_obj, Capability.SEARCH_INDEX_WAIT):
        out.info(f"backend {adapter_obj.name} builds its indexes synchronously: nothing to wait for")
        return True, {}
    import functools
    import sys

    from semvecctl.watch import live

    last: dict[str, str] = {}
    render = functools.partial(_wait_table, timeout=timeout)
    with live(_wait_line, render, stream=sys.stderr) as show:  # redrawn on a TTY, a line per change else
        def progress(states: dict[str, str]) -> None:
            nonlocal last
            if states != last:
                show(dict(states))
                last = dict(states)

        result = adapter_obj.wait_for_search_indexes(timeout, poll, progress, dimensions=dimensions)
    if getattr(result, "unsupported", False):
        out.warn("cannot wait: this deployment has no Atlas Search")
        return False, dict(result.states)
    if not result.ready:
        out.error(f"search indexes not ready after {timeout:g}s: " + ", ".join(
            f"{n} {s}" for n, s in sorted(result.states.items()) if s != "ready"))
        return False, dict(result.states)
    out.success("every search index is READY and queryable")
    return True, dict(result.states)


def _report_row(report: Any, required: bool = True) -> dict[str, Any]:
    return {
        "name": report.name,
        "target": report.target,
        "kind": report.kind,
        "state": report.status,
        "ok": report.ok,
        "required": required,
        "detail": report.detail,
        "differences": [{"field": d.field, "expected": d.expected, "actual": d.actual}
                        for d in report.differences],
    }


def _differences_cell(row: dict[str, Any]) -> str:
    parts = [f"{d['field']}: want {d['expected']!r}, have {d['actual']!r}" for d in row["differences"]]
    if row["detail"] and not parts:
        parts.append(row["detail"])
    return "; ".join(parts) or "-"


def _need_cell(row: dict[str, Any]) -> str:
    return "required" if row["required"] else "recommended"


@app.command("validate")
@store_command()
def validate(*,
    conn: Connection,
    dimensions: Dimensions = None,
    strict: bool = typer.Option(False, "--strict",
                                help="Also fail (exit 1) on recommended indexes that are missing "
                                     "or differ, not only on required ones."),
    report_file: ReportFile = None,
    overwrite: Overwrite = False,
    output: Output = OutputFormat.table,
    watch: Watch = None,
    timeout: WatchTimeout = 600.0,
) -> None:
    """Compare the server's indexes with the plan, option by option. Read-only.
    Indexes the engine itself needs are required; the rest are semvecctl's
    recommendations. Exit 0 when every required index matches (a recommended one that
    is missing or differs is a warning), 1 on required drift (missing, differing
    options, not queryable) or, with --strict, on any drift; 2 or more on errors."""
    from backends.contract import Capability, offers

    from semvecctl.report import write_report

    out = current().output
    current().may_replace(report_file, overwrite=overwrite, option="--report")
    spec = conn.spec
    with conn.open() as adapter_obj:
        if not offers(adapter_obj, Capability.INDEXES):
            write_report(report_file, "indexes",
                         _nothing_to_provision(adapter_obj, output, spec, "indexes"))
            return
        required = {(s.target, s.name): bool(getattr(s, "required", True))
                    for s in adapter_obj.index_plan(dimensions=dimensions)}
        if watch is not None:  # until every required index matches (queryable) or timeout
            _watch_validate(adapter_obj, dimensions, required, strict, watch, timeout)
        rows = _validation_rows(adapter_obj, dimensions, required)
        failing = _failing(rows, strict)
        data = {"backend": adapter_obj.name, "uri": spec.display_uri, "ok": not failing,
                "strict": strict, "indexes": rows}
        out.emit(data,
                 output,
                 columns=[Column("INDEX", "name", style="bold"), Column("TARGET", "target"),
                          Column("KIND", "kind"), Column("NEED", _need_cell),
                          Column("STATE", "state"), Column("DIFFERENCES", _differences_cell)],
                 rows=rows)
    write_report(report_file, "indexes", data)
    _conclude_validation(rows, failing, strict)


def _validation_rows(adapter_obj: Any, dimensions: int | None,
                     required: dict[Any, bool]) -> list[dict[str, Any]]:
    """The server's indexes against the plan, a row each, marked required or recommended
    (an index the plan does not name counts as required)."""
    return [_report_row(r, required.get((r.target, r.name), True))
            for r in adapter_obj.validate_indexes(dimensions=dimensions)]


def _failing(rows: list[dict[str, Any]], strict: bool) -> list[dict[str, Any]]:
    """The rows that fail the check: required drift, or any drift with --strict."""
    return [r for r in rows if not r["ok"] and (r["required"] or strict)]


def _conclude_validation(rows: list[dict[str, Any]], failing: list[dict[str, Any]],
                         strict: bool) -> None:
    """A warning per recommended index that drifts, then exit 1 naming the failing ones,
    else the success line (which counts the recommended drift)."""
    out = current().output
    advisory = [r for r in rows if not r["ok"] and not r["required"] and not strict]
    for row in advisory:
        what = "statistics" if row["kind"] == "statistics" else "index"
        out.warn(f"recommended {what} {row['name']} ({row['target']}) is {row['state']}: "
                 "semvecctl suggests it, the engine does not need it (--strict to fail on it)")
    if failing:
        current().abort(f"{len(failing)} of {len(rows)} index(es) do not match: "
                        + ", ".join(f"{r['name']} {r['state']}" for r in failing),
                        ExitCode.CHECK_FAILED)
    if advisory:
        out.success(f"every required index matches ({len(advisory)} recommended one(s) "
                    "missing or different)")
    else:
        out.success(f"all {len(rows)} index(es) match")


def _watch_validate(adapter_obj: Any, dimensions: int | None, required: dict[Any, bool],
                    strict: bool, every: float, timeout: float) -> None:
    """Validate every ``every`` seconds until nothing required drifts or ``timeout``; the
    command then reports the final state as a plain ``validate`` does."""
    import sys

    from semvecctl.watch import stamp, watch

    def sample() -> list[dict[str, Any]]:
        return _validation_rows(adapter_obj, dimensions, required)

    def line(rows: list[dict[str, Any]]) -> str:
        bad = _failing(rows, strict)
        return (f"{stamp()} {len(rows) - len(bad)}/{len(rows)} index(es) match"
                + (": waiting for " + ", ".join(f"{r['name']} {r['state']}" for r in bad)
                   if bad else ""))

    def render(rows: list[dict[str, Any]]) -> Any:
        from rich.table import Table
        from rich.text import Text

        table = Table(title=line(rows))
        for column in ("INDEX", "TARGET", "STATE"):
            table.add_column(column)
        for row in rows:
            table.add_row(Text(str(row["name"])), Text(str(row["target"])),
                          Text(str(row["state"]), style="green" if row["ok"] else "yellow"))
        return table

    watch(sample, line, every=every, render=render, timeout=timeout, stream=sys.stderr,
          done=lambda rows: not _failing(rows, strict))
