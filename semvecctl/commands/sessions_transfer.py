"""``semvecctl sessions export|import|copy``: backups and migrations between backends.

Adds three commands to the ``sessions`` group (this module has no ``app`` of its own). The
work is done by :mod:`backends.transfer` and :mod:`backends.archive`; this module parses
flags, renders previews and maps refusals to exit codes:

- 0: done (a preview with nothing in the way, an import or copy applied and read back).
- 1: a check failed: a source session is damaged (export names it and writes no file;
  with ``--skip-damaged`` it writes the rest, lists each one left out and exits 1), the
  archive is damaged (truncated, reordered, duplicated, tampered,
  trailer disagrees), sessions or events already exist with ``--on-conflict error``, the
  read-back after writing found a difference, or the transfer would lose data (items,
  events, sequence numbers, expiry times or drift flags the source cannot provide or the
  target cannot keep): one rule for export, import and copy, refused before anything is
  written unless ``--allow-loss`` accepts it (then each loss is a warning line).
  A damaged archive writes nothing.
- 2: usage: bad flags, the archive file does not exist.
- 3: environment: the file is not a sessions archive or has a format version this
  semvecctl cannot read (the message says what to upgrade); the backend lacks what the
  command needs (enumeration to export, an event store for ``--user``, version restore
  for ``--keep-versions``).

Writing into a backend that is not persistent (memory) is allowed, with a warning that
the data dies with the process.
- 4: a backend is unreachable.
"""


import contextlib
import functools
import os
import sys
from enum import Enum
from typing import Any, Iterator, List, Optional

import typer

from semvecctl.application import current
from semvecctl.commands.sessions import app as sessions_app
from semvecctl.connection import Connection, pair_shards, refuse_unnamed_pair
from semvecctl.exit_codes import ExitCode
from semvecctl.metrics import recorder
from semvecctl.keyrings import open_keyring
from semvecctl.options import (AllowLoss, Apply, BatchSize, EncryptTo, EncryptToFile, Identity, ExportYes, FromShards, MatchSessions, MetricsFile, Overwrite, SessionOwner, ShredKeys, SessionUnowned, store_command, StreamOutput, ToShards, Yes)
from semvecctl.output import Column, StreamFormat

WithItemsOpt = typer.Option(False, "--with-items",
                            help="Also carry each session's live memory items (needs an item mirror on the source).")
WithEventsOpt = typer.Option(False, "--with-events",
                             help="Also carry each session's compliance events, with their sequence numbers "
                                  "(needs an event store that can list a session's users; on Redis that scans "
                                  "every event once per session, so on a large store prefer --user).")
UserOpt = typer.Option(None, "--user", show_default=False,
                       help="Whole-user export (repeatable): the sessions this user has events in, every "
                            "event of the user and the user's sequence counter, so an import continues "
                            "the sequence.")


class OnConflict(str, Enum):
    error = "error"
    skip = "skip"


OnConflictOpt = typer.Option(OnConflict.error, "--on-conflict", case_sensitive=False,
                             help="A session that already exists on the target: 'error' refuses the whole import "
                                  "before any write, 'skip' leaves it as it is. Nothing is ever overwritten.")
KeepVersionsOpt = typer.Option(False, "--keep-versions",
                               help="Require archived versions to be preserved (fail if the target cannot restore them).")

_PLAN_COLUMNS = [
    Column("SESSION", "session_id", style="bold"),
    Column("VERSION", "version", justify="right"),
    Column("OWNER", "owner_subject"),
    Column("ACTION", "action"),
    Column("ITEMS", "items", justify="right"),
    Column("EVENTS", "events", justify="right"),
    Column("DETAIL", "detail"),
]


def _on_conflict(value: OnConflict | str) -> str:
    return value.value if isinstance(value, OnConflict) else str(value)


def _source_label(spec: Any) -> str:
    if spec.adapter_factory and not spec.uri:
        return f"adapter {spec.adapter_factory}"
    return spec.display_uri


def _progress(label: str, total: int | None = None):
    out = current().output
    return lambda items: out.progress(items, total=total, label=label)


def _timing(label: str) -> str:
    """`` in 3.2s (385/s)`` of the phase ``label`` (the summary line's timing), or ""."""
    task = current().output.progress_tasks.get(label)
    return f" {task.summary()}" if task is not None else ""


# --------------------------------------------------------------------------------------
# export
# --------------------------------------------------------------------------------------


@sessions_app.command("export")
@store_command()
def export_sessions(*,
    conn: Connection,
    owner: SessionOwner = None,
    unowned: SessionUnowned = False,
    match: MatchSessions = None,
    with_items: bool = WithItemsOpt,
    with_events: bool = WithEventsOpt,
    users: Optional[List[str]] = UserOpt,
    since: Optional[str] = typer.Option(
        None, "--since", metavar="DURATION", show_default=False,
        help="Only sessions written within this long before the export starts (30d, 12h, "
             "90m, 45s): an incremental export. Needs a store that records write times "
             "(PostgreSQL, MongoDB); elsewhere exit 3."),
    allow_loss: AllowLoss = False,
    out_path: str = typer.Option("-", "--out", "-O", help="Archive file (gzip when it ends in .gz), or - for stdout."),
    batch_size: BatchSize = 500,
    overwrite: Overwrite = False,
    skip_damaged: bool = typer.Option(
        False, "--skip-damaged",
        help="Write every session that reads strictly and list the damaged ones left out "
             "(id and reason, on stderr); the export then exits 1 (incomplete). Without it, "
             "one damaged session fails the export (exit 1), naming it, and no file is written."),
    yes: ExportYes = False,
    metrics_file: MetricsFile = None,
    encrypt_to: EncryptTo = None,
    encrypt_to_file: EncryptToFile = None,
    shred_keys: ShredKeys = None,
) -> None:
    """Write sessions to a versioned, checksummed archive (JSON Lines).

    Streams (memory does not grow with the number of sessions). The file is created
    private (0600) and appears only once complete: an interrupted export leaves nothing
    under the target name. An existing --out file is replaced only with --overwrite.
    """
    from datetime import datetime, timezone

    from backends.transfer import check_exportable, export_to_path, export_to_stream
    from backends.transfer.progress import EXPORTING, store_count
    from semvecctl.durations import parse_duration

    app = current()
    out = app.output
    updated_since = (None if since is None
                     else datetime.now(timezone.utc) - parse_duration(since, "--since"))
    metrics = recorder(metrics_file, "sessions export")
    scope = conn.scope
    to_stdout = archive_target(out_path, out, overwrite=overwrite)
    keys = archive_recipients(encrypt_to, encrypt_to_file)
    spec = conn.spec
    users = _users(users)
    if shred_keys is not None and users:
        app.abort("--shred-keys cannot seal whole-user logs (--user) yet: export the "
                  "sessions with --with-events instead", ExitCode.USAGE)
    with open_keyring(shred_keys, create=True) as ring, conn.open() as source:
        for warning in check_exportable(source, with_items=with_items, with_events=with_events,
                                        users=users, allow_loss=allow_loss,
                                        updated_since=updated_since):
            out.warn(warning)
        total = (None if users or updated_since is not None
                 else store_count(source, owner_subject=scope, match=match))
        options = dict(source_uri=_source_label(spec), owner_subject=scope, match=match,
                       with_items=with_items, with_events=with_events, users=users,
                       allow_loss=allow_loss, batch_size=batch_size,
                       progress=_progress(EXPORTING, total), skip_damaged=skip_damaged,
                       updated_since=updated_since, shred_keys=ring)
        with said_export_interrupted(total, "stdout" if to_stdout else out_path):
            if to_stdout:
                result = export_to_stream(source, sys.stdout.buffer, recipients=keys, **options)
            else:
                result = export_to_path(source, out_path, recipients=keys, **options)
        metrics.track(result, backend=source.name)
    if result.owned and not keys:
        encryption_hint(f"{result.owned} exported session(s) carry an owner")
    _report_export(result, f"{source.name} ({_source_label(spec)})",
                   "stdout" if to_stdout else out_path, with_items=with_items,
                   with_events=with_events, users=users)


@contextlib.contextmanager
def said_export_interrupted(total: int | None, where: str, *, label: str = "",
                            what: str = "session(s)", staged: bool = False) -> Iterator[None]:
    """On a signal, how far the export got (as ``import`` says it), before the boundary
    prints "interrupted": what was read (the progress phase ``label`` counted it), and that
    no archive was left behind (``staged``: nothing reached stdout either)."""
    from backends.transfer.progress import EXPORTING

    from semvecctl.interrupts import interruption_of

    try:
        yield
    except BaseException as exc:
        signalled = interruption_of(exc)
        if signalled is not None:
            task = current().output.progress_tasks.get(label or EXPORTING)
            read = task.count if task is not None else 0
            of = "" if total is None else f" of {total}"
            left = (f"nothing was written to {where}" if where != "stdout" or staged
                    else "what reached stdout is not an archive (no trailer): discard it")
            current().output.error(f"{signalled.signal_name}: the export stopped after reading "
                                   f"{read}{of} {what}; {left}. Rerun it to export")
        raise


def _report_export(result: Any, source: str, where: str, *, with_items: bool,
                   with_events: bool, users: tuple[str, ...]) -> None:
    """The end of an export: each damaged session left out and exit 1 (written, but not
    everything: not a green export), else what was written, and what changed meanwhile."""
    out = current().output
    items = f", {result.items} item(s)" if with_items and not result.warnings else ""
    events = (f", {result.events} event(s)" + (f" and {result.users} user log(s)" if users else "")
              if (with_events or users) else "")
    timing = _timing("exporting")
    if result.damaged:
        for session_id, why in result.damaged:
            out.error(f"left out damaged session {session_id!r}: {why}")
        current().abort(f"the archive is incomplete: {len(result.damaged)} damaged session(s) "
                        f"left out (listed above); exported {result.count} other session(s)"
                        f"{items}{events} to {where}; digest {result.digest[:16]}…",
                        ExitCode.CHECK_FAILED)
    out.success(f"exported {result.count} session(s){items}{events} from {source} "
                f"to {where}{timing}; digest {result.digest[:16]}…")
    if result.vanished:
        out.info(f"{result.vanished} session(s) disappeared while exporting and are not in the archive")
    if result.duplicates_dropped:
        out.info(f"{result.duplicates_dropped} session(s) were enumerated twice and written once")


# --------------------------------------------------------------------------------------
# import (and the part of copy that is the same)
# --------------------------------------------------------------------------------------


def archive_target(out_path: str, out: Any, *, overwrite: bool = False) -> bool:
    """Check ``--out`` before anything is read: ``-`` is stdout (never a terminal), else a
    file in an existing directory that does not exist yet unless ``overwrite`` (a
    confirmation flag never replaces an archive). True when the archive goes to stdout."""
    if out_path == "-":
        if out._isatty(sys.stdout):
            current().abort("refusing to write an archive to a terminal: pass --out FILE or "
                            "redirect stdout", ExitCode.USAGE)
        return True
    directory = os.path.dirname(os.path.abspath(out_path))
    if not os.path.isdir(directory):
        current().abort(f"directory {directory} does not exist (from --out)", ExitCode.USAGE)
    if os.path.isdir(out_path):
        current().abort(f"--out {out_path} is a directory; name a file", ExitCode.USAGE)
    if os.path.lexists(out_path) and not overwrite:
        current().abort(f"--out {out_path} already exists; nothing was written. Pass "
                        "--overwrite to replace it, or name another file", ExitCode.USAGE)
    return False


def _users(users: Optional[List[str]]) -> tuple[str, ...]:
    cleaned = tuple(dict.fromkeys(u for u in (users or ())))
    if any(not u.strip() for u in cleaned):
        current().abort("--user needs a non-empty user id", ExitCode.USAGE)
    return cleaned


def _describe_archive(summary: Any) -> str:
    h = summary.header
    items = f", {summary.items} item(s)" if summary.sessions_with_items else ""
    events = f", {summary.events} event(s)" if summary.events else ""
    users = f", {summary.users} user log(s)" if summary.users else ""
    return (f"archive verified: {summary.count} session(s){items}{events}{users} exported from "
            f"{h.source_backend} ({h.source_uri}) at {h.created_at} by semvecctl {h.tool_version} "
            f"(format version {h.format_version})")


def _plan_row(row: Any) -> dict[str, Any]:
    return {"session_id": row.session_id, "version": row.version, "owner_subject": row.owner_subject,
            "action": row.action, "items": row.items, "events": row.events, "detail": row.detail,
            "kind": row.kind, "user_id": row.user_id}


def _preview(importer: Any, output: StreamFormat, verb: str) -> None:
    """Render the plan; exit 1 when --apply would refuse because of conflicts."""
    out = current().output
    fmt = output.value
    rows = (_plan_row(r) for r in importer.plan())
    if fmt in ("json", "yaml"):  # streamed: the totals follow the rows they count
        def totals() -> dict[str, Any]:
            t = importer.totals
            return {"create": t.create, "skip": t.skip, "conflict": t.conflict,
                    "expired": t.expired, "withheld": t.withheld,
                    "withheld_events": t.withheld_events, "notes": importer.notes()}

        out.stream_document({"applied": False, "archive_sessions": importer.summary.count},
                            "sessions", rows, totals, fmt)
    else:
        out.stream(rows, fmt, _PLAN_COLUMNS)
    t = importer.totals
    expired = f", {t.expired} expired (not imported)" if t.expired else ""
    if t.withheld or t.withheld_events:
        expired += (f", {t.withheld} session(s) and {t.withheld_events} event(s) withheld "
                    "(erased subjects, older than the erasure)")
    out.info(f"preview: {t.create} to create, {t.skip} to skip, {t.conflict} in conflict{expired}; "
             f"nothing was written (rerun with --apply to {verb})")
    if t.conflict:
        current().abort(f"{t.conflict} record(s) conflict with the target (first: "
                        f"{t.first_conflict!r}: {t.first_conflict_detail}); --apply would "
                        "refuse: use --on-conflict skip to leave them as they are",
                        ExitCode.CHECK_FAILED)


def _report_apply(result: Any, report: Any, output: StreamFormat, target_name: str,
                  extra: dict[str, Any] | None = None) -> None:
    out = current().output
    document = {
        "applied": True, "created": result.created, "skipped": result.skipped,
        "expired": result.expired,
        "versions_preserved": result.versions_preserved, "items_synced": result.items_synced,
        "items_not_imported": result.items_not_imported,
        "events_restored": result.events_restored, "events_skipped": result.events_skipped,
        "events_not_imported": result.events_not_imported, "counters": dict(result.counters),
        "withheld": {"sessions": len(result.withheld_sessions),
                     "events": len(result.withheld_events),
                     "session_ids": list(result.withheld_sessions),
                     "event_ids": list(result.withheld_events)},
        "shredded": {"sessions": result.shredded, "events": result.shredded_events},
        "verified": {"compared": report.compared, "matched": report.matched,
                     "skipped": report.skipped, "mismatched": report.mismatched,
                     "events_compared": report.events_compared,
                     "events_matched": report.events_matched,
                     "examples": report.examples},
        **(extra or {}),
    }
    if output.value in ("json", "yaml", "jsonl"):
        out.emit(document, output.value)
    items = f", {result.items_synced} item(s) synced" if result.items_synced else ""
    versions = "versions preserved" if result.versions_preserved else "created at version 1"
    timing = _timing("writing")
    events = f", {result.events_restored} event(s) restored" if result.events_restored else ""
    out.success(f"wrote {result.created} session(s) to {target_name} ({versions}){items}{events}{timing}; "
                f"{result.skipped} skipped (already there, left unchanged)")
    if result.expired:
        out.info(f"{result.expired} session(s) had expired since the export and were not imported")
    _report_withheld(result.withheld_sessions, result.withheld_events)
    if result.shredded or result.shredded_events:
        out.info(f"withheld {result.shredded} session(s) and {result.shredded_events} event(s) "
                 "whose shred keys were destroyed (crypto-shredded: not readable)")
    if result.events_skipped:
        out.info(f"{result.events_skipped} event(s) were already on the target and left unchanged")
    if result.items_not_imported:
        out.warn(f"{result.items_not_imported} item(s) not imported: the target has no item mirror")
    if result.events_not_imported:
        out.warn(f"{result.events_not_imported} event(s) not imported: the target cannot restore them")
    if not report.ok:
        for example in report.examples:
            out.error(f"read-back mismatch: {example}")
        current().abort(f"read-back found {report.mismatched} session(s) that differ from the source",
                        ExitCode.CHECK_FAILED)
    events = (f"; {report.events_matched} event(s) match"
              if report.events_compared else "")
    out.info(f"read back {report.matched} session(s): blobs, owners, pending messages"
             + (", versions" if result.versions_preserved else "") + f" match{events}")


def _report_withheld(sessions: Any, events: Any) -> None:
    """Say what the erasure ledger withheld, by id (text output; JSON carries the lists)."""
    out = current().output
    if sessions:
        out.info(f"withheld {len(sessions)} session(s) of erased subjects (older than the "
                 f"erasure): {', '.join(sessions)}")
    if events:
        out.info(f"withheld {len(events)} event(s) of erased subjects (older than the "
                 f"erasure): {', '.join(events)}")


def _run_import(importer: Any, *, apply: bool, output: StreamFormat, verb: str,
                extra_report: Any = None, yes: bool = False, target: str = "the target") -> None:
    out = current().output
    summary = importer.verify()
    out.info(_describe_archive(summary))
    importer.check_capabilities()
    for warning in importer.check_losses():
        out.warn(warning)
    importer.check_records()  # every check --apply runs on a record, before the preview too
    for note in importer.notes():
        out.warn(note)
    if not apply:
        _preview(importer, output, verb)
        return
    current().confirm(f"{verb} {summary.count} session(s) into {target}", yes=yes)
    try:
        from semvecctl.interrupts import steps

        # each session's write and its count finish before a signal is taken: exact count
        result = importer.apply(progress=steps)
    except BaseException as exc:  # a signal too: say how far the import got
        from backends.errors import is_state_version_conflict

        written = importer.result.created if importer.result else 0
        if written and not is_state_version_conflict(exc):  # a conflict says it itself
            out.error(f"the import stopped after {written} session(s) were written; once the "
                      "cause is fixed, rerun with --on-conflict skip to add the rest")
        raise
    report = importer.verify_target() if extra_report is None else extra_report(result)
    _report_apply(result, report, output, importer.target_name,
                  {"source_count": report.source_count} if report.source_count is not None else None)


def archive_recipients(encrypt_to: Optional[List[str]],
                       encrypt_to_file: Optional[List[str]]) -> list[Any]:
    """The age recipients of --encrypt-to/--encrypt-to-file (checked before any work)."""
    if not (encrypt_to or encrypt_to_file):
        return []
    from backends.archive.encryption import recipients

    return recipients(encrypt_to or (), encrypt_to_file or ())


def encryption_hint(why: str) -> None:
    """Said once, on stderr, after an unencrypted archive of personal data."""
    current().output.info(f"hint: {why} and the archive is not encrypted; "
                          "encrypt it with --encrypt-to RECIPIENT (age, pip install 'semvecctl[age]')")


@contextlib.contextmanager
def _archive_source(path: str, identities: Optional[List[str]] = None) -> Iterator[Any]:
    from backends.transfer import ArchiveFile, StagedStream

    keys = archive_identities(identities)
    if path == "-":
        import tempfile

        with tempfile.TemporaryFile() as staged:
            with current().output.progress_task("staging stdin", unit=" bytes") as task:
                while chunk := sys.stdin.buffer.read(1 << 20):
                    staged.write(chunk)
                    task.advance(len(chunk))
            yield StagedStream(staged, "stdin", keys)
        return
    if not os.path.exists(path):
        current().abort(f"no such archive file: {path}", ExitCode.USAGE)
    if os.path.isdir(path):
        current().abort(f"{path} is a directory, not an archive file", ExitCode.USAGE)
    yield ArchiveFile(path, keys)


def archive_identities(identities: Optional[List[str]]) -> list[Any]:
    """The age identities of --identity (none: an encrypted archive is refused, exit 2)."""
    if not identities:
        return []
    from backends.archive.encryption import load_identities

    return load_identities(identities)


@sessions_app.command("import")
@store_command()
def import_sessions(*,
    archive: str = typer.Argument(..., help="Archive file written by 'sessions export' (or - for stdin)."),
    conn: Connection,
    apply: Apply = False,
    on_conflict: OnConflict = OnConflictOpt,
    keep_versions: bool = KeepVersionsOpt,
    allow_loss: AllowLoss = False,
    output: StreamOutput = StreamFormat.table,
    yes: Yes = False,
    metrics_file: MetricsFile = None,
    identity: Identity = None,
    shred_keys: ShredKeys = None,
) -> None:
    """Import an archive into a backend: preview by default, --apply to write.

    Every checksum and the trailer are verified before the first write; existing
    sessions are never overwritten; versions are preserved where the target can restore
    them (it says where it cannot); everything written is read back and compared.
    """
    from backends.transfer import SessionImporter

    apply = current().wants_apply(apply=apply, yes=yes)
    metrics = recorder(metrics_file, "sessions import")
    policy = _on_conflict(on_conflict)
    spec = conn.resolve()
    with open_keyring(shred_keys) as ring, _archive_source(archive, identity) as source, \
            conn.open() as target:
        importer = SessionImporter(target, source, on_conflict=policy, keep_versions=keep_versions,
                                   allow_loss=allow_loss, phases=current().output.phase,
                                   shred_keys=ring)
        metrics.track(importer, backend=target.name)
        _run_import(importer, apply=apply, output=output, verb="import", yes=yes,
                    target=spec.display_uri)


# --------------------------------------------------------------------------------------
# copy
# --------------------------------------------------------------------------------------


@sessions_app.command("copy")
def copy_sessions(
    from_uri: Optional[str] = typer.Option(None, "--from", help="Source URI (its scheme implies the backend).",
                                           show_default=False),
    to_uri: Optional[str] = typer.Option(None, "--to", help="Target URI (its scheme implies the backend).",
                                         show_default=False),
    from_adapter: Optional[str] = typer.Option(None, "--from-adapter", show_default=False,
                                               help="Source adapter from Python code: module:factory.",
                                               rich_help_panel="Backend authors"),
    to_adapter: Optional[str] = typer.Option(None, "--to-adapter", show_default=False,
                                             help="Target adapter from Python code: module:factory.",
                                             rich_help_panel="Backend authors"),
    owner: SessionOwner = None,
    unowned: SessionUnowned = False,
    match: MatchSessions = None,
    with_items: bool = WithItemsOpt,
    with_events: bool = WithEventsOpt,
    users: Optional[List[str]] = UserOpt,
    allow_loss: AllowLoss = False,
    apply: Apply = False,
    on_conflict: OnConflict = OnConflictOpt,
    keep_versions: bool = KeepVersionsOpt,
    batch_size: BatchSize = 500,
    output: StreamOutput = StreamFormat.table,
    yes: Yes = False,
    metrics_file: MetricsFile = None,
    from_shards: FromShards = None,
    to_shards: ToShards = None,
) -> None:
    """Copy sessions from one backend to another (export piped into import, no file).

    Same guarantees as export + import (staged in a private temp file, verified before
    the first write, preview unless --apply, never overwrites), then a final pass reads
    the source again and compares every session with the target (blob digest, owner,
    pending message, version where kept), the ones skipped as already there too: a
    difference is a mismatch (exit 1) naming the ids. A copy that would leave the
    source's events of the copied sessions behind is refused unless --with-events carries
    them or --allow-loss accepts the loss.
    """
    from backends.transfer import SessionImporter, check_exportable, staged_copy

    out = current().output
    metrics = recorder(metrics_file, "sessions copy")
    refuse_unnamed_pair(from_uri, to_uri, from_adapter, to_adapter, verb="copy")
    apply = current().wants_apply(apply=apply, yes=yes)
    policy = _on_conflict(on_conflict)
    from_shards, to_shards = pair_shards(from_shards, to_shards)
    source_conn = Connection(None, from_uri, from_adapter, owner=owner, unowned=unowned,
                             shards=from_shards)
    target_conn = Connection(None, to_uri, to_adapter, shards=to_shards)
    scope = source_conn.scope
    users = _users(users)
    source_spec = source_conn.spec
    target_spec = target_conn.spec
    with source_conn.open() as source, target_conn.open() as target:
        # refuse what cannot be honoured before reading a single session
        for warning in check_exportable(source, with_items=with_items, with_events=with_events,
                                        users=users, allow_loss=allow_loss):
            out.warn(warning)
        SessionImporter(target, None, keep_versions=keep_versions).check_capabilities()
        out.info(f"copying from {source.name} ({_source_label(source_spec)}) to {target.name} "
                 f"({_source_label(target_spec)})")
        with staged_copy(
            source, target, source_uri=_source_label(source_spec), owner_subject=scope,
            match=match, with_items=with_items, with_events=with_events, users=users,
            allow_loss=allow_loss, batch_size=batch_size, on_conflict=policy,
            keep_versions=keep_versions, phases=out.phase,
            refuse_conflicts_early=apply and policy == "error",
        ) as (importer, exported):
            metrics.track(importer, backend=target.name)
            for warning in exported.left_behind:
                out.warn(warning)
            if exported.vanished:
                out.info(f"{exported.vanished} session(s) disappeared from the source while reading")
            read_back = functools.partial(
                _read_back, source=source, target=target, importer=importer, users=users,
                scope=scope, match=match, with_items=with_items, batch_size=batch_size)
            _run_import(importer, apply=apply, output=output, verb="copy", extra_report=read_back,
                        yes=yes, target=_source_label(target_spec))


def _read_back(result: Any, *, source: Any, target: Any, importer: Any, users: tuple[str, ...],
               scope: Any, match: Optional[str], with_items: bool, batch_size: int) -> Any:
    """The copy's final pass: the source read again and every session compared with the
    target, saying when the source changed meanwhile (counts then cannot agree)."""
    from backends.transfer import verify_copy
    from backends.transfer.export import user_sessions

    out = current().output
    only = user_sessions(source, users, scope) if users else None
    report = verify_copy(source, target, result, owner_subject=scope, match=match,
                         with_items=with_items, batch_size=batch_size,
                         importer=importer, only=only, phases=out.phase)
    expected = result.created + result.skipped + result.expired + len(result.withheld_sessions)
    if report.source_count != expected:
        out.warn(f"the source now holds {report.source_count} matching session(s); "
                 f"{expected} were copied or skipped (it changed during the copy)")
    return report
