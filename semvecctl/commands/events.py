"""``semvecctl events list|inspect|count|export``: the compliance event log of one user.

Works on every backend with an event store (Redis, MongoDB, postgres, pgvector); memory
keeps none (exit 3). The reading is done by :mod:`backends.ops.eventlog`; filters come
before ``--limit``. An export is a sessions archive holding the user's log, so
``sessions import`` reads it back.
"""


import sys
from typing import Any, Optional

import typer

from semvecctl.application import current
from semvecctl.commands import help_of
from semvecctl.completers import typed_session_id
# the export's options are the sessions export's: one --overwrite rule
from semvecctl.connection import Connection
from semvecctl.exit_codes import ExitCode
from semvecctl.options import (EncryptTo, EncryptToFile, EventOwner, EventUnowned, ExportYes, Output, Overwrite, store_command, StreamOutput)
from semvecctl.output import Column, OutputFormat, StreamFormat

NAME = "events"
HELP = help_of(NAME)

app = typer.Typer(no_args_is_help=True, help=HELP)

UserOpt = typer.Option(..., "--user", help="The user whose log to read.", show_default=False)
SessionOpt = typer.Option(None, "--session", help="Only events of this session (as sessions "
                          "list shows its id).", show_default=False, callback=typed_session_id)

_COLUMNS = [
    Column("EVENT", "event_id", style="bold"),
    Column("SEQ", lambda r: _sequence(r.get("sequence")), justify="right"),
    Column("SESSION", "session_id"),
    Column("OWNER", "owner_subject"),
    Column("CREATED", "created_at"),
    Column("DIMS", "dimensions", justify="right"),
    Column("CONTENT", lambda r: _short(r.get("content"), 40)),
]


def _sequence(value: Any) -> Any:
    """A store that keeps no sequence numbers leaves them 0 (the engine's "unassigned"):
    shown as "-" in a table, kept as 0 in json/yaml."""
    return None if value == 0 else value


def _short(text: Optional[str], width: int) -> Optional[str]:
    if text is None or len(text) <= width:
        return text
    return text[: width - 1] + "…"


def _user(user: str) -> str:
    if not user.strip():
        current().abort("--user needs a non-empty user id", ExitCode.USAGE)
    return user


@app.command("list")
@store_command()
def list_events(*,
    user: str = UserOpt,
    session: Optional[str] = SessionOpt,
    conn: Connection,
    owner: EventOwner = None,
    unowned: EventUnowned = False,
    limit: Optional[int] = typer.Option(None, "--limit", "-n", min=1, max=1_000_000_000,
                                        help="Stop after this many events (after the filters)."),
    output: StreamOutput = StreamFormat.table,
) -> None:
    """Stream a user's events: sequence order, or newest first where the store keeps no
    sequence numbers (the engine's SQL layout), as the engine lists them."""
    from backends.ops.eventlog import (engine_readers_note, event_row, iter_events, order_of,
                                       require_event_store)

    out = current().output
    scope = conn.scope
    with conn.open() as adapter_obj:
        store = require_event_store(adapter_obj)
        events = iter_events(store, _user(user), owner_subject=scope, session_id=session,
                             limit=limit)
        count = out.stream((event_row(e) for e in events), output, _COLUMNS)
        order = order_of(store)
        note = engine_readers_note(store, _user(user), count)
    out.info(f"{count} event(s), {order}")
    if note:
        out.info(note)


@app.command("inspect")
@store_command()
def inspect_event(*,
    event_id: str = typer.Argument(..., help="The event id."),
    user: Optional[str] = typer.Option(None, "--user", show_default=False,
                                       help="Only if the event belongs to this user."),
    conn: Connection,
    owner: EventOwner = None,
    unowned: EventUnowned = False,
    output: Output = OutputFormat.table,
) -> None:
    """One event in full (embedding included), under the owner filter."""
    from backends.ops.eventlog import event_row, require_event_store

    out = current().output
    scope = conn.scope
    with conn.open() as adapter_obj:
        event = require_event_store(adapter_obj).get_event(event_id, owner_subject=scope)
    if event is None or (user is not None and event.user_id != user):
        filtered = owner is not None or unowned or user is not None
        current().abort(f"no event {event_id!r}" + (" with that owner/user" if filtered else ""),
                        ExitCode.CHECK_FAILED)
    report = event_row(event, full=True)
    out.emit(report, output, columns=[Column("FIELD", "field", style="bold"), Column("VALUE", "value")],
             rows=[{"field": k, "value": _sequence(v) if k == "sequence" else v}
                   for k, v in report.items()])


@app.command("count")
@store_command()
def count_events(*,
    user: str = UserOpt,
    session: Optional[str] = SessionOpt,
    conn: Connection,
    owner: EventOwner = None,
    unowned: EventUnowned = False,
    output: Output = OutputFormat.table,
) -> None:
    """How many events the user has (under the filters)."""
    from backends.ops.eventlog import count_events as count, engine_readers_note, require_event_store

    out = current().output
    scope = conn.scope
    with conn.open() as adapter_obj:
        store = require_event_store(adapter_obj)
        n = count(store, _user(user), owner_subject=scope, session_id=session)
        note = engine_readers_note(store, _user(user), n)
    report: dict[str, Any] = {"user_id": user, "session_id": session, "events": n}
    if note:
        report["note"] = note
        out.info(note)
    out.emit(report, output, columns=[Column("USER", "user_id", style="bold"),
                                      Column("SESSION", "session_id"),
                                      Column("EVENTS", "events", justify="right")],
             rows=[report])


@app.command("export")
@store_command()
def export_events(*,
    user: str = UserOpt,
    session: Optional[str] = SessionOpt,
    conn: Connection,
    owner: EventOwner = None,
    unowned: EventUnowned = False,
    out_path: str = typer.Option("-", "--out", "-O",
                                 help="Archive file (gzip when it ends in .gz), or - for stdout."),
    overwrite: Overwrite = False,
    yes: ExportYes = False,
    encrypt_to: EncryptTo = None,
    encrypt_to_file: EncryptToFile = None,
) -> None:
    """Write the user's (filtered) log to a sessions archive: atomic 0600 file, checksummed,
    nothing under the name if interrupted; `sessions import` reads it back. An existing
    --out file is replaced only with --overwrite. A store that keeps no sequence numbers
    is written oldest first (created_at, then event id), so an import numbers it in order."""
    import shutil
    import tempfile

    from backends.archive import atomic_output
    from backends.archive.encryption import encrypted_to
    from backends.ops.eventlog import require_event_store, stored_count, write_user_archive
    from semvecctl.commands.sessions_transfer import (archive_recipients, archive_target,
                                                      said_export_interrupted)

    app_ = current()
    out = app_.output
    scope = conn.scope
    to_stdout = archive_target(out_path, out, overwrite=overwrite)
    keys = archive_recipients(encrypt_to, encrypt_to_file)
    spec = conn.spec
    with conn.open() as adapter_obj:
        total = stored_count(require_event_store(adapter_obj), _user(user), owner_subject=scope,
                             session_id=session)
        options = dict(source_uri=spec.display_uri, owner_subject=scope, session_id=session,
                       progress=lambda items: out.progress(items, total=total,
                                                           label="exporting events"))
        with said_export_interrupted(total, "stdout" if to_stdout else out_path,
                                     label="exporting events", what="event(s)", staged=True):
            if to_stdout:  # staged, so a failure half-way sends nothing
                with tempfile.TemporaryFile() as staged:
                    with encrypted_to(staged, keys) as sink:
                        result = write_user_archive(adapter_obj, sink, _user(user), **options)
                    staged.seek(0)
                    shutil.copyfileobj(staged, sys.stdout.buffer, 1 << 20)
                    sys.stdout.buffer.flush()
            else:
                with atomic_output(out_path, keys) as stream:
                    result = write_user_archive(adapter_obj, stream, _user(user), **options)
    where = "stdout" if to_stdout else out_path
    counter = "" if result.counter is None else f", counter {result.counter}"
    out.success(f"exported {result.events} event(s) of user {user!r}{counter} to {where}; "
                f"digest {result.digest[:16]}…")
