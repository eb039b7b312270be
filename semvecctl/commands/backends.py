"""``semvecctl backends list|show|resolve``: what backends exist and what a name gives."""


from typing import Any, Optional

import typer

from semvecctl.application import current
from semvecctl.commands import help_of
from semvecctl.exit_codes import ExitCode
from semvecctl.options import Output, ResolveUri
from semvecctl.output import Column, OutputFormat

NAME = "backends"
HELP = help_of(NAME)

app = typer.Typer(no_args_is_help=True, help=HELP)

#: statuses that make ``backends list --check`` exit 1 (a missing optional driver does not)
BROKEN = frozenset({"contested", "contract-error", "import-error"})


def _row(entry: Any, check: bool) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": entry.name,
        "source": entry.source,
        "target": entry.target,
        "status": entry.status,
        "detail": entry.detail,
    }
    if entry.extra:
        row["extra"] = entry.extra
    if entry.contenders:
        row["contenders"] = list(entry.contenders)
    if check:
        from backends.ops.inspection import check_entry

        row.update(check_entry(entry))
    return row


def _status_cell(row: dict[str, Any]) -> str:
    return f"{row['status']}: {row['detail']}" if row.get("detail") else row["status"]


@app.command("list")
def list_backends(
    check: bool = typer.Option(False, "--check", help="Import each backend and check it against the contract."),
    output: Output = OutputFormat.table,
) -> None:
    """Every shipped and installed backend, with its source and status."""
    from backends.registry import Registry

    rows = [_row(e, check) for e in Registry().entries()]
    columns = [
        Column("NAME", "name", style="bold"),
        Column("SOURCE", "source"),
        Column("TARGET", "target"),
        Column("STATUS", _status_cell),
    ]
    if check:
        columns += [Column("PERSISTENT", "persistent"), Column("CAPABILITIES", "capabilities")]
    current().output.emit(rows, output, columns=columns, rows=rows)
    if check and any(r["status"] in BROKEN for r in rows):
        current().abort(code=ExitCode.CHECK_FAILED)


@app.command("show")
def show_backend(
    name: str = typer.Argument(..., help="Backend name (folded: PgVector, pg-vector and pg_vector are one)."),
    output: Output = OutputFormat.table,
) -> None:
    """Everything known about one backend, including a contract check."""
    from backends.registry import Registry, fold_name

    registry = Registry()
    matches = [e for e in registry.entries() if e.folded == fold_name(name)]
    if not matches:
        close = registry.close_matches(name)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        current().abort(f"no backend named {name!r}{hint} (see 'semvecctl backends list')", ExitCode.USAGE)
    rows = [_row(e, check=True) for e in matches]
    data: Any = rows[0] if len(rows) == 1 else rows
    columns = [Column("FIELD", "field", style="bold"), Column("VALUE", "value")]
    table_rows = [
        {"field": k, "value": v} for r in rows for k, v in r.items() if v not in (None, "", [])
    ]
    current().output.emit(data, output, columns=columns, rows=table_rows)
    if any(r["status"] in BROKEN for r in rows):
        current().abort(code=ExitCode.CHECK_FAILED)


@app.command("resolve")
def resolve_backend(
    name: Optional[str] = typer.Argument(None, help="Name to resolve (default: $SEMVEC_SESSION_BACKEND)."),
    uri: ResolveUri = None,
    output: Output = OutputFormat.table,
) -> None:
    """What SEMVEC_SESSION_BACKEND=NAME (or --uri URI) would give, including the fallback warning."""
    from backends.errors import ContestedBackend
    from backends.registry import Registry, selected_from_env

    chosen_by = None
    if uri is not None and name is None:
        from semvecctl.connection import Connection

        spec = Connection(uri=uri).spec
        name, chosen_by = spec.backend, spec.choice_reason or None
    requested = name if name is not None else selected_from_env()
    try:
        resolution = Registry().resolve(requested)
    except ContestedBackend as exc:
        current().abort(str(exc), ExitCode.ENVIRONMENT, cause=None)
    app_ = current()
    if resolution.warning:
        app_.output.warn(resolution.warning)
    entry = resolution.entry
    data = {
        "requested": resolution.requested,
        "resolved": entry.name,
        "source": entry.source,
        "target": entry.target,
        "status": entry.status,
        "fell_back": resolution.fell_back,
        "warning": resolution.warning,
        "close_matches": list(resolution.close_matches),
        "chosen_by": chosen_by,
    }
    rows = [{"field": k, "value": v} for k, v in data.items() if v not in (None, "", [])]
    app_.output.emit(data, output, columns=[Column("FIELD", "field", style="bold"),
                                            Column("VALUE", "value")], rows=rows)
    if entry.status == "driver-missing":
        current().abort(entry.detail, ExitCode.ENVIRONMENT)
