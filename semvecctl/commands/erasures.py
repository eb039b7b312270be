"""``semvecctl erasures list|check``: the store's erasure ledger, which every restore path
consults so that an erased subject's older data is never written back.

``list`` shows each entry by a prefix of its keyed hash (never an id), its time and its
receipt reference. ``check --user U [--owner O]`` answers whether that subject was erased,
when and by which receipt, as ``grep`` and ``kubectl wait`` answer: exit 0 erased, 1 not
erased, 3 on a backend that keeps no ledger. The work is in :mod:`backends.ops.ledger`.
"""


import typer

from semvecctl.application import current
from semvecctl.commands import help_of
from semvecctl.connection import Connection
from semvecctl.exit_codes import ExitCode
from semvecctl.options import LedgerOwner, Output, store_command
from semvecctl.output import Column, OutputFormat

NAME = "erasures"
HELP = help_of(NAME)

app = typer.Typer(no_args_is_help=True, help=HELP)

_COLUMNS = [Column("SUBJECT", "subject", style="bold"), Column("ERASED AT", "erased_at"),
            Column("RECEIPT", "receipt"), Column("KEY", "key")]


@app.command("list")
@store_command()
def list_erasures(*, conn: Connection, output: Output = OutputFormat.table) -> None:
    """List the ledger's entries: hash prefix, erasure time, receipt reference."""
    from backends.ops.ledger import list_erasures as entries_of

    out = current().output
    with conn.open() as adapter_obj:
        rows = entries_of(adapter_obj)
    out.emit(rows, output, columns=_COLUMNS, rows=[{**r, "receipt": r["receipt"] or "-"}
                                                   for r in rows])
    out.info(f"{len(rows)} erased subject(s) in the ledger of {conn.display_uri}")


@app.command("check")
@store_command()
def check(*, user: str = typer.Option(..., "--user", show_default=False,
                                      help="The user id of the data subject."),
          owner: LedgerOwner = None, conn: Connection,
          output: Output = OutputFormat.table) -> None:
    """Was this subject erased? Exit 0 erased (when, which receipt), 1 not erased."""
    from backends.ops.ledger import check_erasure

    if not user.strip():
        current().abort("--user must not be empty", ExitCode.USAGE)
    out = current().output
    with conn.open() as adapter_obj:
        verdict = check_erasure(adapter_obj, user, owner)
    line = (f"erased at {verdict['erased_at']} (receipt {verdict['receipt'] or 'none'})"
            if verdict["erased"] else "not erased: the ledger holds no entry for this subject")
    out.emit(verdict, output, table=lambda: out.write(line))
    if not verdict["erased"]:
        current().abort("", ExitCode.CHECK_FAILED)
