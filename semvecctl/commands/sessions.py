"""``semvecctl sessions list|count|inspect|delete``: see, count and remove stored sessions.

Generic over the backend: listing needs the SessionEnumerator seam (a streaming scan),
counting uses the store's own count where it offers one (else the scan, counted),
inspecting and deleting only need the state store every backend has.
"""


from enum import Enum
from typing import Any, Optional

import typer

from semvecctl.application import current
from semvecctl.completers import complete_session_id
from semvecctl.commands import help_of
from semvecctl.connection import Connection, require_seam
from semvecctl.exit_codes import ExitCode
from semvecctl.options import (Apply, BatchSize, DeleteOwner, DeleteUnowned, MatchSessions, Output, SessionOwner, SessionUnowned, store_command, StreamOutput, Yes)
from semvecctl.output import Column, OutputFormat, StreamFormat

NAME = "sessions"
HELP = help_of(NAME)

app = typer.Typer(no_args_is_help=True, help=HELP)


_LIST_COLUMNS = [
    Column("SESSION", "session_id", style="bold"),
    Column("VERSION", lambda r: "damaged" if r.get("damaged") else r["version"], justify="right"),
    Column("OWNER", "owner_subject"),
    Column("PENDING", lambda r: _short(r.get("pending_message"), 32)),
    Column("BYTES", "blob_size", justify="right"),
    Column("SHA256", lambda r: r["blob_sha256"][:12]),
    Column("TTL", lambda r: "-" if r.get("ttl_seconds") is None else f"{r['ttl_seconds']}s",
           justify="right"),
]


class SortBy(str, Enum):
    idle = "idle"
    size = "size"
    version = "version"




def _short(text: Optional[str], width: int) -> Optional[str]:
    if text is None or len(text) <= width:
        return text
    return text[: width - 1] + "…"


def summary_row(summary: Any, *, table: bool = False) -> dict[str, Any]:
    """One listing row. A damaged row (the backend lists it with ``extra['damaged']``
    saying which field) keeps its ``damaged`` text, so json/jsonl say so, and its version
    only when the stored one is usable (``null``, never the placeholder 0); the table shows
    VERSION ``damaged``. A table shows the id escaped (:mod:`backends.contract.session_ids`:
    what inspect/delete take back); json/yaml carry it as it is (escaped only when it
    holds bytes that are not UTF-8)."""
    from backends.contract.session_ids import data_id, escape_id

    damaged = bool(summary.extra and summary.extra.get("damaged"))
    row = {
        "session_id": (escape_id if table else data_id)(summary.session_id),
        "version": None if damaged and not summary.version >= 1 else summary.version,
        "owner_subject": summary.owner_subject,
        "pending_message": summary.pending_message,
        "blob_size": summary.blob_size,
        "blob_sha256": summary.blob_sha256,
        "ttl_seconds": summary.ttl_seconds,
    }
    if summary.updated_at is not None:
        row["updated_at"] = summary.updated_at.isoformat()
    if summary.extra:
        row.update({str(k): v for k, v in summary.extra.items()})
    return row


@app.command("list")
@store_command()
def list_sessions(*,
    conn: Connection,
    owner: SessionOwner = None,
    unowned: SessionUnowned = False,
    match: MatchSessions = None,
    limit: Optional[int] = typer.Option(None, "--limit", "-n", min=1, max=1_000_000_000, help="Stop after this many sessions."),
    sort: Optional[SortBy] = typer.Option(
        None, "--sort", case_sensitive=False, show_default=False,
        help="Order by idle (longest since the last write first; needs a store that records "
             "write times), size (largest blob first) or version (highest first). The whole "
             "listing is read before the first row: with --limit only that many summaries are "
             "kept, without it every summary is held in memory (about 0.6 KB each)."),
    batch_size: BatchSize = 500,
    output: StreamOutput = StreamFormat.table,
) -> None:
    """Stream the sessions a backend holds (blobs are summarised, never printed)."""
    import itertools

    from backends.contract import Capability
    from backends.ops.inventory import sessions_in_id_order, sorted_sessions

    out = current().output
    scope = conn.scope
    with conn.open() as adapter_obj:
        require_seam(adapter_obj, Capability.SESSIONS, "session listing")
        if sort is not None:
            summaries = iter(sorted_sessions(
                adapter_obj, adapter_obj.iter_sessions(owner_subject=scope, match=match,
                                                       batch_size=batch_size),
                sort.value, limit))
        else:
            summaries = sessions_in_id_order(adapter_obj, owner_subject=scope, match=match,
                                             batch_size=batch_size)
            if limit is not None:
                summaries = itertools.islice(summaries, limit)
        damaged: list[str] = []

        def rows() -> Any:
            for summary in summaries:
                row = summary_row(summary, table=output == StreamFormat.table)
                if row.get("damaged"):
                    damaged.append(row["session_id"])
                yield row

        count = out.stream(rows(), output, _LIST_COLUMNS)
    if damaged:
        shown = ", ".join(repr(d) for d in damaged[:5]) + (", ..." if len(damaged) > 5 else "")
        current().abort(f"{count} session(s), {len(damaged)} of them damaged ({shown}): "
                        "'semvecctl doctor' names the field of each", ExitCode.CHECK_FAILED)
    out.info(f"{count} session(s)")


@app.command("count")
@store_command()
def count_sessions(*,
    conn: Connection,
    owner: SessionOwner = None,
    unowned: SessionUnowned = False,
    match: MatchSessions = None,
    output: Output = OutputFormat.table,
) -> None:
    """How many sessions 'sessions list' would show with the same filters: the store's
    own count where it has one (PostgreSQL; Redis without an owner filter, a scan of
    keys; memory), else the listing counted as it streams."""
    from backends.contract import Capability
    from backends.ops.inventory import count_sessions as count

    out = current().output
    scope = conn.scope
    with conn.open() as adapter_obj:
        require_seam(adapter_obj, Capability.SESSIONS, "session listing")
        n, by_store = count(adapter_obj, owner_subject=scope, match=match)
    report = {"sessions": n, "counted_by": "store" if by_store else "listing",
              "owner_subject": owner, "unowned": unowned, "match": match}
    out.emit(report, output, columns=[Column("SESSIONS", "sessions", justify="right"),
                                      Column("COUNTED BY", "counted_by")], rows=[report])


@app.command("inspect")
@store_command()
def inspect_session(*,
    session_id: str = typer.Argument(..., help="The session id, as sessions list shows it (escapes: \\n \\t \\r \\e, \\xHH, \\uHHHH; \\\\ a backslash).",
                                    autocompletion=complete_session_id),
    conn: Connection,
    owner: SessionOwner = None,
    unowned: SessionUnowned = False,
    output: Output = OutputFormat.table,
) -> None:
    """Version, owner, pending message, blob size/sha256, TTL and what the blob is."""
    from backends.contract.session_ids import shown, unescape_id
    from backends.ops.snapshot import read_snapshot

    from backends.errors import CorruptState

    out = current().output
    scope = conn.scope
    conn.resolve()
    session_id = unescape_id(session_id)  # the escaped form 'sessions list' shows
    with conn.open() as adapter_obj:
        try:
            state, summary = _unless_unencodable(
                lambda: read_snapshot(adapter_obj, session_id, owner_subject=scope),
                (None, None))
        except CorruptState as exc:
            current().abort(_report_damaged(out, output, adapter_obj.name, exc),
                            ExitCode.CHECK_FAILED)
        if state is None:
            current().abort(f"no session {shown(session_id)}" + ("" if owner is None and not unowned
                                                                 else " with that owner"),
                            ExitCode.CHECK_FAILED)
        report = _inspect_report(session_id, adapter_obj.name, state, summary,
                                 table=output == OutputFormat.table)
    rows = [{"field": k, "value": v} for k, v in report.items()]
    out.emit(report, output, columns=[Column("FIELD", "field", style="bold"), Column("VALUE", "value")],
             rows=rows)


def _inspect_report(session_id: str, backend_name: str, state: Any,
                    summary: Any, *, table: bool = False) -> dict[str, Any]:
    """What ``inspect`` says of a session: its state, what its listing row adds (write
    time, TTL, the backend's extra facts) and what the blob is; the id escaped as
    ``sessions list`` shows it."""
    from backends.contract.session_ids import data_id, escape_id
    from backends.ops.blobinfo import describe_blob

    blob = describe_blob(state.blob)
    report: dict[str, Any] = {
        "session_id": (escape_id if table else data_id)(session_id),
        "backend": backend_name,
        "version": state.version,
        "owner_subject": state.owner_subject,
        "pending_message": state.pending_message,
        "blob_size": blob.size,
        "blob_sha256": blob.sha256,
        "blob_kind": blob.kind,
        "blob_detail": blob.detail,
        "ttl_seconds": summary.ttl_seconds if summary else None,
    }
    if summary is not None:
        if summary.updated_at is not None:
            report["updated_at"] = summary.updated_at.isoformat()
        report.update({str(k): v for k, v in summary.extra.items()})
    report.update(blob.facts)
    return report


def _report_damaged(out: Any, output: Any, backend_name: str, exc: Any) -> str:
    """A row that cannot be read strictly is shown as damaged (which field, what is wrong),
    never as a best-effort value and never as a crash; returns the line to fail with."""
    report = {"session_id": exc.session_id, "backend": backend_name, "status": "damaged",
              "field": exc.field, "problem": exc.problem}
    out.emit(report, output, columns=[Column("FIELD", "field", style="bold"),
                                      Column("VALUE", "value")],
             rows=[{"field": k, "value": v} for k, v in report.items()])
    named = getattr(exc, "shown", None) or repr(exc.session_id)  # an escaped id: not repr
    return (f"session {named} is damaged: field {exc.field!r} {exc.problem} "
            "(not repaired; export what is readable, then restore this session)")


def _unless_unencodable(read: Any, absent: Any) -> Any:
    """``read()``, or ``absent`` when the id holds bytes that are not UTF-8 and the store
    cannot even encode it (only Redis keys are bytes: elsewhere no such session exists)."""
    try:
        return read()
    except Exception as exc:  # noqa: BLE001 - re-raised unless it is the encoding
        if has_undecodable_cause(exc):
            return absent
        raise


def has_undecodable_cause(exc: BaseException) -> bool:
    """Is a UnicodeEncodeError (of a surrogate-escaped id) the failure or its cause?"""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, UnicodeEncodeError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@app.command("delete")
@store_command()
def delete_session(*,
    session_id: str = typer.Argument(..., help="The session id, as sessions list shows it (escapes: \\n \\t \\r \\e, \\xHH, \\uHHHH; \\\\ a backslash).",
                                    autocompletion=complete_session_id),
    conn: Connection,
    owner: DeleteOwner = None,
    unowned: DeleteUnowned = False,
    if_version: Optional[int] = typer.Option(
        None, "--if-version", min=1, max=2**63 - 1, show_default=False,
        help="Delete only if the session is still at this version (as 'inspect' showed it); "
             "a session a writer has moved is a conflict (exit 1) and is left as it is."),
    apply: Apply = False,
    yes: Yes = False,
) -> None:
    """Delete one session (scoped by --owner / --unowned, checked by --if-version): a
    preview unless --apply, which asks first."""
    from backends.contract.session_ids import shown, unescape_id

    out = current().output
    apply = current().wants_apply(apply=apply, yes=yes)
    scope = conn.scope
    spec = conn.spec
    session_id = unescape_id(session_id)  # the escaped form 'sessions list' shows
    with conn.open() as adapter_obj:
        scoped = "" if owner is None and not unowned else (
            f" owned by {owner!r}" if owner is not None else " without an owner")
        at = "" if if_version is None else f" at version {if_version}"
        if not apply:
            version = _unless_unencodable(lambda: adapter_obj.state_store().current_version(
                session_id, owner_subject=scope), None)
            if version is None:
                current().abort(f"no session {shown(session_id)}{scoped}: nothing to delete",
                                ExitCode.CHECK_FAILED)
            now = f" (it is at version {version})" if if_version not in (None, version) else ""
            out.info(f"preview only: would delete session {shown(session_id)}{scoped}{at} from "
                     f"{spec.display_uri}{now}; nothing was changed (pass --apply to delete)")
            return
        current().confirm(f"delete session {shown(session_id)}{scoped}{at} from {spec.display_uri}",
                    yes=yes)
        store = adapter_obj.state_store()
        if if_version is None:
            deleted = _unless_unencodable(
                lambda: store.delete(session_id, owner_subject=scope), False)
        else:
            from backends.registry import accepts_keyword

            if not accepts_keyword(store.delete, "expected_version"):  # never delete unchecked
                current().abort(f"version-checked delete (--if-version) is not supported by "
                                f"backend {adapter_obj.name!r}; nothing was deleted",
                                ExitCode.ENVIRONMENT)
            deleted = _unless_unencodable(lambda: store.delete(
                session_id, owner_subject=scope, expected_version=if_version), False)
    if not deleted:
        current().abort(f"no session {shown(session_id)}{scoped}: nothing deleted",
                        ExitCode.CHECK_FAILED)
    out.success(f"deleted session {shown(session_id)}")


@app.command("seed")
@store_command()
def seed_sessions(*,
    conn: Connection,
    prefix: str = typer.Option("try-", "--prefix", help="Session ids PREFIX0, PREFIX1, ...; "
                               "the events' user is PREFIXuser."),
    sessions: int = typer.Option(3, "--sessions", min=1, max=1000, help="Sessions to write."),
    events: int = typer.Option(2, "--events", min=0, max=100,
                               help="Events each session's turn carries (0: state only)."),
    apply: Apply = False,
    yes: Yes = False,
    output: Output = OutputFormat.table,
) -> None:
    """Write a few example sessions, each by one turn with its events (owner 'demo'): a
    store to try the other commands on. Insert-only: an existing session is left as it
    is. A preview unless --apply."""
    from backends.ops.seed import seed_sessions as seed

    apply = current().wants_apply(apply=apply, yes=yes)
    out = current().output
    spec = conn.spec
    what = (f"write {sessions} example session(s) {prefix}0..{prefix}{sessions - 1} with "
            f"{events} event(s) each to {spec.display_uri}")
    if not apply:
        out.info(f"preview only: would {what}; nothing was written (pass --apply)")
        return
    current().confirm(what, yes=yes)
    with conn.open() as adapter_obj:
        result = seed(adapter_obj, prefix=prefix, sessions=sessions, events=events)
    out.emit(result.to_dict(), output, columns=[Column("SESSION", "id", style="bold"),
                                                Column("WRITTEN", "written")],
             rows=[{"id": sid, "written": "created" if sid in result.created else "existed, kept"}
                   for sid in sorted(result.created + result.existing)])
    out.success(f"{len(result.created)} session(s) and {result.events} event(s) of user "
                f"{result.user!r} written; {len(result.existing)} already there, kept")
