"""``semvecctl sessions prune --idle-for DURATION``: delete sessions nobody wrote lately.

Adds one command to the ``sessions`` group. Preview by default; ``--apply`` deletes,
version-checked, so a session written meanwhile survives; ``--archive FILE`` writes the
idle sessions to an archive first, and an ``--apply`` run journals itself in
``FILE.journal``: a rerun of the same command continues the deletes from that archive
instead of replacing it, and the journal goes once every archived session is dealt with.
An existing archive is replaced only with ``--overwrite``. A store that keeps no write
time is exit 3, never a guess; on Redis ``--assume-ttl`` states the engine's idle TTL and
is checked against every key. The work is :class:`backends.ops.prune.Prune`; this module
parses, asks, and draws the rows.
"""


from dataclasses import replace
from typing import Any, List, Optional

import typer

from semvecctl.application import current
from semvecctl.commands.sessions import app as sessions_app
from semvecctl.connection import Connection, require_seam
from semvecctl.durations import duration_seconds as _duration_seconds
from semvecctl.durations import parse_duration  # the name the prune tests import
from semvecctl.exit_codes import ExitCode
from semvecctl.metrics import recorder
from semvecctl.keyrings import open_keyring
from semvecctl.options import (Apply, AssumeTtl, BatchSize, EncryptTo, EncryptToFile, Identity, MatchSessions, MetricsFile, Overwrite, SessionOwner, SessionUnowned, ShredKeys, SignWith, store_command, StreamOutput, Yes)
from semvecctl.signing import sign, signing_key
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
    encrypt_to: EncryptTo = None,
    encrypt_to_file: EncryptToFile = None,
    identity: Identity = None,
    receipt: Optional[str] = typer.Option(None, "--receipt", show_default=False,
                                          help="With --apply: write a JSON receipt of what was "
                                               "deleted here (ids and their digest)."),
    sign_with: SignWith = None,
    shred_keys: ShredKeys = None,
) -> None:
    """Delete sessions not written for longer than --idle-for (preview unless --apply).

    --encrypt-to encrypts the --archive (age); continuing an interrupted encrypted run
    needs its key: --identity FILE. --receipt FILE (with --sign-with KEY, signed) is the
    evidence of an --apply run."""
    from backends.contract import Capability
    from backends.ops.prune import Prune, PruneRequest, PruneResult

    apply = current().wants_apply(apply=apply, yes=yes)
    key = _receipt_key(receipt, sign_with, overwrite)
    metrics = recorder(metrics_file, "sessions prune")
    request = PruneRequest(
        parse_duration(idle_for), apply=apply, archive=archive, overwrite=overwrite,
        assume_ttl=_parse_ttl(assume_ttl) if assume_ttl is not None else None,
        owner_subject=conn.scope, match=match, batch_size=batch_size, receipt=receipt,
        **_encryption(archive, encrypt_to, encrypt_to_file, identity, shred_keys))
    # with a --receipt, --overwrite may be for it alone
    current().evidence_file(archive, option="--archive", overwrite=overwrite and receipt is None)
    out = current().output
    spec = conn.spec
    result = PruneResult()
    metrics.track(result, backend=spec.backend)
    with open_keyring(shred_keys, create=True) as ring, conn.open() as adapter_obj:
        require_seam(adapter_obj, Capability.SESSIONS, "session listing")
        prune = Prune(adapter_obj, replace(request, source_uri=spec.display_uri, shred_keys=ring),
                      confirm=lambda: current().confirm(
                          f"delete the sessions idle for more than {idle_for} from "
                          f"{spec.display_uri}", yes=yes),
                      notify=out.info, progress=lambda items, label: out.progress(items, label=label),
                      result=result)
        idle = prune.start()
        if apply:
            _stream_deletes(prune, idle, output)
            if receipt is not None:
                out.info(f"receipt in {prune.write_receipt(then=lambda path: sign(path, key))}")
        else:
            label = "archived" if archive is not None else "would delete"
            out.stream((_row(s, label) for s in out.progress(idle, label="scanning")), output,
                       _COLUMNS)
    _summary(prune, idle_for)


def _receipt_key(receipt: Optional[str], sign_with: Optional[str], overwrite: bool) -> Any:
    """Check --receipt and --sign-with before the store is opened; the signing key."""
    import os

    if receipt is not None:  # a preview deletes nothing and writes no receipt, as erase's
        current().evidence_file(receipt, option="--receipt", overwrite=False)
        if os.path.exists(receipt) and not overwrite:
            current().abort(f"--receipt {receipt} already exists: choose another file, or pass "
                            "--overwrite to replace it", ExitCode.USAGE)
    return signing_key(sign_with, receipt)


def _encryption(archive: Optional[str], encrypt_to: Optional[List[str]],
                encrypt_to_file: Optional[List[str]], identity: Optional[List[str]],
                shred_keys: Optional[str] = None) -> dict[str, Any]:
    """The archive's age recipients and identities (keys of PruneRequest)."""
    from semvecctl.commands.sessions_transfer import archive_identities, archive_recipients

    if archive is None and (encrypt_to or encrypt_to_file or identity or shred_keys):
        current().abort("--encrypt-to, --encrypt-to-file, --identity and --shred-keys need "
                        "--archive FILE", ExitCode.USAGE)
    return {"recipients": tuple(archive_recipients(encrypt_to, encrypt_to_file)),
            "identities": tuple(archive_identities(identity))}


def _stream_deletes(prune: Any, idle: Any, output: StreamFormat) -> None:
    """The deletes, a row each; stopped (a signal too), say how far they got: deletes
    are final, and a journalled run is continued by the same command."""
    from semvecctl.interrupts import steps

    out = current().output
    # each delete and its count finish before a signal is taken: the count is exact
    outcomes = steps(prune.delete(out.progress(idle, label="deleting")))
    try:
        out.stream((_row(s, a) for s, a in outcomes), output, _COLUMNS)
    except BaseException:
        journal, archive = prune.journal, prune.request.archive
        kept = (f"; {archive} holds every session it deleted and {journal.path} keeps "
                "it from being replaced" if journal is not None else "")
        out.warn(f"the prune stopped after deleting {prune.result.deleted} session(s){kept}; "
                 "run the same command again to continue")
        raise


def _summary(prune: Any, idle_for: str) -> None:
    """The closing line: what was examined, deleted or kept, and where the archive is."""
    out, result, archive = current().output, prune.result, prune.request.archive
    where = f"; archived {result.archived} to {archive} (digest {result.digest[:16]}…)" if archive else ""
    unknown = f", {result.unknown} without a known write time (left)" if result.unknown else ""
    if not prune.request.apply:
        out.info(f"examined {result.examined} session(s): {result.idle} idle for more than "
                 f"{idle_for}{unknown}{where}; preview only, nothing was deleted (pass --apply)")
        return
    kept = f", {result.kept} written meanwhile and kept" if result.kept else ""
    gone = f", {result.vanished} already gone" if result.vanished else ""
    if prune.resumed:
        gone = (f", {result.vanished} already gone (deleted by the interrupted run or "
                "meanwhile)" if result.vanished else "")
        where = (f"; {archive} holds all {result.archived} session(s) this prune judged "
                 f"idle, every one it deleted (digest {result.digest[:16]}…)")
    out.success(f"examined {result.examined} session(s): deleted {result.deleted}{kept}{gone}"
                f"{unknown}{where}")
