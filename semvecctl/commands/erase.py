"""``semvecctl erase --user ID --owner OWNER|--unowned``: the engine's erasure of one data
subject, with a receipt.

Owner-scoped as the engine's (two tenants' "alice" are two subjects). Preview by default
(per place, counts, the shared sessions). ``--apply`` asks (``--yes`` without a TTY),
erases through :mod:`backends.ops.erasure`, runs a residual scan and writes the JSON receipt
to ``--receipt FILE`` (required: the receipt is the evidence) and stdout. Each step is
journalled in ``FILE.journal``: an interrupted erasure is finished by the same command,
and its receipt covers the whole operation. An existing receipt is replaced only with
``--overwrite``. Exit 1 when the scan finds something left; 3 on a backend without an
event store.
"""


import sys
from typing import Any, Optional

import typer

from semvecctl.application import current
from semvecctl.commands import help_of
from semvecctl.connection import Connection
from semvecctl.exit_codes import ExitCode
from semvecctl.interrupts import deferred
from semvecctl.keyrings import open_keyring
from semvecctl.metrics import recorder
from semvecctl.options import (Apply, MetricsFile, Output, Overwrite, ShredKeys, SignWith, store_command, SubjectOwner,
                               SubjectUnowned, Yes)
from semvecctl.signing import sign, signing_key
from semvecctl.output import Column, OutputFormat

NAME = "erase"
HELP = help_of(NAME)

_PLACES = [Column("PLACE", "place", style="bold"), Column("COUNT", "count", justify="right"),
           Column("DETAIL", "detail")]


def _rows(places: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for place, info in places.items():
        detail = info.get("detail") or ""
        if "value" in info and info["value"] is not None:
            detail = f"value {info['value']}" + (f"; {detail}" if detail else "")
        rows.append({"place": place, "count": info["count"], "detail": detail})
    return rows


@store_command()
def app(*,
    user: str = typer.Option(..., "--user", help="The user id of the data subject.",
                             show_default=False),
    owner: SubjectOwner = None,
    unowned: SubjectUnowned = False,
    apply: Apply = False,
    receipt: Optional[str] = typer.Option(None, "--receipt", show_default=False,
                                          help="Write the JSON receipt here (required with "
                                               "--apply; FILE.journal keeps an interrupted "
                                               "erasure resumable)."),
    overwrite: Overwrite = False,
    conn: Connection,
    output: Output = OutputFormat.table,
    yes: Yes = False,
    metrics_file: MetricsFile = None,
    sign_with: SignWith = None,
    shred_keys: ShredKeys = None,
) -> None:
    """Preview or erase one data subject; --apply verifies and writes a receipt."""
    from backends.ops.erasure import Erasure

    apply = current().wants_apply(apply=apply, yes=yes)
    metrics = recorder(metrics_file, "erase")
    _refuse_arguments(user, owner, unowned, apply, receipt, overwrite)
    key = signing_key(sign_with, receipt)  # checked before the store is opened
    out = current().output
    spec = conn.spec
    with open_keyring(shred_keys) as ring, conn.open() as adapter_obj:
        erasure = Erasure(adapter_obj, user, owner, receipt=receipt, source_uri=spec.display_uri,
                          apply=apply, overwrite=overwrite)
        if erasure.finished():
            sign(receipt or "", key, unless_signed=True)
            out.success(f"this erasure had finished: its receipt is {receipt}")
            return
        plan = erasure.plan(progress=lambda items: out.progress(items, label="reading the log"))
        subject = f"user {user!r} " + (f"of owner {owner!r}" if owner else "without an owner")
        _warn_about(plan)
        if not apply:
            _preview(plan, erasure, output)
            return
        current().confirm(f"erase {subject} ({len(plan.event_ids)} event(s), the state of "
                          f"{len(plan.states)} session(s)"
                          + (f", {len(plan.shared)} of them shared" if plan.shared else "")
                          + f") from {spec.display_uri}", yes=yes)
        journal = erasure.open_journal()
        if journal.resumed:
            out.info(f"continuing the interrupted erasure journalled in {journal.path}")
        try:
            result = erasure.run(plan, unit=deferred)
            metrics.track(result, backend=plan.backend)
        except BaseException:  # a signal too: the journal keeps what was done
            out.warn(f"the erasure of {subject} did not finish and wrote no receipt yet; "
                     f"{journal.path} records what it did: run the same command again to "
                     "finish it (its receipt will cover the whole erasure)")
            raise
        if ring is not None:
            _shred(adapter_obj, plan, result, ring)
        text = erasure.write_receipt(result, then=lambda path: sign(path, key))
    sys.stdout.write(text)
    sys.stdout.flush()
    _report(result, subject, receipt)


def _shred(adapter: Any, plan: Any, result: dict[str, Any], ring: Any) -> None:
    """Destroy the subject's shred keys and those of the sessions it removed."""
    from backends.ops.erasure import shred_keys_of

    gone = shred_keys_of(adapter, plan, result, ring)
    current().output.info(f"destroyed {gone} shred key(s) in {ring.path}: no archive sealed "
                          "with that keyring yields this subject's records any more")


def _refuse_arguments(user: str, owner: Optional[str], unowned: bool, apply: bool,
                      receipt: Optional[str], overwrite: bool) -> None:
    """The flags that contradict each other, refused before any store is named (exit 2)."""
    if not user.strip():
        current().abort("--user needs a non-empty user id", ExitCode.USAGE)
    if (owner is None) == (not unowned):
        current().abort("name the subject's owner: --owner OWNER, or --unowned for events "
                        "without one (two owners' users are two data subjects)", ExitCode.USAGE)
    if owner is not None and not owner.strip():
        current().abort("--owner needs a non-empty owner (or pass --unowned)", ExitCode.USAGE)
    if apply and receipt is None:
        current().abort("--apply needs --receipt FILE: the receipt is the evidence, and "
                        "FILE.journal lets the same command finish an interrupted erasure", ExitCode.USAGE)
    current().evidence_file(receipt, option="--receipt", overwrite=overwrite)


def _warn_about(plan: Any) -> None:
    """The plan's notes, its shared sessions and its damaged events, on stderr."""
    out = current().output
    for note in plan.notes:
        out.info(note)
    if plan.shared:
        out.warn("shared session(s), whose state goes with this subject's (the other "
                 "subjects' events stay): " + "; ".join(
                     f"{sid} (also {', '.join(who)})" for sid, who in sorted(plan.shared.items())))
    if plan.damaged:
        out.warn(f"{len(plan.damaged)} damaged event(s) of this subject are erased by id: "
                 + ", ".join(sorted(plan.damaged)))


def _preview(plan: Any, erasure: Any, output: OutputFormat) -> None:
    from backends.ops.journal import journal_path

    out = current().output
    report = {"user_id": plan.user_id, "owner_subject": plan.owner,
              "unowned": plan.owner is None, "backend": plan.backend, "applied": False,
              "places": plan.places(), "shared_sessions": dict(sorted(plan.shared.items()))}
    out.emit(report, output, columns=_PLACES, rows=_rows(plan.places()))
    if erasure.interrupted:
        out.info(f"an interrupted erasure is journalled in {journal_path(erasure.receipt)}: "
                 "--apply continues it")
    out.info("preview only: nothing was removed (pass --apply to erase)")


def _report(result: dict[str, Any], subject: str, receipt: Optional[str]) -> None:
    """The closing line: verified, or what the residual scan found left (exit 1)."""
    out = current().output
    if not result["verification"]["ok"]:
        left = ", ".join(f"{k} {v}" for k, v in result["verification"]["left"].items() if v)
        survivors = (f"; state survived in {', '.join(result['state_survivors'])}, so the "
                     "events were kept for a retry" if result["state_survivors"] else "")
        current().abort(f"erased {result['events_deleted']} event(s) of {subject}, but the "
                        f"residual scan found some left: {left}{survivors}; receipt in {receipt}",
                        ExitCode.CHECK_FAILED)
    out.success(f"erased {subject}: {result['events_deleted']} event(s), "
                f"{result['states_deleted']} state(s), {result['materialized_deleted']} item "
                f"row(s)" + (f", {len(result['shared_sessions'])} shared session(s)"
                             if result["shared_sessions"] else "")
                + (f" over {result['runs']} run(s)" if result["runs"] > 1 else "")
                + f"; verified; digest {result['digest']['value'][:16]}…; receipt in {receipt}")
