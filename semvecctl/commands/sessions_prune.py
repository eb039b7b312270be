"""``semvecctl sessions prune --idle-for DURATION``: delete sessions nobody wrote lately.

Adds one command to the ``sessions`` group. Preview by default; ``--apply`` deletes,
version-checked, so a session written meanwhile survives; ``--archive FILE`` writes the
idle sessions to an archive first, and an ``--apply`` run journals itself in
``FILE.journal``: a rerun of the same command continues the deletes from that archive
instead of replacing it, and the journal goes once every archived session is dealt with.
An existing archive is replaced only with ``--overwrite``. A store that keeps no write
time is exit 3, never a guess; on Redis ``--assume-ttl`` states the engine's idle TTL and
is checked against every key. The work is in :mod:`backends.ops.prune`.
"""


from typing import Any, Optional

import typer

from semvecctl.application import current
from semvecctl.commands.sessions import app as sessions_app
from semvecctl.connection import Connection, require_seam
from semvecctl.durations import duration_seconds as _duration_seconds
from semvecctl.durations import parse_duration  # the name the prune tests import
from semvecctl.exit_codes import ExitCode
from semvecctl.metrics import recorder
from semvecctl.options import (Apply, AssumeTtl, BatchSize, MatchSessions, MetricsFile, Overwrite, SessionOwner, SessionUnowned, store_command, StreamOutput, Yes)
from semvecctl.output import Column, StreamFormat

_COLUMNS = [
    Column("SESSION", "session_id", style="bold"),
    Column("VERSION", "version", justify="right"),
    Column("OWNER", "owner_subject"),
    Column("LAST WRITTEN", "last_written"),
    Column("IDLE", "idle", justify="right"),
    Column("ACTION", "action"),
]


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


def _parse_ttl(text: str) -> int:
    seconds, _ = _duration_seconds(text)
    if seconds is None:
        current().abort(f"--assume-ttl {text!r} is not a duration like 1d, 12h, 90m or 45s "
                        "within 1s..3650d", ExitCode.USAGE)
    return seconds


def _journal_has(records: list, phase: str) -> bool:
    return any(r.get("phase") == phase for r in records)


@sessions_app.command("prune")
@store_command()
def prune_sessions(*,
    idle_for: str = typer.Option(..., "--idle-for", metavar="DURATION", show_default=False,
                                 help="Idle longer than this: 30d, 12h, 90m, 45s (1s..3650d)."),
    conn: Connection,
    owner: SessionOwner = None,
    unowned: SessionUnowned = False,
    match: MatchSessions = None,
    apply: Apply = False,
    archive: Optional[str] = typer.Option(None, "--archive", show_default=False,
                                          help="Write the idle sessions to this archive first "
                                               "(what is deleted is exactly what it holds); an "
                                               "interrupted --apply is journalled in FILE.journal "
                                               "and continued by the same command."),
    overwrite: Overwrite = False,
    assume_ttl: AssumeTtl = None,
    batch_size: BatchSize = 500,
    output: StreamOutput = StreamFormat.table,
    yes: Yes = False,
    metrics_file: MetricsFile = None,
) -> None:
    """Delete sessions not written for longer than --idle-for (preview unless --apply)."""
    import os

    from backends.contract import Capability, offers
    from backends.ops.journal import Journal, JournalMismatch, journal_path
    from backends.ops.prune import (PruneResult, archive_idle, archived_sessions, check_assumed_ttl,
                                delete_idle, discard_partials, find_idle, write_clock)

    apply = current().wants_apply(apply=apply, yes=yes)
    metrics = recorder(metrics_file, "sessions prune")
    idle_for_td = parse_duration(idle_for)
    ttl = _parse_ttl(assume_ttl) if assume_ttl is not None else None
    scope = conn.scope
    if archive is not None:
        directory = os.path.dirname(os.path.abspath(archive))
        if not os.path.isdir(directory) or os.path.isdir(archive):
            current().abort(f"--archive {archive}: not a file in an existing directory", ExitCode.USAGE)
    elif overwrite:
        current().abort("--overwrite only applies to --archive FILE", ExitCode.USAGE)
    app_ = current()
    out = app_.output
    spec = conn.spec
    result = PruneResult()
    metrics.track(result, backend=spec.backend)
    with conn.open() as adapter_obj:
        require_seam(adapter_obj, Capability.SESSIONS, "session listing")
        if ttl is not None and offers(adapter_obj.state_store(), Capability.WRITE_TIME):
            current().abort(f"--assume-ttl is for stores that keep no write time; backend "
                            f"{adapter_obj.name!r} stores one (leave --assume-ttl out)", ExitCode.USAGE)
        write_clock(adapter_obj, assume_ttl=ttl)  # exit 3 before anything without a write time
        journal = None
        resumed_archive = False
        if archive is not None:
            jpath = journal_path(archive)
            arguments = {"uri": spec.display_uri, "backend": str(adapter_obj.name),
                         "idle_for_s": int(idle_for_td.total_seconds()), "assume_ttl_s": ttl,
                         "owner": owner, "unowned": bool(unowned), "match": match}
            try:
                found = Journal.read(jpath)
            except JournalMismatch as exc:
                app_.abort(f"{exc}; move it away if it is not from a prune", ExitCode.USAGE)
            deleted_before = found is not None and _journal_has(found[1], "archived")
            replaceable = False
            if found is not None and not deleted_before:
                # interrupted before its first delete (the archive, if written, holds
                # nothing that was deleted): start again
                os.unlink(jpath)
                found, replaceable = None, True
            if found is not None and not apply:
                app_.abort(f"{jpath} records an interrupted prune that deleted sessions archived "
                           f"in {archive}; run it again with --apply to finish it (a preview "
                           "would replace that archive)", ExitCode.USAGE)
            if found is not None and overwrite:
                app_.abort(f"{archive} holds sessions an interrupted prune deleted ({jpath}); "
                           "--overwrite would lose them: run the same command without "
                           "--overwrite to finish it", ExitCode.USAGE)
            if found is None and os.path.exists(archive) and not (overwrite or replaceable):
                app_.abort(f"--archive {archive} already exists: choose another file, or pass "
                           "--overwrite to replace it", ExitCode.USAGE)
        if apply:
            current().confirm(f"delete the sessions idle for more than {idle_for} from "
                        f"{spec.display_uri}", yes=yes)
        if archive is not None and apply:
            try:
                journal = Journal.open(archive, "prune", arguments)
            except JournalMismatch as exc:
                app_.abort(str(exc), ExitCode.USAGE)
            resumed_archive = _journal_has(journal.records, "archived")
        if ttl is not None and apply and archive is None:
            # deletes stream: prove the assumed TTL on every key in scope before the first
            check_assumed_ttl(adapter_obj, ttl, owner_subject=scope, match=match,
                              batch_size=batch_size)
        if resumed_archive and not os.path.isfile(archive):
            app_.abort(f"{journal.path} records an interrupted prune whose deleted sessions are "
                       f"in {archive}, but {archive} is gone: put it back and run the same "
                       "command again (nothing more was deleted)", ExitCode.ENVIRONMENT)
        if resumed_archive:
            done = next(journal.where(phase="archived"))
            result.archived, result.digest = int(done["count"]), str(done["digest"])
            # what the interrupted run's scan found (journals before this field: none)
            result.examined = int(done.get("examined") or 0)
            result.idle = int(done.get("idle") or 0)
            result.unknown = int(done.get("unknown") or 0)
            out.info(f"continuing the interrupted prune journalled in {journal.path}: deleting "
                     f"what {archive} holds ({result.archived} session(s)); the archive is kept")
            idle = archived_sessions(archive)
        else:
            idle = find_idle(adapter_obj, idle_for_td, result, owner_subject=scope, match=match,
                             batch_size=batch_size, assume_ttl=ttl)
            if archive is not None:
                discard_partials(archive)
                try:
                    archive_idle(adapter_obj, out.progress(idle, label="archiving"), archive,
                                 result, source_uri=spec.display_uri, owner_subject=scope)
                except BaseException:  # nothing deleted yet: no run to continue
                    if journal is not None:
                        journal.finish()
                    raise
                if journal is not None:
                    journal.append({"phase": "archived", "count": result.archived,
                                    "digest": result.digest, "examined": result.examined,
                                    "idle": result.idle, "unknown": result.unknown})
                idle = archived_sessions(archive)
        if apply:
            from semvecctl.interrupts import steps

            # each delete and its count finish before a signal is taken: the count is exact
            outcomes = steps(delete_idle(adapter_obj, out.progress(idle, label="deleting"),
                                         result, owner_subject=scope))
            try:
                out.stream((_row(s, a) for s, a in outcomes), output, _COLUMNS)
            except BaseException:  # a signal too: say how far it got (deletes are final)
                kept = (f"; {archive} holds every session it deleted and {journal.path} keeps "
                        "it from being replaced" if journal is not None else "")
                out.warn(f"the prune stopped after deleting {result.deleted} session(s){kept}; "
                         "run the same command again to continue")
                raise
            if journal is not None:
                journal.finish()  # the archive was complete and synced before the first delete
        else:
            label = "archived" if archive is not None else "would delete"
            out.stream((_row(s, label) for s in out.progress(idle, label="scanning")), output,
                       _COLUMNS)
    where = f"; archived {result.archived} to {archive} (digest {result.digest[:16]}…)" if archive else ""
    unknown = f", {result.unknown} without a known write time (left)" if result.unknown else ""
    if apply:
        kept = f", {result.kept} written meanwhile and kept" if result.kept else ""
        if resumed_archive:
            # every session the resumed journal settles was examined, whatever the journal
            # recorded of the interrupted run's scan
            result.examined = max(result.examined,
                                  result.deleted + result.kept + result.vanished)
            gone = (f", {result.vanished} already gone (deleted by the interrupted run or "
                    "meanwhile)" if result.vanished else "")
            where = (f"; {archive} holds all {result.archived} session(s) this prune judged "
                     f"idle, every one it deleted (digest {result.digest[:16]}…)")
        else:
            gone = f", {result.vanished} already gone" if result.vanished else ""
        out.success(f"examined {result.examined} session(s): deleted {result.deleted}{kept}{gone}"
                    f"{unknown}{where}")
    else:
        out.info(f"examined {result.examined} session(s): {result.idle} idle for more than "
                 f"{idle_for}{unknown}{where}; preview only, nothing was deleted (pass --apply)")
