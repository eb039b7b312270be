"""``semvecctl erase --user ID [--sessions]``: remove a data subject, with a receipt.

Preview by default (per place, counts). ``--apply`` asks (``--yes`` without a TTY),
removes through :mod:`backends.erasure`, verifies nothing of the user is left and writes
a JSON receipt (``--receipt FILE``, else stdout). Exit 1 when the verification finds
something left; 3 on a backend without an event store.
"""


import json
import os
import sys
from typing import Any, Optional

import typer

from semvecctl.application import current
from semvecctl.connection import open_adapter, resolve_connection
from semvecctl.errors import usage_error
from semvecctl.exit_codes import ExitCode
from semvecctl.options import AdapterFactory, Backend, Output, Uri, Yes
from semvecctl.output import Column, OutputFormat

NAME = "erase"
HELP = "Erase a data subject's events, counter and index entries (preview, then --apply)."

_PLACES = [Column("PLACE", "place", style="bold"), Column("COUNT", "count", justify="right"),
           Column("DETAIL", "detail")]


def _rows(places: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for place, info in places.items():
        detail = info.get("detail") or ""
        if "value" in info and info["value"] is not None:
            detail = f"value {info['value']}"
        if info.get("sessions"):
            detail = f"{len(info['sessions'])} session(s); {detail}"
        rows.append({"place": place, "count": info["count"], "detail": detail})
    return rows


def app(
    user: str = typer.Option(..., "--user", help="The user id (data subject) to erase.", show_default=False),
    sessions: bool = typer.Option(False, "--sessions",
                                  help="Also remove the item-mirror rows of every session the user has events in."),
    apply: bool = typer.Option(False, "--apply", help="Erase (default: preview only)."),
    receipt: Optional[str] = typer.Option(None, "--receipt", show_default=False,
                                          help="Write the JSON receipt to this file (default: stdout)."),
    backend: Backend = None,
    uri: Uri = None,
    adapter: AdapterFactory = None,
    output: Output = OutputFormat.table,
    yes: Yes = False,
) -> None:
    """Preview or erase one data subject; --apply verifies and writes a receipt."""
    from backends.archive import atomic_output
    from backends.erasure import apply_erasure, plan_erasure

    if not user.strip():
        raise usage_error("--user needs a non-empty user id")
    if receipt is not None:
        directory = os.path.dirname(os.path.abspath(receipt))
        if not os.path.isdir(directory) or os.path.isdir(receipt):
            raise usage_error(f"--receipt {receipt}: not a file in an existing directory")
    app_ = current()
    out = app_.output
    spec = resolve_connection(backend, uri, adapter)
    with open_adapter(spec) as adapter_obj:
        plan = plan_erasure(adapter_obj, user, sessions=sessions,
                            progress=lambda items: out.progress(items, label="reading the log"))
        for note in plan.notes:
            out.info(note)
        if not apply:
            report = {"user_id": user, "backend": plan.backend, "applied": False,
                      "places": plan.places()}
            out.emit(report, output, columns=_PLACES, rows=_rows(plan.places()))
            out.info("preview only: nothing was removed (pass --apply to erase)")
            return
        out.confirm(f"erase user {user!r} ({len(plan.event_ids)} event(s)"
                    + (f", item rows of {len(plan.sessions)} session(s)" if plan.sessions else "")
                    + f") from {spec.display_uri}", yes=yes)
        try:
            result = apply_erasure(adapter_obj, plan)
        except BaseException:  # a signal too: the stores' purges are safe to repeat
            out.warn(f"the erasure of user {user!r} did not finish and wrote no receipt; "
                     "run it again with --apply to remove what is left and verify")
            raise
    text = json.dumps(result, indent=2, sort_keys=True) + "\n"
    if receipt is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        with atomic_output(receipt) as stream:
            stream.write(text.encode("utf-8"))
    removed = result["removed"]["events"]["count"]
    if not result["verification"]["ok"]:
        left = ", ".join(f"{k} {v}" for k, v in result["verification"]["left"].items() if v)
        app_.abort(f"erased {removed} event(s) of user {user!r}, but the verification found "
                   f"some left: {left}", ExitCode.CHECK_FAILED)
    out.success(f"erased user {user!r}: {removed} event(s)"
                + (f", {result['removed']['item_mirror']['count']} item row(s)"
                   if "item_mirror" in result["removed"] else "")
                + f"; verified; digest {result['digest']['value'][:16]}…"
                + (f"; receipt in {receipt}" if receipt else ""))
