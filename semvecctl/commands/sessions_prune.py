"""``semvecctl sessions prune --idle-for DURATION``: delete sessions nobody wrote lately.

Adds one command to the ``sessions`` group. Preview by default; ``--apply`` deletes,
version-checked, so a session written meanwhile survives; ``--archive FILE`` writes the
idle sessions to an archive first. A store that keeps no write time is exit 3, never a
guess. The work is in :mod:`backends.prune`.
"""


import re
from datetime import timedelta
from typing import Any, Optional

import typer

from semvecctl.application import current
from semvecctl.commands.sessions import OwnerOpt, UnownedOpt
from semvecctl.commands.sessions import app as sessions_app
from semvecctl.connection import open_adapter, require_seam, resolve_connection
from semvecctl.errors import usage_error
from semvecctl.options import AdapterFactory, Backend, StreamOutput, Uri, Yes, owner_filter
from semvecctl.output import Column, StreamFormat

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
#: the declared range of --idle-for
MIN_IDLE, MAX_IDLE = 1, 3650 * 86400
_DURATION = re.compile(r"(?:(\d{1,9})([smhd]))+")

_COLUMNS = [
    Column("SESSION", "session_id", style="bold"),
    Column("VERSION", "version", justify="right"),
    Column("OWNER", "owner_subject"),
    Column("LAST WRITTEN", "last_written"),
    Column("IDLE", "idle", justify="right"),
    Column("ACTION", "action"),
]


def parse_duration(text: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``45s`` (or combined, ``1d12h``), within 1s..3650d."""
    value = (text or "").strip().lower()
    if not _DURATION.fullmatch(value):
        raise usage_error(f"--idle-for {text!r} is not a duration like 30d, 12h, 90m or 45s")
    seconds = sum(int(n) * _UNITS[u] for n, u in re.findall(r"(\d+)([smhd])", value))
    if not MIN_IDLE <= seconds <= MAX_IDLE:
        raise usage_error(f"--idle-for {text!r} is outside the range 1s..3650d")
    return timedelta(seconds=seconds)


def _idle(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    return f"{days}d{hours:02d}h" if days else f"{hours}h{rest // 60:02d}m"


def _row(idle: Any, action: str) -> dict[str, Any]:
    row = idle.row()
    if action in ("archived", "kept", "deleted", "vanished") and not idle.idle_seconds:
        row.pop("last_written")  # read back from the archive: not re-judged
        row.pop("idle_seconds")
    else:
        row["idle"] = _idle(idle.idle_seconds)
    row["action"] = action
    return row


@sessions_app.command("prune")
def prune_sessions(
    idle_for: str = typer.Option(..., "--idle-for", metavar="DURATION", show_default=False,
                                 help="Idle longer than this: 30d, 12h, 90m, 45s (1s..3650d)."),
    backend: Backend = None,
    uri: Uri = None,
    adapter: AdapterFactory = None,
    owner: Optional[str] = OwnerOpt,
    unowned: bool = UnownedOpt,
    match: Optional[str] = typer.Option(None, "--match", "-m", show_default=False,
                                        help="Only session ids matching this glob (*, ?, [..])."),
    apply: bool = typer.Option(False, "--apply", help="Delete (default: preview only)."),
    archive: Optional[str] = typer.Option(None, "--archive", show_default=False,
                                          help="Write the idle sessions to this archive first "
                                               "(what is deleted is exactly what it holds)."),
    batch_size: int = typer.Option(500, "--batch-size", min=1, max=10000,
                                   help="Sessions read per round trip."),
    output: StreamOutput = StreamFormat.table,
    yes: Yes = False,
) -> None:
    """Delete sessions not written for longer than --idle-for (preview unless --apply)."""
    import os

    from backends.contract import SessionEnumerator
    from backends.prune import PruneResult, archive_idle, archived_sessions, delete_idle, find_idle, write_clock

    idle_for_td = parse_duration(idle_for)
    scope = owner_filter(owner, unowned)
    if archive is not None:
        directory = os.path.dirname(os.path.abspath(archive))
        if not os.path.isdir(directory) or os.path.isdir(archive):
            raise usage_error(f"--archive {archive}: not a file in an existing directory")
    out = current().output
    spec = resolve_connection(backend, uri, adapter)
    result = PruneResult()
    with open_adapter(spec) as adapter_obj:
        require_seam(adapter_obj, SessionEnumerator, "session listing")
        write_clock(adapter_obj)  # exit 3 before anything when the store keeps no write time
        if apply:
            out.confirm(f"delete the sessions idle for more than {idle_for} from "
                        f"{spec.display_uri}", yes=yes)
        if archive is not None and os.path.exists(archive):
            out.confirm(f"overwrite the existing file {archive}", yes=yes)
        idle = find_idle(adapter_obj, idle_for_td, result, owner_subject=scope, match=match,
                         batch_size=batch_size)
        if archive is not None:
            archive_idle(adapter_obj, out.progress(idle, label="archiving"), archive, result,
                         source_uri=spec.display_uri, owner_subject=scope)
            idle = archived_sessions(archive)
        if apply:
            from semvecctl.interrupts import steps

            # each delete and its count finish before a signal is taken: the count is exact
            outcomes = steps(delete_idle(adapter_obj, out.progress(idle, label="deleting"),
                                         result, owner_subject=scope))
            try:
                out.stream((_row(s, a) for s, a in outcomes), output, _COLUMNS)
            except BaseException:  # a signal too: say how far it got (deletes are final)
                out.warn(f"the prune stopped after deleting {result.deleted} session(s); "
                         "run it again to continue")
                raise
        else:
            label = "archived" if archive is not None else "would delete"
            out.stream((_row(s, label) for s in out.progress(idle, label="scanning")), output,
                       _COLUMNS)
    where = f"; archived {result.archived} to {archive} (digest {result.digest[:16]}…)" if archive else ""
    unknown = f", {result.unknown} without a known write time (left)" if result.unknown else ""
    if apply:
        kept = f", {result.kept} written meanwhile and kept" if result.kept else ""
        gone = f", {result.vanished} already gone" if result.vanished else ""
        out.success(f"examined {result.examined} session(s): deleted {result.deleted}{kept}{gone}"
                    f"{unknown}{where}")
    else:
        out.info(f"examined {result.examined} session(s): {result.idle} idle for more than "
                 f"{idle_for}{unknown}{where}; preview only, nothing was deleted (pass --apply)")
